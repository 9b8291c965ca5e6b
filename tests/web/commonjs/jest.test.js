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
import { useDebouncedCallback } from 'lull-web/react';
import { act, renderHook } from '@testing-library/react';

const { allScripts, jestClock } = require('../fake-timers/scripts.cjs');

test('every entry resolves to its CommonJS build', () => {
  for (const entry of ['lull-web', 'lull-web/edge', 'lull-web/react']) {
    expect(require.resolve(entry)).toMatch(/node_modules\/lull-web\/cjs\/[a-z]+\.js$/);
  }
  expect([debounce, throttle, debounceAsync, edge, useDebouncedCallback].map((f) => typeof f)).toEqual(Array(5).fill('function'));
});

test("the default import is init(), as earlier releases' `import init from 'lull-web'`", async () => {
  expect(init).toBe(require('lull-web').init);
  await expect(init()).resolves.toBeUndefined();
});

test('every run at the same fake time with the same argument as lodash', async () => {
  const results = await allScripts(require('lull-web'), jestClock(jest));
  for (const [what, lodash, mine] of results) expect([what, mine]).toEqual([what, lodash]);
  expect(results.reduce((n, [, lodash]) => n + lodash.length, 0)).toBeGreaterThan(400); // the scripts really run
}, 60_000);

test('lull-web/react under jest.useFakeTimers(): a debounced callback runs once, with the last call, when the clock says', () => {
  jest.useFakeTimers({ now: 0 });
  try {
    const runs = [];
    const { result } = renderHook(() => useDebouncedCallback((x) => runs.push([Date.now(), x]), 100));
    act(() => {
      result.current(1);
      result.current(2);
    });
    act(() => jest.advanceTimersByTime(99));
    expect(runs).toEqual([]);
    act(() => jest.advanceTimersByTime(1));
    expect(runs).toEqual([[100, 2]]);
  } finally {
    jest.useRealTimers();
  }
});
