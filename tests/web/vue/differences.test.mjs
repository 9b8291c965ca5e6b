// Where lull-web/vue differs from @vueuse/core on purpose, each with why.
// The same calls go to both composables, set up side by side under fake timers.
import { refDebounced, useDebounceFn, useThrottleFn } from '@vueuse/core';
import { isRef, nextTick, ref } from 'vue';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { useDebouncedAsync, useDebouncedFn, useDebouncedRef, useThrottledFn } from 'lull-web/vue';
import { withSetup } from './lockstep.mjs';

beforeEach(() => vi.useFakeTimers({ now: 0 }));
afterEach(() => vi.useRealTimers());

/** Both libraries' debounced function side by side in one component; `runs` of each as [fake time, argument]. */
function sideBySide(wait, options) {
  const runs = { lull: [], vueuse: [] };
  let d;
  const wrapper = withSetup(() => {
    d = {
      lull: useDebouncedFn((x) => (runs.lull.push([Date.now(), x]), x), wait, options),
      vueuse: useDebounceFn((x) => (runs.vueuse.push([Date.now(), x]), x), wait, options),
    };
  });
  const both = (f) => ['lull', 'vueuse'].forEach((name) => f(d[name]));
  return { runs, d, both, wrapper };
}

test("a wait of 0 runs after a 0 ms timer, as lodash's: a synchronous loop of calls runs once (VueUse runs each call at once)", () => {
  const { runs, both } = sideBySide(0);
  for (let i = 1; i <= 3; i++) both((d) => d(i));
  expect(runs.vueuse).toEqual([[0, 1], [0, 2], [0, 3]]);
  expect(runs.lull).toEqual([]);
  vi.advanceTimersByTime(0);
  expect(runs.lull).toEqual([[0, 3]]);
});

test("no wait means lodash's 0 ms (VueUse's default is 200 ms)", () => {
  const { runs, both } = sideBySide(undefined);
  both((d) => d(1));
  vi.advanceTimersByTime(0);
  expect(runs.lull).toEqual([[0, 1]]);
  expect(runs.vueuse).toEqual([]);
  vi.advanceTimersByTime(200);
  expect(runs.vueuse).toEqual([[200, 1]]);
});

test('a change of wait applies from the next burst: the burst in progress ends under the wait it began with (VueUse re-arms the next call with the new wait)', () => {
  const wait = ref(100);
  const { runs, both } = sideBySide(wait);
  both((d) => d(1));
  wait.value = 20;
  vi.advanceTimersByTime(10);
  both((d) => d(2));
  vi.advanceTimersByTime(200);
  expect(runs.lull).toEqual([[110, 2]]); // 10 + the burst's 100
  expect(runs.vueuse).toEqual([[30, 2]]); // 10 + the new 20: the burst is cut short
});

test('disposing the scope drops the pending call (or runs it, with flushOnUnmount): nothing runs for a component that is gone (VueUse runs it after the unmount)', () => {
  const { runs, both, wrapper } = sideBySide(100);
  both((d) => d('draft'));
  wrapper.unmount();
  vi.advanceTimersByTime(200);
  expect(runs.lull).toEqual([]);
  expect(runs.vueuse).toEqual([[100, 'draft']]);
  const saved = sideBySide(100, { flushOnUnmount: true });
  saved.both((d) => d('autosave'));
  saved.wrapper.unmount();
  expect(saved.runs.lull).toEqual([[200, 'autosave']]); // at once, not a quiet period later
});

test("maxWait: after a run it forces, the next forced run comes maxWait after that run, as in lodash (VueUse counts from the next call)", () => {
  const { runs, both } = sideBySide(100, { maxWait: 150 });
  for (let t = 0; t <= 400; t += 40) {
    both((d) => d(t));
    vi.advanceTimersByTime(40);
  }
  vi.advanceTimersByTime(500);
  expect(runs.lull.slice(0, 2)).toEqual([[150, 120], [300, 280]]);
  expect(runs.vueuse.slice(0, 2)).toEqual([[150, 120], [310, 280]]); // 160 (the next call) + 150
});

test('every caller gets its own window\'s result from useDebouncedAsync (VueUse resolves a superseded call with undefined)', async () => {
  let d;
  const wrapper = withSetup(() => {
    d = { lull: useDebouncedAsync(async (x) => x * 10, 50), vueuse: useDebounceFn(async (x) => x * 10, 50) };
  });
  const lull = [d.lull.run(1), d.lull.run(2)];
  const vueuse = [d.vueuse(1), d.vueuse(2)];
  vi.advanceTimersByTime(50);
  expect(await Promise.all(lull)).toEqual([20, 20]);
  expect(await Promise.all(vueuse)).toEqual([undefined, 20]);
  wrapper.unmount();
});

test('a wait that is not milliseconds is refused with a clear TypeError (VueUse passes it to setTimeout)', () => {
  const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
  expect(() => withSetup(() => useDebouncedRef(ref(1), '300ms'))).toThrow(
    new TypeError('lull: `wait` must be a number of milliseconds from 0 to 9007199254740991 or "auto"'),
  );
  expect(() => withSetup(() => refDebounced(ref(1), '300ms'))).not.toThrow();
  warn.mockRestore();
});

test('useDebouncedRef has controls VueUse\'s refDebounced lacks: flush() takes the pending value now', async () => {
  const source = ref('a');
  let refs;
  withSetup(() => {
    refs = { lull: useDebouncedRef(source, 100), vueuse: refDebounced(source, 100) };
  });
  source.value = 'ab';
  await nextTick();
  refs.lull.flush();
  expect([refs.lull.value, refs.vueuse.value]).toEqual(['ab', 'a']);
  expect(refs.vueuse.flush).toBeUndefined();
});

test("pending() is a function that reads the debouncer now, as lodash's (VueUse's isPending is a readonly ref)", () => {
  const { d, both } = sideBySide(100);
  both((f) => f(1));
  expect(d.lull.pending()).toBe(true);
  expect(isRef(d.vueuse.isPending) && d.vueuse.isPending.value).toBe(true);
  vi.advanceTimersByTime(100);
  expect([d.lull.pending(), d.vueuse.isPending.value]).toEqual([false, false]);
});

test("throttle: a call a whole wait after the burst's last call starts a new burst and runs at once, as lodash's (VueUse's useThrottleFn times it from its last run, so it waits)", () => {
  vi.setSystemTime(1_000_000); // (VueUse's throttle counts from its last run, first taken as the clock's 0)
  const runs = { lull: [], vueuse: [] };
  const at = (name) => (x) => runs[name].push([Date.now() - 1_000_000, x]);
  let d;
  withSetup(() => {
    d = { lull: useThrottledFn(at('lull'), 100), vueuse: useThrottleFn(at('vueuse'), 100) };
  });
  const both = (x) => ['lull', 'vueuse'].forEach((name) => d[name](x));
  both(1); // leading, at 0
  vi.advanceTimersByTime(10);
  both(2); // trailing, at 100
  vi.advanceTimersByTime(140);
  both(3); // at 150: 140 ms after the last call
  vi.advanceTimersByTime(300);
  expect(runs.lull).toEqual([[0, 1], [100, 2], [150, 3]]);
  expect(runs.vueuse).toEqual([[0, 1], [100, 2], [200, 3]]);
});
