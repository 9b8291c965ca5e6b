// lull-web/vue in lockstep with @vueuse/core: the same scripts of calls, a
// new function (given as a ref), and fake-clock advances go to both
// libraries' composables, and every run must come at the same fake time,
// with the same argument, calling the same function; the debounced ref must
// hold the same value after every step. Where their semantics agree: a
// trailing debounce with a wait of at least 1 ms and no `maxWait` (VueUse
// has no `leading`/`trailing`, runs a 0 ms wait at once, and times `maxWait`
// differently after a forced run).
// Cancels go to both (refDebounced has none: its scripts have calls there).
// The places where lull differs on purpose each have their own test
// (differences.test.mjs).
import { refDebounced, useDebounceFn } from '@vueuse/core';
import { nextTick, shallowRef } from 'vue';
import { describe, expect, test, vi } from 'vitest';
import { useDebouncedFn, useDebouncedRef } from 'lull-web/vue';
import { script } from '../lockstep-scripts.mjs';
import { lockstep, withSetup } from './lockstep.mjs';

const SCRIPTS = 150;
const AGREED = { waits: [1, 20, 50, 100], options: [undefined] };

describe("useDebouncedFn runs as VueUse's useDebounceFn", () => {
  let runs = 0;
  for (let seed = 1; seed <= SCRIPTS; seed++) {
    const s = script(seed, AGREED);
    test(`seed ${seed}: debounce(${s.wait})`, async () => {
      const seen = await lockstep(
        {
          lull: useDebouncedFn,
          // VueUse calls the function it was given: it reads the ref itself.
          vueuse: (fn, wait, options) => useDebounceFn((x) => fn.value(x), wait, options),
        },
        s,
      );
      expect(seen.lull).toEqual(seen.vueuse);
      runs += seen.vueuse.length;
    });
  }
  test('the scripts really run (runs in all)', () => expect(runs).toBeGreaterThan(1000));
});

describe("useDebouncedRef passes values on as VueUse's refDebounced", () => {
  let values = 0;
  for (let seed = 1; seed <= SCRIPTS; seed++) {
    const s = script(seed, { ...AGREED, cancels: false });
    test(`seed ${seed}: ref(${s.wait})`, async () => {
      vi.useFakeTimers({ now: 1_000_000 });
      const seen = { lull: [], vueuse: [] };
      try {
        const source = shallowRef(-1);
        let refs;
        const wrapper = withSetup(() => {
          refs = { lull: useDebouncedRef(source, s.wait), vueuse: refDebounced(source, s.wait) };
        });
        for (const step of s.steps) {
          if ('call' in step) source.value = step.call; // a new value
          else if ('advance' in step) vi.advanceTimersByTime(step.advance);
          else continue;
          await nextTick();
          for (const name of ['lull', 'vueuse']) seen[name].push([Date.now(), refs[name].value]);
        }
        wrapper.unmount();
      } finally {
        vi.useRealTimers();
      }
      expect(seen.lull).toEqual(seen.vueuse);
      values += new Set(seen.vueuse.map(([, v]) => v)).size;
    });
  }
  test('the scripts really pass values on (distinct values seen in all)', () => expect(values).toBeGreaterThan(1000));
});
