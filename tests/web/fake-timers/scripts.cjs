// The scripts every fake-timer test runs (Vitest; Jest, as ES modules and in
// its default CommonJS mode): calls and clock advances, each sent to lodash
// and to lull-web in lockstep. CommonJS, so that Jest's CommonJS mode loads it too.
const lodashDebounce = require('lodash.debounce');
const lodashThrottle = require('lodash.throttle');

/** A small seeded generator, so every run checks the same scripts. */
function rng(seed) {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

/** A script: calls (`x` = their index) and clock advances, with a wait and options. */
function script(seed) {
  const r = rng(seed);
  const wait = [0, 20, 50, 100][r(4)];
  const options = [undefined, { leading: true }, { maxWait: wait * 2 + 10 }, { leading: true, trailing: false }][r(4)];
  const steps = [];
  for (let i = 0; i < 40; i++) {
    const roll = r(10);
    if (roll < 5) steps.push({ call: i });
    else if (roll < 9) steps.push({ advance: [0, 1, wait, wait + 1, r(3 * wait + 20)][r(5)] });
    else steps.push({ cancel: true });
  }
  steps.push({ advance: 10 * (wait + 200) });
  return { wait, options, steps };
}

/** Run `steps` through `a` and `b` (made by `make(func)`) in lockstep; the runs each saw. */
async function lockstep(makeA, makeB, steps, advance) {
  const seen = [[], []];
  const fns = [makeA, makeB].map((make, i) => make((x) => (seen[i].push([Date.now(), x]), x)));
  for (const step of steps) {
    if ('call' in step) for (const f of fns) f(step.call);
    else if ('cancel' in step) for (const f of fns) f.cancel();
    else await advance(step.advance);
  }
  return seen;
}


/**
 * Run the debounce/throttle scripts (seeds 1..300) and the debounceAsync ones
 * (1..100) through lodash and `lull` in lockstep under a test framework's fake
 * timers (`fake`: install at a time, advance, advance letting promises run,
 * uninstall). Returns, per script, [what it was, lodash's runs, lull-web's runs].
 */
async function allScripts(lull, fake) {
  const out = [];
  for (let seed = 1; seed <= 300; seed++) {
    const { wait, options, steps } = script(seed);
    const throttle = seed % 3 === 0;
    fake.install(1_000_000);
    const [lodash, mine] = await lockstep(
      (f) => (throttle ? lodashThrottle(f, wait, options) : lodashDebounce(f, wait, options)),
      (f) => (throttle ? lull.throttle(f, wait, options) : lull.debounce(f, wait, options)),
      steps,
      fake.advance,
    );
    fake.uninstall();
    out.push([`seed ${seed}: ${throttle ? 'throttle' : 'debounce'}(${wait}, ${JSON.stringify(options)})`, lodash, mine]);
  }
  for (let seed = 1; seed <= 100; seed++) {
    const { wait, options, steps } = script(seed);
    if (options?.trailing === false) continue; // a promise per call: every window settles
    fake.install(1_000_000);
    const [lodash, mine] = await lockstep(
      (f) => lodashDebounce(f, wait, options),
      (f) => {
        const d = lull.debounceAsync(async (x) => f(x), wait, options);
        const call = (x) => void d(x).catch(() => {}); // cancelled calls reject
        call.cancel = () => d.cancel();
        return call;
      },
      steps,
      fake.advanceAsync,
    );
    fake.uninstall();
    out.push([`seed ${seed}: debounceAsync(${wait}, ${JSON.stringify(options)})`, lodash, mine]);
  }
  return out;
}

/** The fake clock `allScripts` drives, as Jest's `jest` object gives it (`jest.useFakeTimers()`). */
function jestClock(jest) {
  return {
    install: (now) => jest.useFakeTimers({ now }),
    advance: (ms) => jest.advanceTimersByTime(ms),
    advanceAsync: (ms) => jest.advanceTimersByTimeAsync(ms),
    uninstall: () => jest.useRealTimers(),
  };
}

module.exports = { allScripts, jestClock };
