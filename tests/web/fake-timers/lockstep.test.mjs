// @vitest-environment jsdom
// Fake timers drive lull-web exactly as they drive lodash: the same script of
// calls and clock advances goes to lodash.debounce / lodash.throttle and to
// lull-web's debounce / throttle / debounceAsync under `vi.useFakeTimers()`
// (which fakes Date, setTimeout and performance), and every run must happen
// at the same fake time with the same argument. The package under test is the
// built one (LULL_WEB_PKG: the directory `cargo xtask package` writes).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeAll, expect, test, vi } from 'vitest';
import lodashDebounce from 'lodash.debounce';
import lodashThrottle from 'lodash.throttle';

const pkg = process.env.LULL_WEB_PKG;
let lull;

beforeAll(async () => {
  if (!pkg) throw new Error('LULL_WEB_PKG must name the built package directory');
  // The package's main entry, as an app imports it: ready on import, no `init()`.
  lull = await import(/* @vite-ignore */ pathToFileURL(join(pkg, 'index.js')).href);
});

afterEach(() => vi.useRealTimers());

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

test('debounce and throttle: every run at the same fake time with the same argument as lodash', async () => {
  let runs = 0;
  for (let seed = 1; seed <= 300; seed++) {
    const { wait, options, steps } = script(seed);
    const throttle = seed % 3 === 0;
    vi.useFakeTimers({ now: 1_000_000 });
    const [lodash, lullRuns] = await lockstep(
      (f) => (throttle ? lodashThrottle(f, wait, options) : lodashDebounce(f, wait, options)),
      (f) => (throttle ? lull.throttle(f, wait, options) : lull.debounce(f, wait, options)),
      steps,
      (ms) => vi.advanceTimersByTime(ms),
    );
    vi.useRealTimers();
    expect(lullRuns, `seed ${seed}: ${throttle ? 'throttle' : 'debounce'}(${wait}, ${JSON.stringify(options)})`).toEqual(lodash);
    runs += lodash.length;
  }
  expect(runs).toBeGreaterThan(300); // the scripts really run the functions
});

test('debounceAsync: invoked at the same fake times with the same arguments as lodash.debounce', async () => {
  let runs = 0;
  for (let seed = 1; seed <= 100; seed++) {
    const { wait, options, steps } = script(seed);
    if (options?.trailing === false) continue; // a promise per call: every window settles
    vi.useFakeTimers({ now: 1_000_000 });
    const [lodash, lullRuns] = await lockstep(
      (f) => lodashDebounce(f, wait, options),
      (f) => {
        const d = lull.debounceAsync(async (x) => f(x), wait, options);
        const call = (x) => void d(x).catch(() => {}); // cancelled calls reject
        call.cancel = () => d.cancel();
        return call;
      },
      steps,
      (ms) => vi.advanceTimersByTimeAsync(ms),
    );
    vi.useRealTimers();
    expect(lullRuns, `seed ${seed}: debounceAsync(${wait}, ${JSON.stringify(options)})`).toEqual(lodash);
    runs += lodash.length;
  }
  expect(runs).toBeGreaterThan(100);
});
