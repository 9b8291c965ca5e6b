// lull-web/react in lockstep with use-debounce: the same scripts of calls,
// re-renders (a new function each time), cancels and fake-clock advances go
// to both libraries' hooks, and every run must come at the same fake time,
// with the same argument, calling the same render's function; the debounced
// value must be the same after every step. The places where lull differs on
// purpose each have their own test (differences.test.mjs).
import { act, renderHook } from '@testing-library/react';
import { describe, expect, test, vi } from 'vitest';
import { useDebounce as udValue, useDebouncedCallback as udDebounced, useThrottledCallback as udThrottled } from 'use-debounce';
import { useDebouncedCallback, useDebouncedValue, useThrottledCallback } from 'lull-web/react';
import { script } from '../lockstep-scripts.mjs';
import { lockstep } from './lockstep.mjs';

const SCRIPTS = 150;

describe("useDebouncedCallback and useThrottledCallback run as use-debounce's", () => {
  let runs = 0;
  for (let seed = 1; seed <= SCRIPTS; seed++) {
    const throttled = seed % 3 === 0;
    const s = script(seed);
    test(`seed ${seed}: ${throttled ? 'throttle' : 'debounce'}(${s.wait}, ${JSON.stringify(s.options)})`, async () => {
      const hooks = throttled ? { lull: useThrottledCallback, ud: udThrottled } : { lull: useDebouncedCallback, ud: udDebounced };
      const seen = await lockstep(hooks, s);
      expect(seen.lull).toEqual(seen.ud);
      runs += seen.ud.length;
    });
  }
  test('the scripts really run (runs in all)', () => expect(runs).toBeGreaterThan(1000));
});

describe("useDebouncedValue passes values on as use-debounce's useDebounce", () => {
  let steps = 0;
  for (let seed = 1; seed <= SCRIPTS; seed++) {
    const s = script(seed);
    test(`seed ${seed}: value(${s.wait}, ${JSON.stringify(s.options)})`, async () => {
      vi.useFakeTimers({ now: 1_000_000 });
      const seen = { lull: [], ud: [] };
      try {
        const { result, rerender, unmount } = renderHook(({ v }) => ({ lull: useDebouncedValue(v, s.wait, s.options)[0], ud: udValue(v, s.wait, s.options)[0] }), {
          initialProps: { v: -1 },
        });
        for (const step of s.steps) {
          if ('call' in step) rerender({ v: step.call }); // a new value
          else if ('advance' in step) act(() => vi.advanceTimersByTime(step.advance));
          else continue;
          await act(async () => {});
          for (const name of ['lull', 'ud']) seen[name].push([Date.now(), result.current[name]]);
        }
        unmount();
      } finally {
        vi.useRealTimers();
      }
      expect(seen.lull).toEqual(seen.ud);
      steps += new Set(seen.ud.map(([, v]) => v)).size;
    });
  }
  test('the scripts really pass values on (distinct values seen in all)', () => expect(steps).toBeGreaterThan(1000));
});
