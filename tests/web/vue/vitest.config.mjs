// The Vue adapter's tests: jsdom (one file runs in Node, no DOM), the built
// package installed by the suite in node_modules/lull-web.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: { include: ['*.test.mjs'], environment: 'jsdom', testTimeout: 60_000 },
});
