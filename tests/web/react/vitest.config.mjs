// The React adapter's tests: jsdom (one file runs in Node, no DOM), the built
// package installed by the suite in node_modules/lull-web.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // LULL_REACT: the React major the tests must find (vitest.react18.config.mjs: 18).
  test: { include: ['*.test.mjs'], environment: 'jsdom', testTimeout: 60_000, env: { LULL_REACT: '19' } },
});
