// Running the shared scripts (../lockstep-scripts.mjs) in lockstep through
// lull-web/react's hooks and use-debounce's under Vitest's fake timers.
import { act, renderHook } from '@testing-library/react';
import { vi } from 'vitest';

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
