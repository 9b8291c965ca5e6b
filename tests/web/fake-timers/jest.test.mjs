/**
 * @jest-environment jsdom
 */
// The same lockstep scripts under Jest's fake timers (`jest.useFakeTimers()`),
// in Jest's jsdom environment (no TextDecoder there: the package copes).
import { expect, jest, test } from '@jest/globals';
import { allScripts, importPackage, jestClock } from './scripts.mjs';

test('every run at the same fake time with the same argument as lodash', async () => {
  const lull = await importPackage(); // ready on import: no init()
  const results = await allScripts(lull, jestClock(jest));
  for (const [what, lodash, mine] of results) expect([what, mine]).toEqual([what, lodash]);
  expect(results.reduce((n, [, lodash]) => n + lodash.length, 0)).toBeGreaterThan(400); // the scripts really run
}, 60_000);
