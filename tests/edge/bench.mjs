// cargo xtask bench (edge): on one local workerd, in one run, lull-edge vs the
// JavaScript Durable Object that keeps lull-edge's promises
// (fixtures/js-promises.mjs, the reference of the per-event goals; its own
// test: reference.test.mjs) vs a plain one (fixtures/js-debounce.mjs: the
// alarm set only when none is, re-armed until the key is quiet; and, a row of
// its own, the slower variant pushing the alarm per event: the floor) vs a
// no-op one (fixtures/noop.mjs): accepted events/s, accept latency and
// workerd's CPU per event for 1 hot key, for 1,000 new keys and for the same
// 1,000 keys again right after (known keys, their objects still in memory),
// storage rows written per event, fire lateness; and a
// backlog phase: one key whose target is down, accepting with 0 and with
// 2,000 windows (JS: 2,000 undelivered events) already held. lull-edge runs
// twice in the load phases: with the ingest token, and with a browser's client
// token (an HS256 JWT the worker verifies on every event: no round trip).
// One hot key takes batches from 256 producers paced at 5.5x the no-op rate:
// lull-edge with its default windows (max_batch 100) and with windows as
// large as the JS object's (max_batch 10,000), and the JS object taking the
// same batches (one object request and one row per key of a batch). Each
// role (a row, or a group of rows of one target) runs in a worker, so an
// isolate, of its own: no role's rows run on an isolate that took another role's load.
// Usage: node bench.mjs OUT.json (LULL_BENCH_ROUNDS=N: N rounds, not 4; LULL_BENCH_ONLY=single: the
// single-event loads alone, lull-edge and the JS objects; LULL_BENCH_BEFORE=DIR: another worker-build
// output of lull-edge measured beside this one, "lull-edge before": an A/B of a change in one run;
// all three for a look while working, not for figures)
import http from "node:http";
import { writeFileSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { createHmac } from "node:crypto";
import { anotherLullWorker, childWorkerd, cpuTicks, TICK_US, jsObjectWorker, lullWorker, runtimeOptions, startReceiver, stateDir, TOKENS, sleep } from "./harness.mjs";
import { startRun } from "../bench-run.mjs";
import { TRACED_HEAP_MB, traceGc } from "./gc-trace.mjs";

const out = process.argv[2] ?? "edge.json";
const benchRun = startRun();
const ROUNDS = (() => {
  const n = Number(process.env.LULL_BENCH_ROUNDS ?? 4);
  if (!Number.isInteger(n) || n < 1) throw new Error(`LULL_BENCH_ROUNDS=${process.env.LULL_BENCH_ROUNDS}: a number of rounds, 1 or more`);
  return n;
})();
/** LULL_BENCH_ONLY=single: only the single-event load phases, of lull-edge, the JS objects and the no-op one. */
const SINGLE_ONLY = process.env.LULL_BENCH_ONLY === "single";
if (process.env.LULL_BENCH_ONLY && !SINGLE_ONLY) throw new Error(`LULL_BENCH_ONLY=${process.env.LULL_BENCH_ONLY}: only "single" is known`);
/** Another lull-edge build (worker-build's output directory) to measure beside this one, or undefined. */
const BEFORE = process.env.LULL_BENCH_BEFORE;
const CONCURRENCY = 32;
const HOT_EVENTS = 2_000;
const KEYS = 1_000;
const SPREAD_EVENTS = 3_000;
const WAIT = 200;
const MAX_WAIT = 1_000;

const CLIENT_SECRET = "bench-client-token-secret-0123456789";
/** Every key a client-token turn posts to starts with this (a client token's key_prefix may not be empty). */
const KEY_PREFIX = "bench-";
/** A client token for every key of topic `c` under KEY_PREFIX, an hour long, signed as any JWT library would. */
const CLIENT_TOKEN = (() => {
  const part = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const signed = `${part({ alg: "HS256", typ: "JWT" })}.${part({ topic: "c", key_prefix: KEY_PREFIX, iat: now, exp: now + 3600 })}`;
  return `${signed}.${createHmac("sha256", CLIENT_SECRET).update(signed).digest("base64url")}`;
})();

const BACKLOG = 2_000;
const BACKLOG_MEASURED = 500;

// "/down" is a target that is down while a backlog turn runs (`downNow`): every delivery fails.
// Between turns it is up, so the backlogs' retries do not run into later phases (see `backlog`).
let downNow = false;
const rx = await startReceiver((d) => (d.path === "/down" && downNow ? 500 : 200));
const state = stateDir();
const fixtures = join(import.meta.dirname, "fixtures");
/** V8's collections in workerd, each load's counted (gc-trace.mjs: the trace on, each isolate's heap bounded as production's). */
const gc = traceGc(state.dir);
/** A load's collections (`gc.since`) per 1,000 of its `events`, and its longest pause. */
const gcPer = (c, events) => ({
  gc_minor_per_1k: (1000 * c.minor) / events,
  gc_full_per_1k: (1000 * c.full) / events,
  gc_ms_per_1k: (1000 * c.pause_ms) / events,
  gc_longest_ms: c.longest_ms,
});
/** The plain JS fixture (fixtures/js-debounce.mjs) as a worker of its own at `host`, delivering to the receiver's `path`. */
const jsFixture = (name, host, path, bindings = {}) => ({
  name,
  routes: [`${host}/*`],
  ...jsObjectWorker("plain", `${rx.url}${path}`, { ...bindings, WAIT_MS: String(WAIT), MAX_WAIT_MS: String(MAX_WAIT) }),
});
/**
 * The same-promises JS fixture (fixtures/js-promises.mjs: what a team would
 * write to keep lull-edge's promises, the reference of the per-event goals) as
 * a worker of its own at `host`, delivering to the receiver's `path`, signed
 * with lull-edge's secret, windows capped as lull-edge's topics are.
 */
const jsPromisesFixture = (name, host, path) => ({
  name,
  routes: [`${host}/*`],
  ...jsObjectWorker("promises", `${rx.url}${path}`, { WAIT_MS: String(WAIT), MAX_WAIT_MS: String(MAX_WAIT), MAX_BATCH: "100" }),
});
/** A topic of lull-edge's as every phase configures it, delivering to the receiver's `path`. */
const lullTopic = (path, extra = {}) => ({ target: `${rx.url}${path}`, wait_ms: WAIT, max_wait_ms: MAX_WAIT, payload: "all", max_batch: 100, ...extra });
/**
 * lull-edge as a worker (so an isolate) of its own at `host`, with `topics`,
 * as each role of the JS object's is (js, js-push, js-hot, js-down): each
 * isolate takes only its own role's loads. Only the main worker takes queue messages.
 */
/** A client-token budget per key_prefix no bench load reaches (the LULL_CLIENT_RATE binding's limit a minute). */
const CLIENT_RATE = 1_000_000_000;
const lullRole = (name, host, topics, vars = {}) => ({ name, routes: [`${host}/*`], ...anotherLullWorker(topics, undefined, vars, {}, CLIENT_RATE) });
const mf = new Miniflare(
  convertV4MiniflareOptions({
    ...runtimeOptions(state.dir),
    workers: [
      { name: "lull", routes: ["lull.bench/*"], ...lullWorker({ b: lullTopic("/lull") }) },
      ...(BEFORE ? [{ name: "lull-before", routes: ["lullbefore.bench/*"], ...anotherLullWorker({ b: lullTopic("/lullbefore") }, BEFORE, {}, {}, CLIENT_RATE) }] : []),
      lullRole("lull-client", "lullclient.bench", { c: lullTopic("/client", { client_tokens: true }) }, { LULL_CLIENT_TOKEN_SECRET: CLIENT_SECRET }),
      lullRole("lull-hot", "lullhot.bench", {
        b: lullTopic("/lullhot"),
        // As `b`, one object request per single event (`b` coalesces a key's events in flight together).
        n: lullTopic("/lullhot", { coalesce: false }),
      }),
      // The paced hot key: windows of at most 100 events (the default), and as large as the JS object's.
      lullRole("lull-paced", "lullpaced.bench", { b: lullTopic("/lullpaced") }),
      lullRole("lull-paced-h", "lullpacedh.bench", { b: lullTopic("/lullpacedh", { max_batch: 10_000 }) }),
      lullRole("lull-down", "lulldown.bench", {
        // One window per event, the first one's retry far off: every later window queues.
        down: { target: `${rx.url}/down`, wait_ms: WAIT, payload: "all", max_batch: 1,
                retry: { max_attempts: 10, base_ms: 600_000, cap_ms: 600_000, jitter: "none" } },
      }),
      jsPromisesFixture("jsp", "jsp.bench", "/jsp"),
      jsPromisesFixture("jsp-hot", "jsphot.bench", "/jsphot"),
      jsFixture("js", "js.bench", "/js"),
      jsFixture("js-push", "jspush.bench", "/jspush", { PUSH: "1" }),
      jsFixture("js-hot", "jshot.bench", "/jshot"),
      jsFixture("js-down", "jsdown.bench", "/down"),
      {
        name: "noop",
        routes: ["noop.bench/*"],
        compatibilityDate: "2026-11-01",
        modules: true,
        scriptPath: join(fixtures, "noop.mjs"),
        durableObjects: { NOOP: { className: "Noop", useSQLite: true } },
      },
    ],
  }),
);
const base = new URL((await mf.ready).toString());

/**
 * The runtime idles down before each target's turn: objects idle for about
 * 10 s are evicted, and evicting a turn's 1,100 objects took the runtime 0.5 to
 * 0.7 s of CPU, 8 to 20 s after the turn (sampled from /proc: about 10 s after
 * each object's last request or alarm). Left to chance, that burst lands in the
 * next target's phases (lull-edge measured after the JS object read up to 0.17
 * lower than before it, in the same run). So a turn starts once workerd has
 * used less than CALM_TICKS of CPU a second for CALM_SECONDS in a row (longer
 * than the eviction timeout: an eviction burst restarts the count), or after
 * CALM_MAX_MS.
 */
const CALM_TICKS = 3; // clock ticks (10 ms each) in one second
const CALM_SECONDS = 15;
const CALM_MAX_MS = 45_000;
const workerdPid = childWorkerd();
/** workerd's CPU so far (clock ticks), or null if unreadable. */
const workerdTicks = () => cpuTicks(workerdPid);
/** Wait until the runtime is calm (see CALM_SECONDS), or CALM_MAX_MS if its CPU cannot be read; the wait in ms. */
async function calm() {
  const started = performance.now();
  let calmFor = 0;
  let last = workerdPid && workerdTicks();
  while (calmFor < CALM_SECONDS && performance.now() - started < CALM_MAX_MS) {
    await sleep(1_000);
    const now = last === null ? null : workerdTicks();
    calmFor = now !== null && now - last < CALM_TICKS ? calmFor + 1 : 0;
    last = now;
  }
  return performance.now() - started;
}
const calmWaits = [];
/** Producers of the hot-key phases (the load phases use CONCURRENCY). */
const PRODUCERS = [32, 256];
const agent = new http.Agent({ keepAlive: true, maxSockets: Math.max(CONCURRENCY, ...PRODUCERS) });

function request(host, method, path, body, token) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: base.hostname,
        port: base.port,
        method,
        path,
        agent,
        headers: {
          host,
          authorization: `Bearer ${token ?? (method === "GET" ? TOKENS.admin : TOKENS.ingest)}`,
          "content-type": "application/json",
          ...(body ? { "content-length": Buffer.byteLength(body) } : {}),
        },
      },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** An event's body in the load phases: event `i`. */
const payload = (i) => ({ i, at: Date.now(), note: "a typical small event payload" });

/**
 * `total` events from `clients` producers, `per` to a request: `send(first, end)`
 * posts events first..end-1 and answers how many of them were refused.
 */
async function drive(total, per, clients, send) {
  let next = 0;
  let errors = 0;
  const latencies = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = next; i < total; i = next) {
        next = Math.min(total, i + per);
        const t = performance.now();
        // Not `errors += await …`: that reads `errors` before the await and loses other producers' counts.
        const refused = await send(i, next);
        errors += refused;
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  // Accepted events per second: a refused event is not throughput.
  return { events: total, requests: Math.ceil(total / per), errors, per_sec: (total - errors) / seconds, p50_ms: quantile(latencies, 0.5), p99_ms: quantile(latencies, 0.99) };
}

/**
 * `total` events from `clients` producers, one a request; `keyOf(i)` picks the key of event i;
 * `accepted`, if given, collects the i of each event answered 202.
 */
function load(host, total, keyOf, topic = "b", token = undefined, clients = CONCURRENCY, accepted = undefined) {
  return drive(total, 1, clients, async (i) => {
    const res = await request(host, "POST", `/v1/topics/${topic}/keys/${keyOf(i)}/events`, JSON.stringify(payload(i)), token);
    if (res.status === 202) accepted?.add(i);
    return res.status === 202 ? 0 : 1;
  });
}

/**
 * Of the events of `key` answered 202 (their i in `accepted`), how many are not
 * in exactly one delivered window (a window's retries counted once), read from the receiver.
 */
function lost(path, key, accepted) {
  // Each window once whatever its attempts (the plain JS object sends no idempotency key: each of its deliveries is a window).
  const windows = new Map(rx.deliveries.filter((d) => d.path === path && d.body.key === key).map((d) => [d.idempotencyKey ?? d, d]));
  const seen = new Map();
  for (const d of windows.values()) for (const e of d.body.events) seen.set(e.i, (seen.get(e.i) ?? 0) + 1);
  let missing = 0;
  for (const i of accepted) if (seen.get(i) !== 1) missing++;
  return missing;
}

/** Post events first..end-1 of `key` (topic `b`) as one `events:batch`; how many were refused (`accepted` collects the i of the rest). */
async function postBatch(host, key, first, end, accepted) {
  const events = Array.from({ length: end - first }, (_, j) => ({ key, event: payload(first + j) }));
  const res = await request(host, "POST", "/v1/topics/b/events:batch", JSON.stringify({ events }));
  const results = res.status === 207 ? JSON.parse(res.body).results : [];
  results.forEach((r, j) => r.status === 202 && accepted?.add(first + j));
  return events.length - results.filter((r) => r.status === 202).length;
}

/** `total` events on one key in batches of `per` (`events:batch`) from `clients` producers. */
function batchLoad(host, total, key, per, clients, accepted) {
  return drive(total, per, clients, (first, end) => postBatch(host, key, first, end, accepted));
}

/**
 * Open loop: `producers` each post a batch of `per` events of `key` on a
 * schedule of their own (staggered), together offering `offered` events/s for
 * `warmup` + `ms`; a producer whose answer comes late sends its next batch
 * late. Latency runs from each batch's scheduled time, so time spent behind a
 * slow answer counts (no coordinated omission). Rate and latency are those of
 * the batches scheduled after the warm-up (the load's start opens its
 * producers' connections and meets a cold key); the warm-up's p99 is reported
 * apart. Every batch's events count toward `accepted`, `events` and `errors`.
 */
async function pacedBatchLoad(host, key, per, producers, offered, warmup, ms, accepted) {
  const period = (producers * per * 1000) / offered;
  const started = performance.now();
  const measuredFrom = started + warmup;
  let next = 0;
  let measuredEvents = 0;
  let errors = 0;
  const latencies = [];
  const warming = [];
  const slow = {};
  // How late each batch left after its scheduled time: near 0 while the load is open; past
  // the period, answers come slower than the schedule and the phase is a closed loop.
  const lags = [];
  await Promise.all(
    Array.from({ length: producers }, async (_, p) => {
      for (let at = started + (p * period) / producers; at < measuredFrom + ms; at += period) {
        const ahead = at - performance.now();
        if (ahead > 0) await sleep(ahead);
        const lag = Math.max(0, performance.now() - at);
        const first = next;
        next += per;
        const refused = await postBatch(host, key, first, first + per, accepted);
        const latency = performance.now() - at;
        errors += refused; // a refusal in the warm-up counts too
        if (at < measuredFrom) {
          warming.push(latency);
          continue;
        }
        lags.push(lag);
        measuredEvents += per - refused;
        latencies.push(latency);
        // Where in the phase the slow batches were scheduled (half-second buckets).
        const bucket = Math.floor((at - measuredFrom) / 500);
        if (latency > SLOW_MS) slow[bucket] = (slow[bucket] ?? 0) + 1;
      }
    }),
  );
  const seconds = (performance.now() - measuredFrom) / 1000;
  for (const xs of [latencies, lags, warming]) xs.sort((a, b) => a - b);
  return {
    events: next, requests: latencies.length, errors, offered_per_sec: offered, per_sec: measuredEvents / seconds,
    p50_ms: quantile(latencies, 0.5), p99_ms: quantile(latencies, 0.99),
    warmup_ms: warmup, warmup_p99_ms: quantile(warming, 0.99), slow_by_half_second: slow,
    period_ms: period, lag_p99_ms: quantile(lags, 0.99), lag_max_ms: lags[lags.length - 1],
  };
}

const delivered = (path) => rx.deliveries.filter((d) => d.path === path).reduce((n, d) => n + d.body.count, 0);

async function settle(path, expected) {
  const deadline = Date.now() + 60_000;
  while (delivered(path) < expected && Date.now() < deadline) await sleep(100);
  await sleep(WAIT * 2);
}

/** Sum storage counters and object requests over `keys` (lull: the status API; js: the fixture's /stats). */
async function rows(host, keys, topic = "b") {
  let sql = 0;
  let accept = 0;
  let alarms = 0;
  let objects = 0;
  for (let i = 0; i < keys.length; i += CONCURRENCY) {
    const batch = await Promise.all(
      keys.slice(i, i + CONCURRENCY).map((k) => request(host, "GET", `/v1/topics/${topic}/keys/${k}`)),
    );
    for (const r of batch) {
      const s = JSON.parse(r.body);
      if (s.io) {
        sql += s.io.rows_written;
        accept += s.io.accept_rows_written;
        alarms += s.io.alarms_set;
        objects += s.io.requests - 1; // not the status request reading it
      } else {
        sql += s.rows_written;
        alarms += s.alarms_set;
        objects += s.requests;
        accept = null;
      }
    }
  }
  return { sql, accept, alarms, objects };
}

const targets = [
  { name: "lull-edge", host: "lull.bench", path: "/lull" },
  { name: "lull-edge, client token", host: "lullclient.bench", path: "/client", topic: "c", token: CLIENT_TOKEN },
  { name: "same-promises JS DO", host: "jsp.bench", path: "/jsp" },
  ...(BEFORE ? [{ name: "lull-edge before", host: "lullbefore.bench", path: "/lullbefore" }] : []),
  { name: "plain JS DO", host: "js.bench", path: "/js" },
  { name: "plain JS DO, alarm pushed per event", host: "jspush.bench", path: "/jspush" },
  { name: "no-op DO", host: "noop.bench", path: null },
];
const results = Object.fromEntries(targets.map((t) => [t.name, { hot: [], spread: [], known: [], rows: [] }]));
/**
 * The order of a round's targets. Every phase leaves objects behind and the
 * local runtime slows as they pile up, so a target measured later in a round
 * is measured on a slower runtime: lull-edge and the JS object run next to
 * each other, each first in half the rounds; the no-op object (the ceiling the
 * hot-key goal is measured against) runs first, on the freshest runtime. And
 * each turn (and each backlog turn, and the hot-key phases) waits for the
 * runtime to be calm (`calm`): the objects of the turn before are evicted
 * before it, not during it.
 */
function roundOrder(round) {
  const named = (name) => targets.find((t) => t.name === name);
  // Each first in turn (with LULL_BENCH_BEFORE, the build before too).
  const pair = ["lull-edge", "same-promises JS DO", ...(BEFORE ? ["lull-edge before"] : [])].map(named);
  pair.push(...pair.splice(0, round % pair.length));
  const rest = targets.filter((t) => !pair.includes(t) && t.path !== null);
  return [...targets.filter((t) => t.path === null), ...pair, ...rest];
}
/** The hot key in batches: BATCH events per request, HOT_BATCH_EVENTS events a round (lull-edge). */
const BATCH = 20;
const HOT_BATCH_EVENTS = 20_000;
const hotBatch = [];
/**
 * One hot key at each of PRODUCERS (lull-edge), per round: single events with
 * coalescing (topic `b`), without it (topic `n`, `coalesce: false`), and
 * batches of BATCH (closed loop: each producer sends again once answered);
 * then, at the most producers, on a calm runtime (`calm`), batches paced to
 * offer PACED_VS_NOOP times the no-op object's single-request rate of the
 * same round, for PACED_MS.
 */
const HOT_KINDS = ["single", "single, coalescing off", "batch"];
// Offered with a margin over the goal's 5x: what a load achieves is at most what it offers.
const PACED_VS_NOOP = 5.5;
const PACED_MS = 4_000;
// Paced, not measured, before PACED_MS: the load opens 256 connections and meets a cold key.
const PACED_WARMUP_MS = 1_000;
/** A paced batch answered later than this counts as slow (the goal's accept p99). */
const SLOW_MS = 50;
const PACED_KIND = `batch, paced at ${PACED_VS_NOOP}x no-op`;
/**
 * The paced phase's targets, each on a calm runtime, in this order in even
 * rounds and the reverse in odd ones: lull-edge as configured for every phase
 * (windows of at most 100 events, the default), lull-edge with windows as
 * large as the JS object's (at most 10,000 events), and the JS object. Each is
 * a worker of its own, so each runs in an isolate that has taken only its own
 * paced loads: none of the closed-loop loads above.
 */
const PACED_TARGETS = [
  { label: "", host: "lullpaced.bench", path: "/lullpaced" },
  { label: ", max_batch 10,000", host: "lullpacedh.bench", path: "/lullpacedh" },
  { label: ", same-promises JS DO", host: "jsphot.bench", path: "/jsphot" },
  { label: ", plain JS DO", host: "jshot.bench", path: "/jshot" },
];
const pacedPhase = (t) => `${PACED_KIND} ${Math.max(...PRODUCERS)}${t.label}`;
const hotKeyPhases = Object.fromEntries(PRODUCERS.flatMap((n) => HOT_KINDS.map((kind) => [`${kind} ${n}`, []])));
for (const t of PACED_TARGETS) hotKeyPhases[pacedPhase(t)] = [];
const PACED_KEYS = 100;
const PACE_MS = 10;

/**
 * Run a load, then (for a real debouncer) wait for its deliveries and read its
 * storage counters. Its CPU per event: workerd's, from the load's start until
 * every window of it was delivered (accepting and delivering: what an event costs).
 */
async function phase(t, total, keyOf, keys, name, { counted = true } = {}) {
  const before = t.path ? delivered(t.path) : 0;
  const ticks = workerdTicks();
  const traced = gc.mark();
  const result = await load(t.host, total, keyOf, t.topic, t.token);
  if (t.path) await settle(t.path, before + total);
  const used = ticks === null ? null : workerdTicks();
  result.cpu_us_per_event = used === null ? null : ((used - ticks) * TICK_US) / total;
  Object.assign(result, gcPer(gc.since(traced), total));
  if (t.path) {
    // Counters are read before the object can be evicted (the fixture keeps them in memory).
    // A phase on keys an earlier phase counted adds nothing to the counts (they are the keys' totals).
    if (!counted) return result;
    // Windows delivered for these keys, from the receiver: each once whatever its attempts
    // (the plain JS object sends no idempotency key and no retry here: each of its deliveries is a window).
    const mine = new Set(keys);
    const windows = new Set(rx.deliveries.filter((d) => d.path === t.path && mine.has(d.body.key)).map((d) => d.idempotencyKey ?? d)).size;
    results[t.name].rows.push({ ...(await rows(t.host, keys, t.topic)), events: total, windows, phase: name });
  }
  return result;
}

/** One event per key, one every PACE_MS: fire lateness when the runtime is not saturated. */
async function paced(t, round) {
  for (let i = 0; i < PACED_KEYS; i++) {
    const started = Date.now();
    const body = JSON.stringify({ i, note: "paced" });
    await request(t.host, "POST", `/v1/topics/${t.topic ?? "b"}/keys/${KEY_PREFIX}paced${round}-${i}/events`, body, t.token);
    await sleep(Math.max(0, PACE_MS - (Date.now() - started)));
  }
}

/**
 * The backlog phase for one target (its target down): BACKLOG events build a
 * backlog on one key; then BACKLOG_MEASURED events on a fresh key (0 held
 * before) and BACKLOG_MEASURED more on the backlogged one (BACKLOG held before).
 */
async function backlog(t, round) {
  const fresh = `fresh-${round}`;
  const full = `backlog-${round}`;
  downNow = true;
  // The backlog is built first, so both measured loads run on a warm isolate.
  await load(t.host, BACKLOG, () => full, "down");
  const empty = await load(t.host, BACKLOG_MEASURED, () => fresh, "down");
  const held = await load(t.host, BACKLOG_MEASURED, () => full, "down");
  const counters = await rows(t.host, [fresh, full], "down");
  // Measured: the backlogs go, so their retries do not run on into every later phase. The JS
  // object retries its whole backlog each second, for ever: left so, workerd was calm before
  // few of the run's later turns (34 of 44 waits cut off at CALM_MAX_MS), and the receiver,
  // in this process, parsed each key's whole backlog every second. lull-edge's keys are
  // cancelled (their queued windows dropped; the one window waiting on its retry, 10 minutes
  // off, keeps it and delivers its one event then); the JS object's deliver once, the target up again.
  if (t.cancel) {
    for (const key of [fresh, full]) {
      const res = await request(t.host, "DELETE", `/v1/topics/down/keys/${key}`, undefined, TOKENS.admin);
      if (res.status !== 200) throw new Error(`cancelling ${key}: ${res.status} ${res.body}`);
    }
  }
  downNow = false;
  return { empty, held, counters, events: 2 * BACKLOG_MEASURED + BACKLOG };
}
const backlogTargets = [
  { name: "lull-edge", host: "lulldown.bench", cancel: true },
  { name: "plain JS DO", host: "jsdown.bench" },
];
const backlogResults = Object.fromEntries(backlogTargets.map((t) => [t.name, []]));

for (let round = 0; round < ROUNDS; round++) {
  for (const t of SINGLE_ONLY ? [] : round % 2 ? [...backlogTargets].reverse() : backlogTargets) {
    calmWaits.push(await calm());
    backlogResults[t.name].push(await backlog(t, round));
  }
  process.stdout.write(`round ${round + 1}: backlog phase done\n`);
  const order = roundOrder(round).filter((t) => !SINGLE_ONLY || ["lull-edge", "lull-edge before", "same-promises JS DO", "plain JS DO", "no-op DO"].includes(t.name));
  for (const t of order) {
    calmWaits.push(await calm());
    const hotKey = `${KEY_PREFIX}hot-${round}`;
    const spreadKey = (i) => `${KEY_PREFIX}k${round}-${i % KEYS}`;
    results[t.name].hot.push(await phase(t, HOT_EVENTS, () => hotKey, [hotKey], "hot"));
    const keys = Array.from({ length: KEYS }, (_, i) => spreadKey(i));
    results[t.name].spread.push(await phase(t, SPREAD_EVENTS, spreadKey, keys, "spread"));
    // The same keys again once those windows were delivered: keys a service already knows,
    // their objects still in memory. Their counters are the keys' totals, read above.
    results[t.name].known.push(await phase(t, SPREAD_EVENTS, spreadKey, keys, "known", { counted: false }));
    if (t.path) {
      const before = delivered(t.path);
      await paced(t, round);
      await settle(t.path, before + PACED_KEYS);
    }
    process.stdout.write(`round ${round + 1}: ${t.name} done\n`);
  }
  if (SINGLE_ONLY) continue;
  calmWaits.push(await calm());
  for (const producers of PRODUCERS) {
    for (const kind of HOT_KINDS) {
      const before = delivered("/lullhot");
      const topic = kind === "single, coalescing off" ? "n" : "b";
      const key = `hot${kind.replace(/\W/g, "")}${producers}-${round}`;
      const total = kind === "batch" ? HOT_BATCH_EVENTS : HOT_EVENTS;
      const accepted = new Set();
      const result =
        kind === "batch"
          ? await batchLoad("lullhot.bench", total, key, BATCH, producers, accepted)
          : await load("lullhot.bench", total, () => key, topic, undefined, producers, accepted);
      await settle("/lullhot", before + total);
      const measured = { ...result, ...(await rows("lullhot.bench", [key], topic)) };
      measured.lost = lost("/lullhot", key, accepted);
      hotKeyPhases[`${kind} ${producers}`].push(measured);
      if (kind === "batch" && producers === CONCURRENCY) hotBatch.push(measured);
    }
  }
  for (const t of round % 2 ? [...PACED_TARGETS].reverse() : PACED_TARGETS) {
    // The loads above leave their objects to be evicted (and the isolate's heap full of
    // their garbage) about 10 s after their last request: measured without this wait, that
    // landed in the paced phase (measured once: p99 480 ms; after a calm runtime, 74 to 107 ms in six runs).
    calmWaits.push(await calm());
    const producers = Math.max(...PRODUCERS);
    const before = delivered(t.path);
    const key = `hotpaced${producers}-${round}`;
    const offered = PACED_VS_NOOP * results["no-op DO"].hot[round].per_sec;
    const accepted = new Set();
    const traced = gc.mark();
    const result = await pacedBatchLoad(t.host, key, BATCH, producers, offered, PACED_WARMUP_MS, PACED_MS, accepted);
    await settle(t.path, before + result.events);
    const collected = gcPer(gc.since(traced), result.events);
    const measured = { ...result, ...collected, ...(await rows(t.host, [key])), lost: lost(t.path, key, accepted) };
    hotKeyPhases[pacedPhase(t)].push(measured);
  }
  process.stdout.write(`round ${round + 1}: lull-edge, one hot key at ${PRODUCERS.join(" and ")} producers done\n`);
}

// Fire lateness: delivery time minus the time the window was due (quiet and
// max_wait fires; full batches fire on the event itself).
function lateness(path, paced) {
  const late = [];
  for (const d of rx.deliveries.filter((d) => d.path === path && d.body.key.startsWith(`${KEY_PREFIX}paced`) === paced)) {
    const b = d.body;
    const due = b.due ?? (b.reason === "quiet" ? b.last_at + WAIT : b.reason === "max_wait" ? b.first_at + MAX_WAIT : null);
    if (due !== null) late.push(d.at - due);
  }
  late.sort((a, b) => a - b);
  return { windows: late.length, p50_ms: quantile(late, 0.5), p99_ms: quantile(late, 0.99) };
}

/**
 * A load phase's rounds: the medians of events/s, accept p50 and p99,
 * workerd's CPU per event (µs) and its collections per 1,000 events (young,
 * full, the pauses' ms); the longest pause of any round.
 */
const phaseSummary = (runs) => {
  const m = (k) => (runs.every((x) => typeof x[k] === "number") ? median(runs.map((x) => x[k])) : null);
  return {
    per_sec: m("per_sec"), p50_ms: m("p50_ms"), p99_ms: m("p99_ms"), cpu_us_per_event: m("cpu_us_per_event"),
    gc_minor_per_1k: m("gc_minor_per_1k"), gc_full_per_1k: m("gc_full_per_1k"), gc_ms_per_1k: m("gc_ms_per_1k"),
    gc_longest_ms: runs.length ? Math.max(...runs.map((x) => x.gc_longest_ms)) : null,
  };
};
const summary = {};
for (const t of targets) {
  const r = results[t.name];
  const sum = (k) => r.rows.reduce((n, x) => n + x[k], 0);
  const spreadSum = (k) => r.rows.filter((x) => x.phase === "spread").reduce((n, x) => n + x[k], 0);
  const events = sum("events");
  summary[t.name] = {
    hot: phaseSummary(r.hot),
    spread: phaseSummary(r.spread),
    known: phaseSummary(r.known),
    errors: [...r.hot, ...r.spread, ...r.known].reduce((n, x) => n + x.errors, 0),
    rows_per_event: t.path ? sum("sql") / events : null,
    accept_rows_per_event: t.path && r.rows[0] && r.rows[0].accept !== null ? sum("accept") / events : null,
    alarms_per_event: t.path ? sum("alarms") / events : null,
    object_requests_per_event: t.path ? sum("objects") / events : null,
    // 1,000 keys alone, per window delivered (events / windows says how many a window held).
    spread_events_per_window: t.path ? spreadSum("events") / spreadSum("windows") : null,
    spread_rows_per_window: t.path ? spreadSum("sql") / spreadSum("windows") : null,
    spread_alarms_per_window: t.path ? spreadSum("alarms") / spreadSum("windows") : null,
    lateness: t.path ? lateness(t.path, true) : null,
    lateness_saturated: t.path ? lateness(t.path, false) : null,
  };
}
// Cost per million events at Cloudflare's published prices: requests (the
// Worker's, and the Durable Object's as it counted them: requests and alarms
// served) $0.15 per million each, rows written $1.00 per million, setAlarm
// billed as a row written.
const PRICE = { request: 0.15, row: 1.0 };
const cost = (workerRequestsPerEvent, { rows_per_event: rows, alarms_per_event: alarms, object_requests_per_event: objects }) =>
  rows === null ? null : (workerRequestsPerEvent + objects) * PRICE.request + (rows + (alarms ?? 0)) * PRICE.row;
for (const t of targets) summary[t.name].cost_per_million = cost(1, summary[t.name]);
const batchEvents = hotBatch.reduce((n, x) => n + x.events, 0);
const hotBatchSummary = {
  per_sec: median(hotBatch.map((x) => x.per_sec)),
  p50_ms: median(hotBatch.map((x) => x.p50_ms)),
  p99_ms: median(hotBatch.map((x) => x.p99_ms)),
  errors: hotBatch.reduce((n, x) => n + x.errors, 0),
  rows_per_event: hotBatch.reduce((n, x) => n + x.sql, 0) / batchEvents,
  alarms_per_event: hotBatch.reduce((n, x) => n + x.alarms, 0) / batchEvents,
  object_requests_per_event: hotBatch.reduce((n, x) => n + x.objects, 0) / batchEvents,
};
hotBatchSummary.cost_per_million = cost(1 / BATCH, hotBatchSummary);
const lull = summary["lull-edge"];
const client = summary["lull-edge, client token"];
/** lull-edge's `field` in a load phase over `peer`'s (events/s by default). */
const vs = (peer, phase, field = "per_sec") => lull[phase][field] / summary[peer][phase][field];
const ratios = {
  client_vs_ingest_hot: client.hot.per_sec / lull.hot.per_sec,
  client_vs_ingest_spread: client.spread.per_sec / lull.spread.per_sec,
  hot_vs_promises: vs("same-promises JS DO", "hot"),
  spread_vs_promises: vs("same-promises JS DO", "spread"),
  known_vs_promises: vs("same-promises JS DO", "known"),
  cpu_hot_vs_promises: vs("same-promises JS DO", "hot", "cpu_us_per_event"),
  cpu_spread_vs_promises: vs("same-promises JS DO", "spread", "cpu_us_per_event"),
  cpu_known_vs_promises: vs("same-promises JS DO", "known", "cpu_us_per_event"),
  hot_vs_js: vs("plain JS DO", "hot"),
  spread_vs_js: vs("plain JS DO", "spread"),
  known_vs_js: vs("plain JS DO", "known"),
  known_vs_noop: vs("no-op DO", "known"),
  hot_vs_noop: vs("no-op DO", "hot"),
  spread_vs_noop: vs("no-op DO", "spread"),
  hot_batch_vs_noop_single: hotBatchSummary.per_sec / summary["no-op DO"].hot.per_sec,
};
// Round by round: lull-edge's figure over the same-promises object's in the same round (the two
// run one after the other, each first in turn), so what drifts between rounds (the machine's other
// load, its clock) cancels out; the median of those ratios, and the lowest and highest. How far
// these spread says whether the ratios of medians above are settled.
ratios.per_round_vs_promises = Object.fromEntries(
  ["hot", "spread", "known"].map((phase) => [
    phase,
    Object.fromEntries(
      ["per_sec", "cpu_us_per_event"].map((field) => {
        const l = results["lull-edge"][phase];
        const p = results["same-promises JS DO"][phase];
        const each = l.map((x, r) => (p[r] && x[field] && p[r][field] ? x[field] / p[r][field] : null)).filter((x) => x !== null);
        return [field, each.length ? { median: median(each), min: Math.min(...each), max: Math.max(...each), rounds: each.length } : null];
      }),
    ),
  ]),
);
for (const producers of PRODUCERS) {
  const rate = (kind) => median(hotKeyPhases[`${kind} ${producers}`].map((x) => x.per_sec));
  ratios[`hot_coalesced_vs_noop_single_${producers}`] = rate("single") / summary["no-op DO"].hot.per_sec;
  ratios[`hot_coalesced_vs_off_${producers}`] = rate("single") / rate("single, coalescing off");
  ratios[`hot_batch_vs_noop_single_${producers}`] = rate("batch") / summary["no-op DO"].hot.per_sec;
}
// Paced: each round's achieved rate over that round's no-op rate (median of rounds).
const pacedRuns = hotKeyPhases[pacedPhase(PACED_TARGETS[0])];
ratios.hot_paced_vs_noop_single = median(pacedRuns.map((x, r) => x.per_sec / results["no-op DO"].hot[r].per_sec));
// The paced phase's accept p99 (median of rounds), each target: the goal is at most 50 ms.
const pacedP99 = Object.fromEntries(PACED_TARGETS.map((t) => [t.label.replace(/^, /, "") || "lull-edge", median(hotKeyPhases[pacedPhase(t)].map((x) => x.p99_ms))]));
ratios.hot_paced_p99_ms = pacedP99;
// The paced phase, round by round: the rounds in which lull-edge's accept p99 was at most the same-promises object's.
{
  const [l, p] = ["", ", same-promises JS DO"].map((label) => hotKeyPhases[pacedPhase(PACED_TARGETS.find((t) => t.label === label))]);
  ratios.hot_paced_p99_rounds_at_most_promises = l.filter((x, r) => p[r] && x.p99_ms <= p[r].p99_ms).length;
}
// The paced phase's collections, each target (phaseSummary's figures): the goal is lull-edge's full ones per 1,000 events at most the same-promises object's.
const pacedGc = Object.fromEntries(
  PACED_TARGETS.map((t) => {
    const { gc_minor_per_1k, gc_full_per_1k, gc_ms_per_1k, gc_longest_ms } = phaseSummary(hotKeyPhases[pacedPhase(t)]);
    return [t.label.replace(/^, /, "") || "lull-edge", { gc_minor_per_1k, gc_full_per_1k, gc_ms_per_1k, gc_longest_ms }];
  }),
);
ratios.hot_paced_gc = pacedGc;
ratios.hot_paced_full_gc_vs_promises = pacedGc["lull-edge"].gc_full_per_1k / pacedGc["same-promises JS DO"].gc_full_per_1k;

const backlogSummary = {};
for (const t of backlogTargets) {
  const r = backlogResults[t.name];
  const m = (phase, k) => median(r.map((x) => x[phase][k]));
  const events = r.reduce((n, x) => n + x.events, 0);
  backlogSummary[t.name] = {
    empty: { per_sec: m("empty", "per_sec"), p50_ms: m("empty", "p50_ms"), p99_ms: m("empty", "p99_ms") },
    held: { per_sec: m("held", "per_sec"), p50_ms: m("held", "p50_ms"), p99_ms: m("held", "p99_ms") },
    rows_per_event: r.reduce((n, x) => n + x.counters.sql, 0) / events,
    errors: r.reduce((n, x) => n + x.empty.errors + x.held.errors, 0),
  };
}
const bl = backlogSummary["lull-edge"];
const bj = backlogSummary["plain JS DO"];
ratios.backlog_held_vs_empty = bl.held.per_sec / bl.empty.per_sec;
ratios.backlog_p99_held_vs_empty = bl.held.p99_ms / bl.empty.p99_ms;
ratios.backlog_held_vs_js = bl.held.per_sec / bj.held.per_sec;

/** The installed versions of `names` (this directory's node_modules), for the run's record. */
function versions(names) {
  const version = (name) => {
    try {
      return JSON.parse(readFileSync(join(import.meta.dirname, "node_modules", name, "package.json"), "utf8")).version;
    } catch {
      return null;
    }
  };
  return Object.fromEntries(names.map((name) => [name, version(name)]));
}

const f = (x, d = 0) => (x === null || x === undefined ? "-" : x.toFixed(d));
/** A summary's collections per 1,000 events: young / full (the pauses' ms; the longest pause). */
const gcFigure = (g) => `${f(g.gc_minor_per_1k, 1)} / ${f(g.gc_full_per_1k, 2)} (${f(g.gc_ms_per_1k, 1)} ms; ${f(g.gc_longest_ms, 1)} ms)`;
console.log(
  `\nlull-edge on local workerd (Miniflare), ${CONCURRENCY} keep-alive clients, ${ROUNDS} interleaved rounds (median);` +
    ` wait ${WAIT} ms, max_wait ${MAX_WAIT} ms, payload all;` +
    (workerdPid
      ? ` each turn after the runtime was calm for ${CALM_SECONDS} s (waits ${calmWaits.map((ms) => (ms / 1000).toFixed(0)).join(", ")} s)`
      : ` workerd's CPU unreadable: each turn after ${CALM_MAX_MS / 1000} s`),
);
console.log(
  ["", "1 key ev/s", "p50 ms", "p99 ms", "1k keys ev/s", "p50 ms", "p99 ms", "rows/ev", "accept rows/ev", "alarms/ev", "obj req/ev", "$/M events", "late p50", "late p99", "sat. p99", "errors"]
    .map((h, i) => (i === 0 ? h.padEnd(24) : h.padStart(i === 8 ? 15 : 13)))
    .join(""),
);
for (const t of targets) {
  const s = summary[t.name];
  const cells = [
    f(s.hot.per_sec), f(s.hot.p50_ms, 1), f(s.hot.p99_ms, 1),
    f(s.spread.per_sec), f(s.spread.p50_ms, 1), f(s.spread.p99_ms, 1),
    f(s.rows_per_event, 3), f(s.accept_rows_per_event, 3), f(s.alarms_per_event, 3),
    f(s.object_requests_per_event, 3), f(s.cost_per_million, 2), f(s.lateness?.p50_ms, 0), f(s.lateness?.p99_ms, 0), f(s.lateness_saturated?.p99_ms, 0), String(s.errors),
  ];
  console.log(t.name.padEnd(24) + cells.map((c, i) => c.padStart(i === 7 ? 15 : 13)).join(""));
}
console.log(
  `client token / ingest token = ${f(ratios.client_vs_ingest_hot, 2)}x (1 key), ${f(ratios.client_vs_ingest_spread, 2)}x (1,000 keys)`,
);
console.log(
  `late: fire lateness (delivered - due, ms) with one event per key every ${PACE_MS} ms; sat.: under the load phases above`,
);
console.log(
  `1,000 keys alone, per window delivered (events/window, rows, alarms set): ` +
    targets
      .filter((t) => t.path)
      .map((t) => {
        const s = summary[t.name];
        return `${t.name} ${f(s.spread_events_per_window, 2)} / ${f(s.spread_rows_per_window, 2)} / ${f(s.spread_alarms_per_window, 2)}`;
      })
      .join(", "),
);
console.log(
  `1,000 known keys (the same keys again once their windows were delivered, their objects in memory), ev/s / p50 / p99 ms: ` +
    targets.map((t) => `${t.name} ${f(summary[t.name].known.per_sec)} / ${f(summary[t.name].known.p50_ms, 1)} / ${f(summary[t.name].known.p99_ms, 1)}`).join(", "),
);
console.log(
  `CPU per event (workerd's, µs, from a load's start until its windows were delivered), 1 key / 1,000 keys / 1,000 known keys: ` +
    targets.map((t) => `${t.name} ${["hot", "spread", "known"].map((k) => f(summary[t.name][k].cpu_us_per_event)).join(" / ")}`).join(", "),
);
console.log(
  `ratios: lull-edge / same-promises JS object = ${f(ratios.hot_vs_promises, 2)}x (1 key), ${f(ratios.spread_vs_promises, 2)}x (1,000 keys),` +
    ` ${f(ratios.known_vs_promises, 2)}x (1,000 known keys); CPU per event ${f(ratios.cpu_hot_vs_promises, 2)}x / ${f(ratios.cpu_spread_vs_promises, 2)}x / ${f(ratios.cpu_known_vs_promises, 2)}x`,
);
{
  const perRound = (x) => (x ? `${f(x.median, 2)}x (${f(x.min, 2)}-${f(x.max, 2)})` : "-");
  const pr = ratios.per_round_vs_promises;
  console.log(
    `round by round, lull-edge / same-promises JS object in the same round, median (lowest-highest), 1 key / 1,000 keys / 1,000 known keys: ` +
      `events/s ${["hot", "spread", "known"].map((p) => perRound(pr[p].per_sec)).join(" / ")}; CPU per event ${["hot", "spread", "known"].map((p) => perRound(pr[p].cpu_us_per_event)).join(" / ")}`,
  );
}
console.log(
  `collections per 1,000 events (workerd's V8 --trace-gc, each isolate's heap at most ${TRACED_HEAP_MB} MB), young / full (pauses ms; longest), 1 key | 1,000 keys | 1,000 known keys: ` +
    targets
      .map((t) => `${t.name} ${["hot", "spread", "known"].map((k) => gcFigure(summary[t.name][k])).join(" | ")}`)
      .join(", "),
);
if (BEFORE) {
  const before = (p) => ({ per_sec: vs("lull-edge before", p), cpu_us_per_event: vs("lull-edge before", p, "cpu_us_per_event") });
  ratios.vs_before = Object.fromEntries(["hot", "spread", "known"].map((p) => [p, before(p)]));
  console.log(
    `ratios: lull-edge / lull-edge before (${BEFORE}) = ` +
      ["hot", "spread", "known"].map((p) => `${f(ratios.vs_before[p].per_sec, 2)}x events/s, ${f(ratios.vs_before[p].cpu_us_per_event, 2)}x CPU (${p})`).join("; "),
  );
}
console.log(
  `ratios: lull-edge / JS object = ${f(ratios.hot_vs_js, 2)}x (1 key), ${f(ratios.spread_vs_js, 2)}x (1,000 keys),` +
    ` ${f(ratios.known_vs_js, 2)}x (1,000 known keys);` +
    ` lull-edge / no-op ceiling = ${f(ratios.hot_vs_noop, 2)}x (1 key), ${f(ratios.spread_vs_noop, 2)}x (1,000 keys),` +
    ` ${f(ratios.known_vs_noop, 2)}x (1,000 known keys)`,
);
console.log(
  `cost per million events (requests $${PRICE.request}/M each, Worker's and object's; rows and setAlarm $${PRICE.row}/M): ` +
    targets.filter((t) => t.path).map((t) => `${t.name} $${f(summary[t.name].cost_per_million, 2)}`).join(", "),
);
console.log(
  `\nhot key in batches: one key, ${BATCH} events per events:batch request, ${CONCURRENCY} producers, ${HOT_BATCH_EVENTS} events a round`,
);
console.log(
  ["", "ev/s", "req p50 ms", "req p99 ms", "rows/ev", "alarms/ev", "obj req/ev", "$/M events", "errors"]
    .map((h, i) => (i === 0 ? h.padEnd(24) : h.padStart(13)))
    .join(""),
);
console.log(
  `lull-edge, batches of ${BATCH}`.padEnd(24) +
    [
      f(hotBatchSummary.per_sec), f(hotBatchSummary.p50_ms, 1), f(hotBatchSummary.p99_ms, 1), f(hotBatchSummary.rows_per_event, 3),
      f(hotBatchSummary.alarms_per_event, 3), f(hotBatchSummary.object_requests_per_event, 3),
      f(hotBatchSummary.cost_per_million, 2), String(hotBatchSummary.errors),
    ].map((c) => c.padStart(13)).join(""),
);
console.log(
  `one hot key by producers (lull-edge; single events with coalescing (the default), without it` +
    ` (a topic with coalesce: false), and batches of ${BATCH}; request latency; lost: accepted events not in exactly one delivered window):`,
);
for (const [phase, runs] of Object.entries(hotKeyPhases)) {
  const m = (k) => median(runs.map((x) => x[k]));
  const errors = runs.reduce((n, x) => n + x.errors, 0);
  const per = (k) => runs.reduce((n, x) => n + x[k], 0) / runs.reduce((n, x) => n + x.events, 0);
  const perEvent = { rows_per_event: per("sql"), alarms_per_event: per("alarms"), object_requests_per_event: per("objects") };
  const dollars = cost(phase.startsWith("batch") ? 1 / BATCH : 1, perEvent);
  const offered =
    runs[0]?.offered_per_sec === undefined
      ? ""
      : ` (offered ${f(m("offered_per_sec"))}; sent late by p99 ${f(m("lag_p99_ms"), 1)} ms, max ${f(m("lag_max_ms"), 1)} ms,` +
        ` every ${f(m("period_ms"))} ms; the first ${f(m("warmup_ms"))} ms, not counted: p99 ${f(m("warmup_p99_ms"), 1)} ms)`;
  const lostEvents = runs.some((x) => x.lost !== undefined) ? String(runs.reduce((n, x) => n + (x.lost ?? 0), 0)) : "-";
  console.log(
    `  ${phase.padEnd(34)} ${f(m("per_sec")).padStart(8)} ev/s${offered}   p50 ${f(m("p50_ms"), 1).padStart(7)} ms` +
      `   p99 ${f(m("p99_ms"), 1).padStart(7)} ms   rows/ev ${f(perEvent.rows_per_event, 3)}` +
      `   obj req/ev ${f(perEvent.object_requests_per_event, 3)}   alarms/ev ${f(perEvent.alarms_per_event, 3)}` +
      `   $${f(dollars, 2)}/M   errors ${errors}   lost ${lostEvents}`,
  );
}
console.log(
  `ratio: single events with coalescing / the no-op object's single-request rate = ` +
    PRODUCERS.map((n) => `${f(ratios[`hot_coalesced_vs_noop_single_${n}`], 2)}x (${n} producers)`).join(", ") +
    `; / without coalescing = ` +
    PRODUCERS.map((n) => `${f(ratios[`hot_coalesced_vs_off_${n}`], 2)}x (${n})`).join(", ") +
    ` (goal: at least 5x the no-op object, accept p99 at most 50 ms at 256 producers)`,
);
console.log(
  `ratio: batches of ${BATCH} / the no-op object's single-request rate = ${f(ratios.hot_batch_vs_noop_single, 2)}x` +
    ` (${CONCURRENCY} producers), ${f(ratios[`hot_batch_vs_noop_single_${Math.max(...PRODUCERS)}`], 2)}x (${Math.max(...PRODUCERS)}, closed loop);` +
    ` paced at ${PACED_VS_NOOP}x for ${PACED_MS / 1000} s after ${PACED_WARMUP_MS / 1000} s of warm-up: ${f(ratios.hot_paced_vs_noop_single, 2)}x achieved (goal: at least 5x);` +
    ` the no-op object's rate: one key, ${CONCURRENCY} producers, one event a request`,
);
console.log(
  `paced at ${PACED_VS_NOOP}x, ${Math.max(...PRODUCERS)} producers, accept p99 (goal: at most 50 ms): ` +
    Object.entries(pacedP99).map(([name, p99]) => `${name} ${f(p99, 1)} ms`).join(", ") +
    ` (max_batch 10,000: windows as large as the plain JS object's, which has no cap);` +
    ` lull-edge at most the same-promises object's in ${ratios.hot_paced_p99_rounds_at_most_promises} of ${ROUNDS} rounds`,
);
console.log(
  `paced, collections per 1,000 events, young / full (pauses ms; longest) (goal: lull-edge's full ones at most the same-promises object's): ` +
    Object.entries(pacedGc).map(([name, g]) => `${name} ${gcFigure(g)}`).join(", "),
);
console.log(
  `\nbacklog: one key, target down; ${BACKLOG_MEASURED} events with 0 held, then with ${BACKLOG} held` +
    ` (lull-edge: windows of 1 event queued behind a failed run; JS: undelivered event rows)`,
);
console.log(
  ["", "0 held ev/s", "p50 ms", "p99 ms", `${BACKLOG} held ev/s`, "p50 ms", "p99 ms", "rows/ev", "errors"]
    .map((h, i) => (i === 0 ? h.padEnd(12) : h.padStart(i === 4 ? 17 : 13)))
    .join(""),
);
for (const t of backlogTargets) {
  const s = backlogSummary[t.name];
  const cells = [
    f(s.empty.per_sec), f(s.empty.p50_ms, 1), f(s.empty.p99_ms, 1),
    f(s.held.per_sec), f(s.held.p50_ms, 1), f(s.held.p99_ms, 1), f(s.rows_per_event, 3), String(s.errors),
  ];
  console.log(t.name.padEnd(12) + cells.map((c, i) => c.padStart(i === 3 ? 17 : 13)).join(""));
}
console.log(
  `ratios: lull-edge with ${BACKLOG} held / with 0 = ${f(ratios.backlog_held_vs_empty, 2)}x events/s,` +
    ` ${f(ratios.backlog_p99_held_vs_empty, 2)}x p99; lull-edge / JS object with ${BACKLOG} held = ${f(ratios.backlog_held_vs_js, 2)}x`,
);
mkdirSync(dirname(out), { recursive: true });
writeFileSync(
  out,
  JSON.stringify(
    {
      run: benchRun.end(versions(["miniflare", "workerd", "wrangler"])),
      config: {
        ROUNDS, CONCURRENCY, HOT_EVENTS, KEYS, SPREAD_EVENTS, WAIT, MAX_WAIT, BACKLOG, BACKLOG_MEASURED, CALM_TICKS, CALM_SECONDS, CALM_MAX_MS,
        PACED_KEYS, PACE_MS, PRODUCERS, BATCH, HOT_BATCH_EVENTS, PACED_VS_NOOP, PACED_MS, PACED_WARMUP_MS, SLOW_MS, PRICE,
        TRACED_HEAP_MB,
      },
      calm_waits_ms: calmWaits.map(Math.round),
      summary,
      hot_batch: { batch: BATCH, events_per_round: HOT_BATCH_EVENTS, ...hotBatchSummary, rounds: hotBatch },
      hot_key_by_producers: hotKeyPhases,
      backlog: backlogSummary,
      ratios,
      rounds: results,
      backlog_rounds: backlogResults,
    },
    null,
    2,
  ),
);
console.log(`wrote ${out}`);
await mf.dispose();
agent.destroy();
await rx.close();
state.cleanup();
