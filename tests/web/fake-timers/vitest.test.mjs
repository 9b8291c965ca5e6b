// @vitest-environment jsdom
// Fake timers drive lull-web exactly as they drive lodash, under Vitest: the
// same scripts of calls and clock advances go to lodash.debounce /
// lodash.throttle and to lull-web's debounce / throttle / debounceAsync under
// `vi.useFakeTimers()` (which fakes Date, setTimeout and performance), and
// every run must happen at the same fake time with the same argument.
import { expect, test, vi } from 'vitest';
import { allScripts, importPackage } from './scripts.mjs';

test('every run at the same fake time with the same argument as lodash', async () => {
  const lull = await importPackage(); // ready on import: no init()
  const results = await allScripts(lull, {
    install: (now) => vi.useFakeTimers({ now }),
    advance: (ms) => vi.advanceTimersByTime(ms),
    advanceAsync: (ms) => vi.advanceTimersByTimeAsync(ms),
    uninstall: () => vi.useRealTimers(),
  });
  for (const [what, lodash, mine] of results) expect(mine, what).toEqual(lodash);
  expect(results.reduce((n, [, lodash]) => n + lodash.length, 0)).toBeGreaterThan(400); // the scripts really run
});
