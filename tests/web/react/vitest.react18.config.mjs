// The same tests on React 18, lull-web/react's oldest peer: react, react-dom,
// @testing-library/react and use-debounce resolve to react18/node_modules
// (their own install, so each finds React 18 itself), and lull-web to its ES
// modules, inlined, so that their `import 'react'` is resolved here too: one React.
import { fileURLToPath } from 'node:url';
import { defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.mjs';

const at = (name) => fileURLToPath(new URL(`react18/node_modules/${name}`, import.meta.url));
const pinned = ['react-dom', 'react', '@testing-library/react', 'use-debounce'];
const lull = (file) => fileURLToPath(new URL(`node_modules/lull-web/${file}`, import.meta.url));

export default mergeConfig(
  base,
  defineConfig({
    resolve: {
      alias: [
        { find: /^lull-web$/, replacement: lull('index.js') },
        { find: /^lull-web\/(react|edge)$/, replacement: lull('$1.js') },
        ...pinned.map((name) => ({ find: new RegExp(`^${name}(/.*)?$`), replacement: `${at(name)}$1` })),
      ],
    },
    test: { server: { deps: { inline: ['lull-web'] } }, env: { LULL_REACT: '18' } },
  }),
);
