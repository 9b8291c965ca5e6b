// Running the shared scripts (../lockstep-scripts.mjs) in lockstep through
// lull-web/vue's composables and @vueuse/core's under Vitest's fake timers,
// each pair set up by one component mounted with @vue/test-utils.
import { mount } from '@vue/test-utils';
import { nextTick, shallowRef } from 'vue';
import { vi } from 'vitest';

/** Mount a component whose setup is `setup()` (it renders nothing); its wrapper. */
export const withSetup = (setup) => mount({ setup: () => (setup(), () => null) });

/**
 * Set up `fns` (name -> (fn, wait, options) => debounced; `fn` is a ref of the
 * function, the way each library can call the newest) side by side and run
 * `steps` through each under fake timers from a fixed time: calls, clock
 * advances, a new function (a "render"), cancels. Returns, per name, the runs
 * each saw: [fake time, argument, which function ran].
 */
export async function lockstep(fns, { wait, options, steps }) {
  vi.useFakeTimers({ now: 1_000_000 });
  const names = Object.keys(fns);
  const seen = Object.fromEntries(names.map((name) => [name, []]));
  const fnFor = (name, render) => (x) => (seen[name].push([Date.now(), x, render]), x);
  const current = Object.fromEntries(names.map((name) => [name, shallowRef(fnFor(name, -1))]));
  let debounced;
  try {
    const wrapper = withSetup(() => {
      debounced = Object.fromEntries(names.map((name) => [name, fns[name](current[name], wait, options)]));
    });
    for (const step of steps) {
      if ('call' in step) names.forEach((name) => debounced[name](step.call));
      else if ('cancel' in step) names.forEach((name) => debounced[name].cancel());
      else if ('render' in step) names.forEach((name) => (current[name].value = fnFor(name, step.render)));
      else vi.advanceTimersByTime(step.advance);
      await nextTick();
    }
    wrapper.unmount();
    await nextTick();
  } finally {
    vi.useRealTimers();
  }
  return seen;
}
