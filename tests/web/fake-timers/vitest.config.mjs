// The package under test lives outside this folder (LULL_WEB_PKG): let Vite read it.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  server: { fs: { allow: ['.', process.env.LULL_WEB_PKG ?? '.'] } },
  test: { include: ['vitest.test.mjs'] },
});
