// Consumer test: the packed lull-web tarball as a real dependency of a fresh
// Vite + TypeScript app; type-checked (lull-web/react's and lull-web/vue's
// types too), built, and run in headless Chromium — with a plain import, no
// `init()`. Four more apps (debounce + throttle, every export, the React
// hooks and the Vue composables) through Vite, webpack 5 and esbuild (no
// configuration) in Chromium, the package imported by Node with no DOM (the
// shape of server-side rendering), and the tarball installed alone in an app
// without React or Vue.
// usage: node consumer.mjs <lull-web.tgz> <scratch dir>
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { launch } from './chromium.mjs';
import { serve } from './serve.mjs';

const [tarball, scratch] = process.argv.slice(2).map((p) => resolve(p));
const here = new URL('.', import.meta.url).pathname;
const app = join(scratch, 'consumer-app');
rmSync(app, { recursive: true, force: true });
cpSync(join(here, 'consumer'), app, { recursive: true, filter: (p) => !p.includes('node_modules') && !p.includes('dist') });

const run = (cmd, args) => {
  console.log(`consumer: ${cmd} ${args.join(' ')}`);
  execFileSync(cmd, args, { cwd: app, stdio: 'inherit', timeout: 300_000 });
};
// `npm install`, not `npm ci`: with this registry setup the lock omits other platforms' optional
// packages (rollup's), which `npm ci` refuses; the committed lock still pins every version.
run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error']);
run('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--loglevel=error', tarball]);
run(join(app, 'node_modules/.bin/tsc'), ['-p', '.']);
run(join(app, 'node_modules/.bin/tsc'), ['-p', 'require']); // the `require` condition's types
run(join(app, 'node_modules/.bin/vite'), ['build', '--logLevel', 'warn']);

const server = await serve(join(app, 'dist'));
const browser = await launch();
let failures = 0;
// How far the engine's clock may be from ours for the same moment (it floors
// performance.now() and reads it at most once per Date.now() millisecond).
const SLACK_MS = 2.5;
// Calls (each [began, ended]) to a debouncer with `wait`, numbered from 1: which
// runs (the call whose argument each got) lodash's rules allow. The burst ends
// after call k where the gap before call k + 1 certainly reached `wait`, may
// end where it possibly did, and the last call always runs.
function burst(spans, wait) {
  const must = [];
  const may = [];
  for (let k = 1; k < spans.length; k++) {
    const [start, end] = spans[k];
    const shortest = start - spans[k - 1][1] - SLACK_MS;
    const longest = end - spans[k - 1][0] + SLACK_MS;
    if (shortest >= wait) must.push(k);
    if (longest >= wait) may.push(k);
  }
  const last = spans.length;
  const allows = (runs) =>
    runs.at(-1) === last &&
    runs.slice(0, -1).every((k) => may.includes(k)) &&
    must.every((k) => runs.includes(k)) &&
    runs.every((k, i) => i === 0 || runs[i - 1] < k);
  return { must, may, allows };
}
let checks = 0;
const check = (name, ok, detail) => {
  checks++;
  console.log(`${ok ? 'ok' : 'FAILED'} - ${name}${ok ? '' : `: ${JSON.stringify(detail)}`}`);
  if (!ok) failures++;
};
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(server.url, { timeout: 30_000 });
  await page.waitForFunction(() => window.lull?.done, null, { timeout: 15_000 });
  const lull = await page.evaluate(() => window.lull);
  // Each expectation follows from when the calls were really made (a busy
  // machine may hold the page between two "back-to-back" calls).
  const double = burst(lull.callTimes, 30);
  check(
    'debounce: a burst of 5 calls runs once, with the last argument (split only where the calls really were 30 ms apart)',
    double.allows(lull.calls),
    { calls: lull.calls, ...double },
  );
  check(
    'debounce: no run before its quiet period',
    lull.calls.every((x, i) => lull.runTimes[i] >= lull.callTimes[x - 1][0] - SLACK_MS + 30),
    { runTimes: lull.runTimes, callTimes: lull.callTimes },
  );
  check('debounce: pending() while waiting', lull.pendingBefore === true, lull.pendingBefore);
  // throttle runs the leading call; a second call is a new leading one only
  // if it came a whole `wait` (1 s) after the first.
  const tick = burst(lull.tickTimes, 1000);
  const ticked = JSON.stringify(lull.ticks);
  check(
    'throttle: leading call ran, cancel dropped the trailing one',
    ticked === '[1]' ? tick.must.length === 0 : ticked === '[1,2]' && tick.may.length > 0,
    { ticks: lull.ticks, ...tick },
  );
  const shout = burst(lull.shoutTimes, 20);
  const oneWindow = shout.allows([2]) ? ['ABC', 'ABC'] : null;
  const twoWindows = shout.allows([1, 2]) ? ['AB', 'ABC'] : null;
  const got = JSON.stringify([lull.first, lull.second]);
  check(
    'debounceAsync: every caller got its window result',
    got === JSON.stringify(oneWindow) || got === JSON.stringify(twoWindows),
    { got, ...shout },
  );
  check('no page errors', errors.length === 0, errors);

  // Vite, webpack 5 and esbuild, production builds with nothing configured: the app runs, no `init()`.
  const require = createRequire(join(app, 'package.json'));
  const vite = await import(pathToFileURL(join(app, 'node_modules/vite/dist/node/index.js')).href);
  // Production builds of `src/<entry>.js` into `out`, which then serves it from `index.html`.
  const builds = {
    vite: async (entry, out) => {
      writeFileSync(join(app, `${entry}.html`), `<!doctype html><script type="module" src="/src/${entry}.js"></script>`);
      const input = join(app, `${entry}.html`);
      await vite.build({ root: app, configFile: false, logLevel: 'warn', build: { outDir: out, rollupOptions: { input } } });
      renameSync(join(out, `${entry}.html`), join(out, 'index.html'));
    },
    webpack: (entry, out) =>
      new Promise((done, fail) =>
        require('webpack')(
          { mode: 'production', context: app, entry: `./src/${entry}.js`, output: { path: out, filename: `${entry}.js` } },
          (e, stats) => (e || stats.hasErrors() ? fail(e ?? new Error(stats.toString('errors-only'))) : done()),
        ),
      ),
    esbuild: (entry, out) =>
      require('esbuild').build({ absWorkingDir: app, entryPoints: [`src/${entry}.js`], outdir: out, bundle: true, minify: true, format: 'esm', logLevel: 'warning' }),
  };
  // What each app must have done once it says it is done.
  const apps = {
    plain: ['debounce and throttle run with no init()', '{"runs":["t1",2],"done":true}'],
    everything: [
      'every export runs (debounceAsync, debounceKeyed, bindSearch too)',
      '{"runs":["t1",2],"ok":{"debounceAsync":true,"debounceKeyed":true,"bindSearch":true,"liveObjects":true},"done":true}',
    ],
    react: [
      'lull-web/react: every hook runs, once per burst',
      '{"saved":[2],"ticks":[1],"values":["a","ab"],"shouted":["AB"],"found":[["abc",3]],"sent":["{\\"text\\":\\"hi\\"}"],"done":true}',
    ],
    vue: [
      'lull-web/vue: every composable runs, once per burst',
      '{"saved":[2],"ticks":[1],"values":["a","ab"],"shouted":["AB"],"found":[["abc",3]],"sent":["{\\"text\\":\\"hi\\"}"],"done":true}',
    ],
  };
  for (const [bundler, build] of Object.entries(builds)) {
    for (const [entry, [claim, expected]] of Object.entries(apps)) {
      const out = join(app, `dist-${bundler}-${entry}`);
      await build(entry, out);
      if (!existsSync(join(out, 'index.html'))) {
        writeFileSync(join(out, 'index.html'), `<!doctype html><script type="module" src="./${entry}.js"></script>`);
      }
      const served = await serve(out);
      try {
        const page = await browser.newPage();
        const errors = [];
        page.on('pageerror', (e) => errors.push(String(e)));
        await page.goto(served.url, { timeout: 30_000 });
        await page.waitForFunction(() => window.lull?.done, null, { timeout: 15_000 }).catch(() => {});
        const got = JSON.stringify(await page.evaluate(() => window.lull));
        check(`${bundler}, ${entry}: ${claim}`, got === expected && errors.length === 0, { got, errors });
      } finally {
        await served.close();
      }
    }
  }
} finally {
  await browser.close();
  await server.close();
}
// Server-side rendering's shape: Node imports the package and calls it, no DOM, no `init()`.
const ssr = `
  import { debounce, throttle } from 'lull-web';
  const runs = [];
  const save = debounce((x) => runs.push(x), 20);
  save(1);
  save(2);
  throttle((x) => runs.push('t' + x), 50)(1);
  setTimeout(() => console.log(JSON.stringify({ runs, window: typeof window, document: typeof document })), 200);
`;
const printed = execFileSync(process.execPath, ['--input-type=module', '-e', ssr], { cwd: app, timeout: 60_000 }).toString();
check('Node (SSR shape): imports and runs with no DOM and no init()', printed.trim() === '{"runs":["t1",2],"window":"undefined","document":"undefined"}', printed);

// Code written for earlier releases awaits `init()` (their default export) first: it still works.
const early = `
  import init, { debounce } from 'lull-web';
  const ready = await init();
  const runs = [];
  debounce((x) => runs.push(x), 5)(7);
  setTimeout(() => console.log(JSON.stringify({ ready: ready === undefined, runs })), 100);
`;
const loaded = execFileSync(process.execPath, ['--input-type=module', '-e', early], { cwd: app, timeout: 60_000 }).toString();
check('init(), as earlier releases needed: resolves, and the package runs after it', loaded.trim() === '{"ready":true,"runs":[7]}', loaded);

// React and Vue are optional peers: the tarball alone installs into an empty app
// (neither brought in), and lull-web and lull-web/edge run there, imported and
// required; lull-web/react and lull-web/vue say what is missing.
const bare = join(scratch, 'consumer-no-peers');
rmSync(bare, { recursive: true, force: true });
mkdirSync(bare);
writeFileSync(join(bare, 'package.json'), '{ "name": "no-peers", "private": true, "type": "module" }\n');
execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', tarball], { cwd: bare, stdio: 'inherit', timeout: 300_000 });
const noPeers = `
  import { createRequire } from 'node:module';
  import { debounce } from 'lull-web';
  import { edge } from 'lull-web/edge';
  const runs = [];
  const save = createRequire(import.meta.url)('lull-web').debounce((x) => runs.push(x), 5);
  save(1);
  debounce((x) => runs.push(x), 5)(2);
  setTimeout(() => console.log(JSON.stringify({ runs, edge: typeof edge })), 100);
`;
const bareRun = execFileSync(process.execPath, ['--input-type=module', '-e', noPeers], { cwd: bare, timeout: 60_000 }).toString();
/** What loading `entry` in the bare app says: `loaded`, or the module it cannot find. */
const missing = (entry) => {
  try {
    execFileSync(process.execPath, ['--input-type=module', '-e', `await import('${entry}')`], { cwd: bare, timeout: 60_000, stdio: 'pipe' });
    return 'loaded';
  } catch (e) {
    return String(e.stderr).match(/Cannot find module '[^']+'/)?.[0];
  }
};
const hooks = missing('lull-web/react');
const composables = missing('lull-web/vue');
check(
  'without React or Vue: installs alone (neither in node_modules); lull-web and lull-web/edge run; lull-web/react and lull-web/vue say what is missing',
  !existsSync(join(bare, 'node_modules/react')) &&
    !existsSync(join(bare, 'node_modules/vue')) &&
    bareRun.trim() === '{"runs":[1,2],"edge":"function"}' &&
    hooks === "Cannot find module 'react'" &&
    composables === "Cannot find module 'vue'",
  { bareRun, hooks, composables },
);

console.log(`consumer: ${checks - failures} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
