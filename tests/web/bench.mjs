// lull-web benchmark: one headless Chromium page, same run, side by side with
// lodash.debounce and es-toolkit's debounce. Per-call overhead (ns/call,
// median of rounds), bytes on the wire (raw, gzip), each engine's
// instantiation and where its bytes go (wasm-sizes.mjs); then consumer-app
// sizes under Vite, webpack and esbuild (consumer-sizes.mjs).
// usage: node bench.mjs <lull-web package dir> <out.json>
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { launch } from './chromium.mjs';
import { consumerGoals, consumerSizes, printConsumerSizes } from './consumer-sizes.mjs';
import { serve } from './serve.mjs';
import { demangle, wasmSizes } from './wasm-sizes.mjs';
import { startRun } from '../bench-run.mjs';

const [pkg, out] = process.argv.slice(2).map((p) => resolve(p));
const benchRun = startRun();
const here = new URL('.', import.meta.url).pathname;
const modules = join(here, 'node_modules');
const page = join(dirname(out), 'web-page');
rmSync(page, { recursive: true, force: true });
mkdirSync(page, { recursive: true });
cpSync(pkg, join(page, 'lull'), { recursive: true });
cpSync(join(modules, 'lodash.debounce/index.js'), join(page, 'lodash.debounce.js'));
cpSync(join(modules, 'es-toolkit/dist/function/debounce.mjs'), join(page, 'es-toolkit-debounce.mjs'));

const CALLS = 200_000;
const ROUNDS = 9;
const LOADS = 7;
// A long wait: every call lands in an open window, so this is the pure per-call path.
const WAIT_MS = 60_000;
writeFileSync(join(page, 'index.html'), '<!doctype html><meta charset="utf-8"><script type="module" src="bench.js"></script>');
writeFileSync(
  join(page, 'bench.js'),
  `
import { debounce as lull } from './lull/index.js';
import { lite } from './lull/lite.js';
import { full } from './lull/full.js';
import { debounce as esToolkit } from './es-toolkit-debounce.mjs';
// Each engine compiles on first use: time that first use.
const t0 = performance.now();
const engine = lite();
const t1 = performance.now();
full();
const instantiateMs = { lite: t1 - t0, full: performance.now() - t1 };
const source = await (await fetch('./lodash.debounce.js')).text();
const module = { exports: {} };
new Function('module', 'exports', source)(module, module.exports);
const lodash = module.exports;
const noop = () => {};
const make = { 'lull-web': () => lull(noop, ${WAIT_MS}), 'lodash.debounce': () => lodash(noop, ${WAIT_MS}), 'es-toolkit': () => esToolkit(noop, ${WAIT_MS}) };
const perCall = {};
const run = (name) => {
  const d = make[name]();
  const start = performance.now();
  for (let i = 0; i < ${CALLS}; i++) d(i);
  const ns = ((performance.now() - start) * 1e6) / ${CALLS};
  d.cancel();
  return ns;
};
for (const name in make) { perCall[name] = []; run(name); } // warm up
for (let r = 0; r < ${ROUNDS}; r++) for (const name in make) perCall[name].push(run(name)); // interleaved rounds
// Floors, to tell what dominates lull's per-call cost.
const floor = (body) => {
  const rounds = [];
  for (let r = 0; r < ${ROUNDS}; r++) {
    const start = performance.now();
    for (let i = 0; i < ${CALLS}; i++) body();
    rounds.push(((performance.now() - start) * 1e6) / ${CALLS});
  }
  return rounds;
};
const floors = {
  'performance.now()': floor(() => performance.now()),
  'Date.now() (what lodash reads)': floor(() => Date.now()),
  'empty call into wasm': floor(() => engine.live()),
};
window.bench = { instantiateMs, perCall, floors, userAgent: navigator.userAgent };
`,
);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const files = (dir) =>
  readdirSync(dir, { recursive: true })
    .map((f) => join(dir, f))
    .filter((f) => statSync(f).isFile() && !f.endsWith('.d.ts'));
const size = (paths) => {
  const bytes = paths.map((p) => readFileSync(p));
  return { raw: bytes.reduce((n, b) => n + b.length, 0), gzip: bytes.reduce((n, b) => n + gzipSync(b, { level: 9 }).length, 0) };
};
// The engines as built by `cargo xtask package`, beside the package directory.
const engines = { lite: join(pkg, '../lite.wasm'), full: join(pkg, '../full.wasm') };
const sizes = {
  'lull-web': size(files(join(page, 'lull'))),
  'lite engine wasm': size([engines.lite]),
  'full engine wasm': size([engines.full]),
  'lodash.debounce': size([join(page, 'lodash.debounce.js')]),
  'es-toolkit': size([join(page, 'es-toolkit-debounce.mjs')]),
};

const server = await serve(page);
const browser = await launch();
let report;
try {
  const tab = await browser.newPage();
  const loads = [];
  let last;
  for (let i = 0; i < LOADS; i++) {
    await tab.goto(server.url, { timeout: 30_000 });
    await tab.waitForFunction(() => window.bench, null, { timeout: 120_000 });
    last = await tab.evaluate(() => window.bench);
    loads.push(last.instantiateMs);
  }
  report = {
    browser: last.userAgent,
    calls_per_round: CALLS,
    rounds: ROUNDS,
    wait_ms: WAIT_MS,
    loads: LOADS,
    per_call_ns: Object.fromEntries(Object.entries(last.perCall).map(([k, v]) => [k, { median: median(v), rounds: v }])),
    bytes: sizes,
    instantiate_ms: Object.fromEntries(
      Object.keys(engines).map((name) => [name, { median: median(loads.map((l) => l[name])), loads: loads.map((l) => l[name]) }]),
    ),
    floors_ns: Object.fromEntries(Object.entries(last.floors).map(([k, v]) => [k, median(v)])),
  };
} finally {
  await browser.close();
  await server.close();
}
report.consumer_sizes = await consumerSizes(pkg);
// Where each engine's bytes go, from the builds that keep function names.
report.wasm_breakdown = Object.fromEntries(
  Object.entries(engines).map(([name, path]) => {
    const { sections, functions } = wasmSizes(path.replace(/\.wasm$/, '.names.wasm'));
    return [name, { sections, largest_functions: functions.slice(0, 12).map((f) => ({ name: demangle(f.name), bytes: f.bytes })) }];
  }),
);

const lull = report.per_call_ns['lull-web'].median;
const lodash = report.per_call_ns['lodash.debounce'].median;
const es = report.per_call_ns['es-toolkit'].median;
const kb = (n) => `${(n / 1024).toFixed(1)} KB`;
report.ratios = { per_call_vs_lodash: lull / lodash, per_call_vs_es_toolkit: lull / es, gzip_vs_lodash: sizes['lull-web'].gzip / sizes['lodash.debounce'].gzip };
report.goals = {
  per_call_at_most_lodash: { goal: 1.0, actual: lull / lodash, met: lull <= lodash },
  // The earlier goal for wasm + glue, now that a page gets only what it
  // imports: all of lull-web as an app bundles it (the package's files one by
  // one, both engines and every driver, are in the bytes rows above).
  all_of_lull_web_in_an_app_gzip_at_most_25kb: (() => {
    const actual = report.consumer_sizes.results['lull-web'].everything.vite.added_gzip ?? null;
    return { goal: 25 * 1024, actual, met: actual !== null && actual <= 25 * 1024 };
  })(),
  ...consumerGoals(report.consumer_sizes),
};
report.run = benchRun.end({ chromium: report.browser.match(/Chrom\S+/)?.[0] ?? report.browser });
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, JSON.stringify(report, null, 2));

const row = (cells) => console.log(cells.map((c, i) => (i === 0 ? String(c).padEnd(44) : String(c).padStart(16))).join(''));
console.log(`\nlull-web bench, one page, same run (${report.browser.match(/Chrom\S+/)?.[0] ?? 'Chromium'})`);
row(['metric', 'lull-web', 'lodash.debounce', 'es-toolkit', 'lull/lodash']);
row([`per call, ns (median of ${ROUNDS})`, lull.toFixed(1), lodash.toFixed(1), es.toFixed(1), `${(lull / lodash).toFixed(2)}x`]);
row(['package, every file, raw (wasm + JS)', kb(sizes['lull-web'].raw), kb(sizes['lodash.debounce'].raw), kb(sizes['es-toolkit'].raw), `${(sizes['lull-web'].raw / sizes['lodash.debounce'].raw).toFixed(1)}x`]);
row(['package, every file, gzip (wasm + JS)', kb(sizes['lull-web'].gzip), kb(sizes['lodash.debounce'].gzip), kb(sizes['es-toolkit'].gzip), `${report.ratios.gzip_vs_lodash.toFixed(1)}x`]);
row(['  lite engine (debounce, throttle), wasm gzip', kb(sizes['lite engine wasm'].gzip), '', '', '']);
row(['  full engine (the rest), wasm gzip', kb(sizes['full engine wasm'].gzip), '', '', '']);
for (const name of Object.keys(engines)) row([`instantiate ${name}, ms (median of ${LOADS})`, report.instantiate_ms[name].median.toFixed(1), '-', '-', '']);
for (const [name, ns] of Object.entries(report.floors_ns)) row([`  floor: ${name}, ns`, ns.toFixed(1), '', '', '']);
printConsumerSizes(report.consumer_sizes);
for (const [name, { sections, largest_functions }] of Object.entries(report.wasm_breakdown)) {
  const parts = Object.entries(sections).map(([k, v]) => `${k} ${v}`).join(', ');
  console.log(`\n${name} engine, bytes by section (names kept): ${parts}; largest functions:`);
  for (const f of largest_functions) console.log(`  ${String(f.bytes).padStart(6)}  ${f.name}`);
}
for (const [name, g] of Object.entries(report.goals)) {
  const actual = g.actual === null ? 'no build' : g.actual < 100 ? g.actual.toFixed(2) + 'x' : kb(g.actual);
  console.log(`goal ${name}: ${g.met ? 'met' : 'MISSED'} (actual ${actual})`);
}
console.log(`wrote ${out}`);
