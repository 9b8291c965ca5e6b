// Consumer test: the packed lull-web tarball as a real dependency of a fresh
// Vite + TypeScript app; type-checked, built, and run in headless Chromium.
// usage: node consumer.mjs <lull-web.tgz> <scratch dir>
import { execFileSync } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
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
run(join(app, 'node_modules/.bin/vite'), ['build', '--logLevel', 'warn']);

const server = await serve(join(app, 'dist'));
const browser = await launch();
let failures = 0;
const check = (name, ok, detail) => {
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
  check('debounce: a burst of 5 calls runs once, with the last argument', JSON.stringify(lull.calls) === '[5]', lull.calls);
  check('debounce: pending() while waiting', lull.pendingBefore === true, lull.pendingBefore);
  check('throttle: leading call ran, cancel dropped the trailing one', JSON.stringify(lull.ticks) === '[1]', lull.ticks);
  check('debounceAsync: both callers got the window result', lull.first === 'ABC' && lull.second === 'ABC', lull);
  check('no page errors', errors.length === 0, errors);
} finally {
  await browser.close();
  await server.close();
}
console.log(`consumer: ${5 - failures} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
