// Shared scripts of calls, renders and clock advances, sent in lockstep to
// lull-web/react's hooks and to use-debounce's under Vitest's fake timers.
import { act, renderHook } from '@testing-library/react';
import { vi } from 'vitest';

/** A small seeded generator, so every run checks the same scripts. */
export function rng(seed) {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

/**
 * A script: a wait, options as both libraries take them, and steps: calls
 * (`x` = their index), clock advances, cancels, and re-renders with a new
 * function (each hook must call the newest). `extra` may add a step kind.
 */
export function script(seed, { waits = [0, 20, 50, 100], options, extra } = {}) {
  const r = rng(seed);
  const wait = waits[r(waits.length)];
  const choices = options ?? [undefined, { leading: true }, { maxWait: wait * 2 + 10 }, { leading: true, trailing: false }];
  const chosen = choices[r(choices.length)];
  const steps = [];
  for (let i = 0; i < 40; i++) {
    const roll = r(20);
    if (roll < 9) steps.push({ call: i });
    else if (roll < 16) steps.push({ advance: [0, 1, wait, wait + 1, r(3 * wait + 20)][r(5)] });
    else if (roll < 18) steps.push({ render: i });
    else if (roll < 19) steps.push({ cancel: true });
    else steps.push(extra?.(r) ?? { advance: wait });
  }
  steps.push({ advance: 10 * (wait + 200) });
  return { wait, options: chosen, steps };
}

/** Let the task's microtasks run, as between two events of a page. */
const turn = () => act(async () => {});

/**
 * Render `hooks` (name -> (fn, wait, options) => debounced) side by side and
 * run `steps` through each, under fake timers from a fixed time. Returns,
 * per name, the runs each saw: [fake time, argument, which render's function ran].
 */
export async function lockstep(hooks, { wait, options, steps }) {
  vi.useFakeTimers({ now: 1_000_000 });
  const names = Object.keys(hooks);
  const seen = Object.fromEntries(names.map((name) => [name, []]));
  const fnFor = (name, render) => (x) => (seen[name].push([Date.now(), x, render]), x);
  try {
    const { result, rerender, unmount } = renderHook(
      ({ render }) => Object.fromEntries(names.map((name) => [name, hooks[name](fnFor(name, render), wait, options)])),
      { initialProps: { render: -1 } },
    );
    for (const step of steps) {
      if ('call' in step) act(() => names.forEach((name) => result.current[name](step.call)));
      else if ('cancel' in step) act(() => names.forEach((name) => result.current[name].cancel()));
      else if ('flush' in step) act(() => names.forEach((name) => result.current[name].flush()));
      else if ('render' in step) rerender({ render: step.render });
      else act(() => vi.advanceTimersByTime(step.advance));
      await turn();
    }
    unmount();
    await turn();
  } finally {
    vi.useRealTimers();
  }
  return seen;
}
