// Consumer-app sizes: what an app pays to ship lull-web, next to its peers,
// built the way users build (Vite, webpack 5, esbuild; production builds,
// tree-shaken and minified). Every file a build emits except the HTML counts:
// raw bytes, and gzip -9 per file, summed. What a library adds is that, less
// the same app built with no library (its calls stubbed by local functions:
// the bundler's own runtime and the app's code). Builds run offline, one at a
// time, in a temporary directory holding a copy of the package.
import { build as esbuild } from 'esbuild';
import { build as vite } from 'vite';
import webpack from 'webpack';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';

const modules = new URL('node_modules/', import.meta.url).pathname;
const version = (dir) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version;

const DEBOUNCE_THROTTLE = 'debounce + throttle';
const EVERYTHING = 'everything';
// lull-web/edge, its own entry (not in "everything": apps that only debounce don't pay for it).
const EDGE_CLIENT = 'edge client (lull-web/edge)';
const BASELINE = 'no library (stubs)';
// The framework adapters: one component with a debounced and a throttled handler
// (React hooks; Vue composables, and a debounced ref), the framework bundled in
// every app, so "added" is the adapter and what it brings.
const REACT_APP = 'React: debounced + throttled callback';
const VUE_APP = 'Vue: debounced + throttled fn, debounced ref';

// The peers, each with the import line that brings `debounce` and `throttle`
// into scope and how it writes a wait in its own call style.
const PEERS = [
  {
    name: 'lodash.debounce + lodash.throttle',
    packages: ['lodash.debounce', 'lodash.throttle'],
    imports: "import debounce from 'lodash.debounce';\nimport throttle from 'lodash.throttle';",
    wait: (ms) => ms,
  },
  { name: '@tanstack/pacer', packages: ['@tanstack/pacer'], imports: "import { debounce, throttle } from '@tanstack/pacer';", wait: (ms) => `{ wait: ${ms} }` },
  { name: 'es-toolkit', packages: ['es-toolkit'], imports: "import { debounce, throttle } from 'es-toolkit';", wait: (ms) => ms },
];

// The adapters' peers, each with its import line and its names for the same hooks or composables.
const REACT_PEERS = [
  { name: 'use-debounce', imports: "import { useDebouncedCallback, useThrottledCallback } from 'use-debounce';", debounced: 'useDebouncedCallback', throttled: 'useThrottledCallback', wait: (ms) => ms },
  { name: '@tanstack/react-pacer', imports: "import { useDebouncedCallback, useThrottledCallback } from '@tanstack/react-pacer';", debounced: 'useDebouncedCallback', throttled: 'useThrottledCallback', wait: (ms) => `{ wait: ${ms} }` },
];
const VUE_PEERS = [
  { name: '@vueuse/core', imports: "import { useDebounceFn, useThrottleFn, refDebounced } from '@vueuse/core';", debounced: 'useDebounceFn', throttled: 'useThrottleFn', ref: 'refDebounced' },
];

// The React app: one component with a debounced click and a throttled scroll handler.
const reactApp = (imports, { debounced, throttled, wait }) => `import { createElement } from 'react';
import { createRoot } from 'react-dom/client';
${imports}
function App() {
  const save = ${debounced}(() => console.log('saved'), ${wait(300)});
  const track = ${throttled}(() => console.log('scrolled'), ${wait(100)});
  return createElement('button', { onClick: save, onScroll: track }, 'save');
}
createRoot(document.querySelector('button').parentNode).render(createElement(App));
`;

// The Vue app: the same handlers as composables, and a debounced ref of an input's text.
const vueApp = (imports, { debounced, throttled, ref }) => `import { createApp, h, ref } from 'vue';
${imports}
createApp({
  setup() {
    const text = ref('');
    const save = ${debounced}(() => console.log('saved'), 300);
    const track = ${throttled}(() => console.log('scrolled'), 100);
    const shown = ${ref}(text, 300);
    return () => h('button', { onClick: save, onScroll: track, onInput: (e) => (text.value = e.target.value), title: shown.value }, 'save');
  },
}).mount(document.querySelector('button').parentNode);
`;

// The "debounce + throttle" app's body: a debounced click handler and a throttled scroll handler.
const wireButton = (wait) => `const button = document.querySelector('button');
button.addEventListener('click', debounce(() => console.log('saved'), ${wait(300)}));
addEventListener('scroll', throttle(() => console.log('scrolled'), ${wait(100)}));`;

// A lull-web app: a plain import of `named`, then `body`.
const lullApp = (named, body) => `import { ${named.join(', ')} } from 'lull-web';\n${body}\n`;

// Each bundler's production build of `dir/main.js` (Vite: of `dir/index.html`) into `out`,
// with nothing configured beyond the entry, the output directory and production mode.
const BUNDLERS = {
  vite: (dir, out) => vite({ root: dir, configFile: false, logLevel: 'error', build: { outDir: out } }),
  webpack: (dir, out) =>
    new Promise((done, fail) => {
      const compiler = webpack({ mode: 'production', context: dir, entry: './main.js', output: { path: out } });
      compiler.run((error, stats) => {
        compiler.close(() => {
          if (error || stats.hasErrors()) fail(error ?? new Error(stats.toJson({ all: false, errors: true }).errors[0].message));
          else done();
        });
      });
    }),
  esbuild: (dir, out) => esbuild({ absWorkingDir: dir, entryPoints: ['main.js'], outdir: out, bundle: true, minify: true, format: 'esm', logLevel: 'silent' }),
};

// Every file under `dir` a page would download: all of them but the HTML.
const emitted = (dir) =>
  readdirSync(dir, { recursive: true })
    .map((f) => join(dir, f))
    .filter((f) => statSync(f).isFile() && !f.endsWith('.html'));

// Raw and gzip -9 bytes of each file, and their sums.
const measure = (dir) => {
  const files = Object.fromEntries(
    emitted(dir).map((f) => {
      const bytes = readFileSync(f);
      return [relative(dir, f), { raw: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length }];
    }),
  );
  const sum = (key) => Object.values(files).reduce((n, f) => n + f[key], 0);
  return { raw: sum('raw'), gzip: sum('gzip'), files };
};

// The export names of the package's JS entry, and the files its code fetches at
// run time (`new URL("x", import.meta.url)`), which a build must emit for the app to work.
async function inspectEntry(root) {
  const { metafile } = await esbuild({ absWorkingDir: root, entryPoints: ['lull-web'], bundle: true, format: 'esm', write: false, metafile: true, outdir: 'out', logLevel: 'silent' });
  const assets = Object.keys(metafile.inputs).flatMap((input) => {
    const source = readFileSync(join(root, input), 'utf8');
    return [...source.matchAll(/new URL\(\s*(['"`])([^'"`]+)\1\s*,\s*import\.meta\.url\s*\)/g)].map((m) => resolve(root, dirname(input), m[2]));
  });
  return { exports: Object.values(metafile.outputs)[0].exports, assets };
}

// One app built by one bundler with the least configuration that works: a plain
// build, then any run-time asset the bundler did not emit copied beside the
// bundle by hand, as a user must; `config` names that ceremony.
async function buildApp(bundler, dir, assets) {
  const out = join(dir, 'dist', bundler);
  try {
    await BUNDLERS[bundler](dir, out);
  } catch (error) {
    return { error: String(error.message ?? error).split('\n')[0], config: 'cannot build' };
  }
  const outputs = emitted(out).map((f) => readFileSync(f));
  const missing = assets.filter((asset) => !outputs.some((bytes) => bytes.equals(readFileSync(asset))));
  for (const asset of missing) cpSync(asset, join(out, basename(asset)));
  const config = missing.map((asset) => `${basename(asset)} not emitted: copied beside the bundle by hand`).join('; ');
  return { ...measure(out), config: config || 'none' };
}

// The consumer apps: lull-web's two (its full export list for "everything"), one per peer,
// and each app's shape with no library (stubs), which the others are measured against.
function apps(lull) {
  const everything = lull.exports.filter((name) => name !== 'default');
  const stubs = (names) => names.map((name) => `const ${name} = (f) => f;`).join('\n');
  return [
    { library: BASELINE, app: DEBOUNCE_THROTTLE, assets: [], source: `${stubs(['debounce', 'throttle'])}\n${wireButton((ms) => ms)}\n` },
    { library: BASELINE, app: EVERYTHING, assets: [], source: `${stubs(everything)}\nglobalThis.lull = { ${everything.join(', ')} };\n` },
    { library: 'lull-web', app: DEBOUNCE_THROTTLE, assets: lull.assets, source: lullApp(['debounce', 'throttle'], wireButton((ms) => ms)) },
    { library: 'lull-web', app: EVERYTHING, assets: lull.assets, source: lullApp(everything, `globalThis.lull = { ${everything.join(', ')} };`) },
    { library: BASELINE, app: EDGE_CLIENT, assets: [], source: `${stubs(['edge', 'EdgeError'])}\nglobalThis.lull = { edge, EdgeError };\n` },
    { library: 'lull-web', app: EDGE_CLIENT, assets: lull.assets, source: `import { edge, EdgeError } from 'lull-web/edge';\nglobalThis.lull = { edge, EdgeError };\n` },
    ...PEERS.map((peer) => ({ library: peer.name, app: DEBOUNCE_THROTTLE, assets: [], source: `${peer.imports}\n${wireButton(peer.wait)}\n` })),
    ...adapterApps(lull),
  ];
}

// The adapters' apps: stubs, lull-web's entry, each peer.
function adapterApps(lull) {
  const react = { debounced: 'useDebouncedCallback', throttled: 'useThrottledCallback', wait: (ms) => ms };
  const vue = { debounced: 'useDebouncedFn', throttled: 'useThrottledFn', ref: 'useDebouncedRef' };
  const stubs = (names) => names.map((name) => `const ${name} = (f) => f;`).join('\n');
  return [
    { library: BASELINE, app: REACT_APP, assets: [], source: reactApp(stubs([react.debounced, react.throttled]), react) },
    { library: 'lull-web', app: REACT_APP, assets: lull.assets, source: reactApp(`import { ${react.debounced}, ${react.throttled} } from 'lull-web/react';`, react) },
    ...REACT_PEERS.map((peer) => ({ library: peer.name, app: REACT_APP, assets: [], source: reactApp(peer.imports, peer) })),
    { library: BASELINE, app: VUE_APP, assets: [], source: vueApp(stubs([vue.debounced, vue.throttled, vue.ref]), vue) },
    { library: 'lull-web', app: VUE_APP, assets: lull.assets, source: vueApp(`import { ${vue.debounced}, ${vue.throttled}, ${vue.ref} } from 'lull-web/vue';`, vue) },
    ...VUE_PEERS.map((peer) => ({ library: peer.name, app: VUE_APP, assets: [], source: vueApp(peer.imports, peer) })),
  ];
}

// Sizes of every consumer app under every bundler, plus versions and ratios, for the JSON report.
export async function consumerSizes(pkg) {
  const root = mkdtempSync(join(tmpdir(), 'lull-consumer-sizes-'));
  try {
    cpSync(pkg, join(root, 'node_modules/lull-web'), { recursive: true });
    // Every package the test tooling installed (the peers, React, Vue and theirs), by link.
    for (const name of readdirSync(modules)) {
      if (name !== 'lull-web' && !name.startsWith('.')) symlinkSync(join(modules, name), join(root, 'node_modules', name), 'dir');
    }
    const lull = await inspectEntry(root);
    const results = {};
    for (const [i, { library, app, assets, source }] of apps(lull).entries()) {
      const dir = join(root, `app-${i}`);
      mkdirSync(dir);
      writeFileSync(join(dir, 'main.js'), source);
      writeFileSync(join(dir, 'index.html'), '<!doctype html><meta charset="utf-8"><button>save</button><script type="module" src="./main.js"></script>\n');
      results[library] ??= {};
      results[library][app] = {};
      for (const bundler of Object.keys(BUNDLERS)) results[library][app][bundler] = await buildApp(bundler, dir, assets);
    }
    // What each library adds: its app's bytes less the same app's with no library.
    for (const [library, byApp] of Object.entries(results)) {
      if (library === BASELINE) continue;
      for (const [app, byBundler] of Object.entries(byApp)) {
        for (const [bundler, r] of Object.entries(byBundler)) {
          const base = results[BASELINE][app][bundler].gzip;
          if (r.gzip !== undefined && base !== undefined) r.added_gzip = r.gzip - base;
        }
      }
    }
    const lullGzip = results['lull-web'][DEBOUNCE_THROTTLE].vite.gzip;
    return {
      method: 'production builds (tree-shaken, minified) of tiny ES module apps; every emitted file but the HTML, gzip -9 per file, summed; added = that less the same app with no library',
      apps: {
        [DEBOUNCE_THROTTLE]: 'imports debounce and throttle, wires each to an event once',
        [EVERYTHING]: `lull-web only: imports and references every export of its JS entry (${lull.exports.join(', ')}); peers are compared on debounce + throttle`,
        [EDGE_CLIENT]: 'lull-web only: imports edge and EdgeError from lull-web/edge (the browser client for lull-edge, with the debounce it coalesces with)',
        [REACT_APP]: 'one React component with a debounced and a throttled handler (lull-web/react, use-debounce, @tanstack/react-pacer); React bundled in every app, the baseline too',
        [VUE_APP]: 'one Vue component with a debounced and a throttled handler and a debounced ref (lull-web/vue, @vueuse/core); Vue bundled in every app, the baseline too',
      },
      versions: {
        vite: version(join(modules, 'vite')),
        webpack: version(join(modules, 'webpack')),
        esbuild: version(join(modules, 'esbuild')),
        'lull-web': version(join(root, 'node_modules/lull-web')),
        ...Object.fromEntries(
          [...PEERS.flatMap((peer) => peer.packages), ...[...REACT_PEERS, ...VUE_PEERS].map((peer) => peer.name), 'react', 'vue'].map((name) => [name, version(join(modules, name))]),
        ),
      },
      results,
      vite_gzip_ratio_lull_web_to_peer: Object.fromEntries(PEERS.map((peer) => [peer.name, lullGzip / results[peer.name][DEBOUNCE_THROTTLE].vite.gzip])),
      // Adapters: bytes added (Vite), lull-web's over each peer's.
      vite_added_ratio_adapter_to_peer: Object.fromEntries(
        [...REACT_PEERS.map((peer) => [peer.name, REACT_APP]), ...VUE_PEERS.map((peer) => [peer.name, VUE_APP])].map(([peer, app]) => [
          `${app} / ${peer}`,
          results['lull-web'][app].vite.added_gzip / results[peer][app].vite.added_gzip,
        ]),
      ),
    };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

// The size goals for lull-web's Vite builds, in the report's goal format: the
// bytes lull-web adds to the app (issue 10: "counting every byte it adds").
export function consumerGoals(sizes) {
  const goal = (app, kb) => {
    const actual = sizes.results['lull-web'][app].vite.added_gzip ?? null;
    return { goal: kb * 1024, actual, met: actual !== null && actual <= kb * 1024 };
  };
  // The stretch: under @tanstack/pacer's debounce + throttle, measured in the same run.
  const pacer = sizes.results['@tanstack/pacer']?.[DEBOUNCE_THROTTLE]?.vite.added_gzip ?? null;
  const ours = sizes.results['lull-web'][DEBOUNCE_THROTTLE].vite.added_gzip ?? null;
  return {
    consumer_debounce_throttle_vite_gzip_at_most_4kb: goal(DEBOUNCE_THROTTLE, 4),
    consumer_debounce_throttle_vite_gzip_under_tanstack_pacer_stretch: { goal: pacer, actual: ours, met: ours !== null && pacer !== null && ours < pacer },
    consumer_everything_vite_gzip_at_most_20kb: goal(EVERYTHING, 20),
  };
}

// The size table (library × app by bundler), the configuration each needed, and the Vite ratios.
export function printConsumerSizes(sizes) {
  const kb = (n) => (n === undefined ? 'failed' : `${(n / 1024).toFixed(1)} KB`);
  const v = sizes.versions;
  const row = (cells) => console.log(cells.map((c, i) => (i === 0 ? c.padEnd(56) : i === cells.length - 1 ? `  ${c}` : c.padStart(14))).join(''));
  console.log(`\nconsumer apps, production builds (Vite ${v.vite}, webpack ${v.webpack}, esbuild ${v.esbuild}): every emitted file but the HTML, gzip -9 per file`);
  row(['library / app', 'Vite gzip', 'Vite added', 'webpack gzip', 'esbuild gzip', 'Vite raw', 'configuration needed']);
  for (const [library, byApp] of Object.entries(sizes.results)) {
    for (const [app, { vite, webpack, esbuild }] of Object.entries(byApp)) {
      const needed = Object.entries({ vite, webpack, esbuild }).filter(([, r]) => r.config !== 'none');
      const config = needed.map(([bundler, r]) => `${bundler}: ${r.config}${r.error ? ` (${r.error})` : ''}`).join('; ') || 'none';
      const added = vite.added_gzip === undefined ? '-' : `${vite.added_gzip} B`;
      row([`${library} / ${app}`, kb(vite.gzip), added, kb(webpack.gzip), kb(esbuild.gzip), kb(vite.raw), config]);
    }
  }
  console.log(`  ${EVERYTHING}: ${sizes.apps[EVERYTHING]}`);
  console.log(`  ${EDGE_CLIENT}: ${sizes.apps[EDGE_CLIENT]}`);
  console.log(`  ${REACT_APP}: ${sizes.apps[REACT_APP]}`);
  console.log(`  ${VUE_APP}: ${sizes.apps[VUE_APP]}`);
  const adapters = Object.entries(sizes.vite_added_ratio_adapter_to_peer).map(([pair, r]) => `${pair} ${r.toFixed(1)}x`);
  console.log(`lull-web adapters / peer, Vite added: ${adapters.join(', ')}`);
  const ratios = Object.entries(sizes.vite_gzip_ratio_lull_web_to_peer).map(([peer, r]) => `${peer} ${r.toFixed(1)}x`);
  console.log(`lull-web / peer, Vite gzip, ${DEBOUNCE_THROTTLE}: ${ratios.join(', ')}`);
}
