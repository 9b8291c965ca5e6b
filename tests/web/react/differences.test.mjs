// Where lull-web/react differs from use-debounce on purpose, each with why.
// The same calls go to both hooks, rendered side by side under fake timers.
import { act, cleanup, render, renderHook } from '@testing-library/react';
import { StrictMode, createElement as h, useEffect } from 'react';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { useDebouncedCallback as udDebounced, useThrottledCallback as udThrottled } from 'use-debounce';
import { useDebouncedCallback, useThrottledCallback } from 'lull-web/react';

beforeEach(() => vi.useFakeTimers({ now: 0 }));
afterEach(() => {
  cleanup();
  vi.useRealTimers();
});

/** Both libraries' hook side by side; `runs` of each as [fake time, argument]. */
function sideBySide(lull, ud, wait, options) {
  const runs = { lull: [], ud: [] };
  const { result, rerender, unmount } = renderHook(
    ({ wait }) => ({ lull: lull((x) => runs.lull.push([Date.now(), x]), wait, options), ud: ud((x) => runs.ud.push([Date.now(), x]), wait, options) }),
    { initialProps: { wait } },
  );
  const both = (f) => act(() => ['lull', 'ud'].forEach((name) => f(result.current[name])));
  const advance = (ms) => act(() => vi.advanceTimersByTime(ms));
  return { runs, both, advance, rerender, unmount };
}

test("flush() ends the window and disarms its timer: the next burst is timed from its own first call (use-debounce, like lodash#4648, leaves the old timer armed and times it from there)", () => {
  const { runs, both, advance } = sideBySide(useThrottledCallback, udThrottled, 50);
  both((d) => d(1)); // leading run at 0
  advance(10);
  both((d) => d(2));
  both((d) => d.flush()); // runs 2 at 10
  advance(20);
  both((d) => d(3)); // at 30
  advance(200);
  expect(runs.lull).toEqual([[0, 1], [10, 2], [80, 3]]); // 30 + wait: a new window
  expect(runs.ud).toEqual([[0, 1], [10, 2], [60, 3]]); // the timer armed before the flush
});

test('StrictMode: flushOnUnmount waits for a real unmount (use-debounce flushOnExit flushes at its simulated one, running a call made during mount at once)', async () => {
  const runs = { lull: [], ud: [] };
  function Autosave() {
    const lull = useDebouncedCallback((x) => runs.lull.push([Date.now(), x]), 100, { flushOnUnmount: true });
    const ud = udDebounced((x) => runs.ud.push([Date.now(), x]), 100, { flushOnExit: true });
    useEffect(() => {
      lull('draft');
      ud('draft');
    }, [lull, ud]);
    return null;
  }
  const { unmount } = render(h(StrictMode, null, h(Autosave)));
  await act(async () => {}); // the microtask that would decide an unmount
  expect(runs.lull).toEqual([]);
  expect(runs.ud).toEqual([[0, 'draft']]); // flushed by StrictMode's simulated unmount
  act(() => vi.advanceTimersByTime(100));
  expect(runs.lull).toEqual([[100, 'draft']]); // once, when its quiet period ends
  unmount();
  await act(async () => {});
  expect(runs.lull).toHaveLength(1); // nothing was pending: nothing to flush
});

test("no wait means lodash's 0 ms (use-debounce waits for an animation frame)", () => {
  const { runs, both, advance } = sideBySide(useDebouncedCallback, udDebounced, undefined);
  both((d) => d(1));
  advance(0);
  expect(runs.lull).toEqual([[0, 1]]);
  expect(runs.ud).toEqual([]);
  advance(16);
  expect(runs.ud).toEqual([[16, 1]]);
});

test('a wait that is not milliseconds is refused with a clear TypeError (use-debounce reads it as 0)', () => {
  const quiet = vi.spyOn(console, 'error').mockImplementation(() => {});
  expect(() => renderHook(() => useDebouncedCallback(() => {}, '300ms'))).toThrow(
    new TypeError('lull: `wait` must be a number of milliseconds from 0 to 9007199254740991 or "auto"'),
  );
  expect(() => renderHook(() => useThrottledCallback(() => {}, 'auto'))).toThrow(/`wait` must be a number of milliseconds/);
  expect(() => renderHook(() => udDebounced(() => {}, '300ms'))).not.toThrow();
  quiet.mockRestore();
});
