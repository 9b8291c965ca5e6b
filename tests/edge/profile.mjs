// A V8 CPU profile of one worker's isolate on a local workerd, under the
// bench's 1,000-new-keys load (3,000 single events from 32 clients, then
// until every window is delivered): where an event's CPU goes, by function
// (self time), and the isolate's busy time per event. A tool for working on
// the per-event cost, not a figure of the bench (one isolate, one run).
// Usage: node profile.mjs lull|promises|plain [OUT.cpuprofile] [TOP]
//   LULL_PROFILE_BUILD=DIR: another lull-edge worker-build output (an A/B).
//   LULL_PROFILE_KEYS=N: the events over N keys, not 1,000 (1: the bench's hot key).
//   LULL_PROFILE_BATCH=N: each request a batch of N events (`events:batch`), not one event
//   (with LULL_PROFILE_KEYS=1: the bench's paced hot key, as a closed loop at its fastest).
//   LULL_PROFILE_EVENTS=N: N events in the load, not 3,000.
//   LULL_PROFILE_KNOWN=1: the load runs once unprofiled first, so the profiled one meets
//   known keys (the bench's third load: their objects in memory, their windows delivered).
//   LULL_PROFILE_V8=0: no V8 profile (its sampling costs more for wasm frames than for
//   JavaScript's, so an A/B between lull and an object is fairer without it): the load's
//   figures and workerd's CPU only (with LULL_PROFILE_PERF, perf's report too).
//   LULL_PROFILE_CROSSINGS=1 (lull only): a copy of the build counts each call the wasm makes
//   into JavaScript, by import (the runtime's APIs, wasm-bindgen's glue, its closures; each
//   named with the first 4 digits of its hash, as two imports may share a name), and the
//   load's calls per router answer are printed: a figure that moves by a few percent from run
//   to run (148 to 154 on one build), where CPU on shared cores moves by ten.
//   LULL_PROFILE_PERF=FILE: Linux perf records workerd's whole process (native work too:
//   SQLite, commits, RPC, HTTP, which the V8 profile counts as idle) into FILE during the load,
//   and prints its top symbols, the wasm's and JavaScript's named (V8's --perf-basic-prof); needs
//   perf; `perf report -i FILE` for the rest.
// The .cpuprofile opens in Chrome DevTools (Performance) or speedscope.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync, spawn } from "node:child_process";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { childWorkerd, cpuTicks, demoBuild, TICK_US, freePort, jsObjectWorker, lullWorker, runtimeOptions, startReceiver, stateDir, TOKENS, until } from "./harness.mjs";

const [who = "lull", out, top = "30"] = process.argv.slice(2);
if (!["lull", "promises", "plain"].includes(who)) throw new Error(`${who}: lull, promises or plain`);
/** A positive whole number from the environment, or `fallback`. */
function count(name, fallback) {
  const n = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name}=${process.env[name]}: a whole number, 1 or more`);
  return n;
}
const EVENTS = count("LULL_PROFILE_EVENTS", 3_000);
const KEYS = count("LULL_PROFILE_KEYS", 1_000);
const BATCH = process.env.LULL_PROFILE_BATCH === undefined ? 0 : count("LULL_PROFILE_BATCH", 1);
const V8_PROFILE = process.env.LULL_PROFILE_V8 !== "0";
const CROSSINGS = process.env.LULL_PROFILE_CROSSINGS === "1";
if (CROSSINGS && who !== "lull") throw new Error("LULL_PROFILE_CROSSINGS=1 counts lull-edge's crossings only");
/** The counting build's marker in its log lines: the counts so far, by import. */
const COUNTS = "lull-profile-crossings ";
/** The router's answers between two of the counting build's log lines. */
const COUNT_EVERY = 500;

const CLIENTS = 32;
const WARM_KEYS = 200;

const rx = await startReceiver();
const state = stateDir();
const inspectorPort = await freePort();
const target = `${rx.url}/t`;
const settings = { WAIT_MS: "200", MAX_WAIT_MS: "1000", MAX_BATCH: "100" };
const counted = CROSSINGS ? countingBuild(process.env.LULL_PROFILE_BUILD ?? demoBuild) : null;
const worker =
  who === "lull"
    ? (({ queueConsumers, ...w }) => w)(lullWorker({ b: { target, wait_ms: 200, max_wait_ms: 1000, payload: "all", max_batch: 100, allow_http: true } }, counted?.dir ?? process.env.LULL_PROFILE_BUILD))
    : jsObjectWorker(who, target, settings);
// V8 writes a map of the code it compiles (JS and wasm: /tmp/perf-<pid>.map, removed after the
// report), so perf names their functions too; the log that flag turns on goes nowhere.
if (process.env.LULL_PROFILE_PERF) process.env.MINIFLARE_WORKERD_V8_FLAGS = "--perf-basic-prof --no-logfile-per-isolate --logfile=/dev/null";
const logs = [];
const mf = new Miniflare(convertV4MiniflareOptions({ ...runtimeOptions(state.dir, logs), inspectorPort, ...worker, name: "profiled" }));
try {
  const url = (await mf.ready).toString().replace(/\/$/, "");
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  const inspected = targets.find((t) => t.title.endsWith("core:user:profiled"));
  if (!inspected) throw new Error(`no inspector target for the worker among ${targets.map((t) => t.title).join(", ")}`);
  const ws = new WebSocket(inspected.webSocketDebuggerUrl);
  await new Promise((ok, fail) => (ws.addEventListener("open", ok), ws.addEventListener("error", fail)));
  let id = 0;
  const waiting = new Map();
  ws.addEventListener("message", (m) => {
    const msg = JSON.parse(m.data);
    waiting.get(msg.id)?.(msg);
    waiting.delete(msg.id);
  });
  const send = (method, params = {}) => new Promise((ok) => (waiting.set(++id, ok), ws.send(JSON.stringify({ id, method, params }))));

  const headers = { authorization: `Bearer ${TOKENS.ingest}`, "content-type": "application/json" };
  /** Event `i`'s payload. */
  const payload = (i) => ({ i, at: Date.now(), note: "a typical small event payload" });
  const post = async (key, i) => {
    const res = await fetch(`${url}/v1/topics/b/keys/${key}/events`, { method: "POST", headers, body: JSON.stringify(payload(i)) });
    await res.text();
    if (res.status !== 202) throw new Error(`event ${i}: ${res.status}`);
  };
  /** Events `first`‥`end` (of `key`) in one batch request. */
  const postBatch = async (key, first, end) => {
    const events = Array.from({ length: end - first }, (_, j) => ({ key, event: payload(first + j) }));
    const res = await fetch(`${url}/v1/topics/b/events:batch`, { method: "POST", headers, body: JSON.stringify({ events }) });
    const text = await res.text();
    if (res.status !== 207 || JSON.parse(text).results.some((r) => r.status !== 202)) throw new Error(`batch from ${first}: ${res.status} ${text.slice(0, 200)}`);
  };
  const delivered = (prefix) => rx.deliveries.filter((d) => String(d.body.key).startsWith(prefix)).reduce((n, d) => n + d.body.count, 0);
  // Warm up: the isolate compiles and caches on other keys first.
  for (let i = 0; i < WARM_KEYS; i += CLIENTS) await Promise.all(Array.from({ length: Math.min(CLIENTS, WARM_KEYS - i) }, (_, j) => post(`warm${i + j}`, i + j)));
  await until(() => delivered("warm") >= WARM_KEYS, 30_000, "the warm-up's windows");

  /** The load: EVENTS over KEYS keys from CLIENTS clients, until every window of it is delivered; its time in ms. */
  const load = async () => {
    const before = delivered("k");
    const started = Date.now();
    let next = 0;
    await Promise.all(Array.from({ length: CLIENTS }, async () => {
      while (next < EVENTS) {
        const i = next;
        if (BATCH) {
          next = Math.min(EVENTS, i + BATCH);
          await postBatch(`k${Math.floor(i / BATCH) % KEYS}`, i, next);
        } else {
          next += 1;
          await post(`k${i % KEYS}`, i);
        }
      }
    }));
    const ms = Date.now() - started;
    await until(() => delivered("k") >= before + EVENTS, 60_000, "every window");
    return ms;
  };
  if (process.env.LULL_PROFILE_KNOWN === "1") await load();
  const perfOut = process.env.LULL_PROFILE_PERF;
  const workerd = childWorkerd();
  const perf = perfOut && recordPerf(perfOut, workerd);
  if (V8_PROFILE) {
    await send("Profiler.enable");
    await send("Profiler.setSamplingInterval", { interval: 100 });
    await send("Profiler.start");
  }
  const cpuBefore = workerd && cpuTicks(workerd);
  const loadMs = await load();
  const cpuAfter = workerd && cpuTicks(workerd);
  const cpuMs = cpuBefore === null || cpuAfter === null ? null : ((cpuAfter - cpuBefore) * TICK_US) / 1000;
  const { result } = V8_PROFILE ? await send("Profiler.stop") : { result: null };
  ws.close();
  if (perf) await perf.stop();
  console.log(`${who}: ${EVENTS} events over ${KEYS} keys${BATCH ? ` in batches of ${BATCH}` : ""} in ${loadMs} ms (${Math.round((EVENTS / loadMs) * 1000)} events/s), delivered ${delivered("k")} in all`);
  console.log(
    cpuMs === null
      ? "workerd's CPU: unreadable (no workerd process of this one's, or no /proc)"
      : `workerd's CPU ${cpuMs.toFixed(0)} ms from the load's start until its windows were delivered: ${((cpuMs * 1000) / EVENTS).toFixed(0)} µs an event${V8_PROFILE ? " (with V8's profiler on)" : ""}`,
  );
  if (V8_PROFILE) report(result.profile);
  if (counted) crossings(logs);
  if (perf) {
    const perfReport = execFileSync("perf", ["report", "-i", perfOut, "--no-children", "--sort", "dso,sym", "--stdio", "--percent-limit", "0.7"], { maxBuffer: 64 << 20 }).toString();
    console.log(`perf, workerd's process (${perfOut}):`);
    console.log(perfReport.split("\n").filter((l) => l && !l.startsWith("#")).slice(0, Number(top)).join("\n"));
    rmSync(`/tmp/perf-${perf.pid}.map`, { force: true });
  }
} finally {
  await mf.dispose();
  await rx.close();
  state.cleanup();
  counted?.cleanup();
}

/**
 * A copy of worker-build's output `build` whose wasm counts its calls into JavaScript:
 * each import wrapped, the counts logged at every COUNT_EVERY-th router answer
 * (`jsonResponse`, the router's one way to answer). Its `dir`, and `cleanup()`.
 */
function countingBuild(build) {
  const dir = mkdtempSync(join(tmpdir(), "lull-crossings-"));
  cpSync(build, dir, { recursive: true });
  const index = join(dir, "index.js");
  const text = readFileSync(index, "utf8");
  const instance = /new WebAssembly\.Instance\((\w+),(\w+)\(\)\)/g;
  if (!instance.test(text)) throw new Error(`${index}: no \`new WebAssembly.Instance(module, imports())\` to count the imports of`);
  const wrap = `function __lullCount(imports){const counts={};for(const [key,given] of Object.entries(imports)){if(!given||typeof given!=="object")continue;const module=imports[key]={...given};for(const [name,f] of Object.entries(module)){if(typeof f!=="function")continue;const short=name.replace(/_([0-9a-f]{4})[0-9a-f]{12}$/,"_$1");module[name]=function(...args){counts[short]=(counts[short]??0)+1;if(short.startsWith("__wbg_jsonResponse_")&&counts[short]%${COUNT_EVERY}===0)console.log(${JSON.stringify(COUNTS)}+JSON.stringify(counts));return f.apply(this,args)}}}return imports}\n`;
  writeFileSync(index, wrap + text.replace(instance, "new WebAssembly.Instance($1,__lullCount($2()))"));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The calls into JavaScript per router answer between the last two counts logged, by import, most first. */
function crossings(lines) {
  const counts = lines.filter((l) => String(l).includes(COUNTS)).map((l) => JSON.parse(String(l).slice(String(l).indexOf(COUNTS) + COUNTS.length)));
  if (counts.length < 2) throw new Error(`${counts.length} counts logged: the load answered fewer than ${2 * COUNT_EVERY} requests`);
  const [a, b] = counts.slice(-2);
  const per = Object.entries(b).map(([name, n]) => [name, (n - (a[name] ?? 0)) / COUNT_EVERY]).filter(([, n]) => n > 0).sort((x, y) => y[1] - x[1]);
  console.log(`calls from the wasm into JavaScript per router answer (the last ${COUNT_EVERY} answers): ${per.reduce((n, [, k]) => n + k, 0).toFixed(1)}`);
  for (const [name, n] of per.slice(0, Number(top))) console.log(`${n.toFixed(2).padStart(8)}  ${name}`);
}

/** The V8 profile's figures: self time by function (idle is the isolate waiting); written to `out` if named. */
function report(profile) {
  if (out) writeFileSync(out, JSON.stringify(profile));

  // Self time by function; idle is the isolate waiting.
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let total = 0;
  profile.samples.forEach((sample, i) => {
    const f = nodes.get(sample).callFrame;
    const name = `${f.functionName || "(anonymous)"} ${f.url.split("/").pop()}`.trim();
    const dt = profile.timeDeltas[i] ?? 0;
    self.set(name, (self.get(name) ?? 0) + dt);
    total += dt;
  });
  const busy = total - (self.get("(idle)") ?? 0);
  console.log(`the isolate busy ${(busy / 1000).toFixed(0)} ms of ${(total / 1000).toFixed(0)} sampled: ${(busy / EVENTS).toFixed(0)} µs an event`);
  // The collector's time, from the profile (gc-trace.mjs counts the collections themselves).
  console.log(`garbage collection: ${((self.get("(garbage collector)") ?? 0) / EVENTS).toFixed(0)} µs an event`);
  for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(top))) {
    console.log(`${((us / total) * 100).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${name.slice(0, 110)}`);
  }
}

/** `perf record` of workerd's process `pid` (this process's child) into `file` until `stop()`. */
function recordPerf(file, pid) {
  if (!pid) throw new Error("no workerd process to record");
  const child = spawn("perf", ["record", "-F", "999", "-g", "-p", pid, "-o", file], { stdio: ["ignore", "ignore", "inherit"] });
  return {
    pid,
    stop: () => new Promise((ok) => (child.once("exit", ok), child.kill("SIGINT"))),
  };
}
