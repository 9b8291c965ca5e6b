// Shared scripts of calls, re-renders, cancels and clock advances, which the
// framework adapters' lockstep tests (react/, vue/) send to lull-web's
// adapter and to the framework's usual peer under Vitest's fake timers.

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
 * (`x` = their index), clock advances, cancels (calls instead where the peer
 * has no cancel: `cancels: false`), and re-renders with a new function (each
 * must call the newest). `extra` may add a step kind.
 */
export function script(seed, { waits = [0, 20, 50, 100], options, extra, cancels = true } = {}) {
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
    else if (roll < 19) steps.push(cancels ? { cancel: true } : { call: i });
    else steps.push(extra?.(r) ?? { advance: wait });
  }
  steps.push({ advance: 10 * (wait + 200) });
  return { wait, options: chosen, steps };
}
