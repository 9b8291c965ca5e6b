/**
 * @jest-environment jsdom
 */
// lull-web in Jest's default mode: CommonJS, babel-jest turning `import` into
// `require()` (no --experimental-vm-modules), jsdom, `jest.useFakeTimers()`.
// The lockstep scripts of the ES module tests (../fake-timers/scripts.cjs):
// every run of lull-web's debounce, throttle and debounceAsync at the same fake
// time with the same argument as lodash's.
import init, { debounce, debounceAsync, throttle } from 'lull-web';
import { edge } from 'lull-web/edge';

const { allScripts } = require('../fake-timers/scripts.cjs');

test('every entry resolves to its CommonJS build', () => {
  for (const entry of ['lull-web', 'lull-web/edge']) {
    expect(require.resolve(entry)).toMatch(/node_modules\/lull-web\/cjs\/[a-z]+\.js$/);
  }
  expect([typeof debounce, typeof throttle, typeof debounceAsync, typeof edge]).toEqual(['function', 'function', 'function', 'function']);
});

test("the default import is init(), as earlier releases' `import init from 'lull-web'`", async () => {
  expect(init).toBe(require('lull-web').init);
  await expect(init()).resolves.toBeUndefined();
});

test('every run at the same fake time with the same argument as lodash', async () => {
  const results = await allScripts(require('lull-web'), {
    install: (now) => jest.useFakeTimers({ now }),
    advance: (ms) => jest.advanceTimersByTime(ms),
    advanceAsync: (ms) => jest.advanceTimersByTimeAsync(ms),
    uninstall: () => jest.useRealTimers(),
  });
  for (const [what, lodash, mine] of results) expect([what, mine]).toEqual([what, lodash]);
  expect(results.reduce((n, [, lodash]) => n + lodash.length, 0)).toBeGreaterThan(400); // the scripts really run
}, 60_000);
