// Load levelling, measured: a burst of 10,000 events over 1,000 keys whose
// windows all fire together (each key flushed at once after the events are
// in), delivered to a receiver that takes 20 ms per call: by webhook (each
// key's object POSTs as its window fires) and through the queue with
// forward_concurrency 1 and 4. Per shape: downstream calls, their peak
// concurrency (as the receiver counted), and the time from the flushes to the
// last window delivered; for the queue shapes, the requests the topic's gate
// object served per forward (its own count, from the queue status). Then the
// gate's waiting protocol alone: 40 messages waiting at forward_concurrency 1
// (goal: at most 3 gate requests per forward). Then a receiver that throttles:
// 200 keys' windows at a receiver answering `429 Retry-After: 2` for its first
// 5 s, lull-edge against the release before it honoured Retry-After
// (LULL_BASELINE_BUILD, which `cargo xtask bench` builds) and the plain JS
// object (fixtures/js-debounce.mjs, which retries each key's window every
// second: a peer that ignores Retry-After) —
// the requests the receiver sees while it throttles, and in all. The webhook
// shape also reports what the healthy path costs the topic's object: its
// requests per delivery (the copy of the target's state, the metric sums).
// Usage: node bench-queues.mjs OUT.json (LULL_BENCH_ONLY=gate or throttle: that run only)
import { writeFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { client, jsObjectWorker, runtimeOptions, startEdge, startReceiver, stateDir, TOKENS } from "./harness.mjs";
import { startRun } from "../bench-run.mjs";

const out = process.argv[2] ?? "queues.json";
const benchRun = startRun();
const EVENTS = 10_000;
const KEYS = 1_000;
const SENDERS = 32;
const RECEIVER_MS = 20;

async function shape(name, delivery) {
  let inFlight = 0;
  let peak = 0;
  const rx = await startReceiver(() => {
    inFlight += 1;
    peak = Math.max(peak, inFlight);
    return new Promise((ok) => setTimeout(() => (inFlight -= 1, ok(200)), RECEIVER_MS));
  });
  const state = stateDir();
  // A long quiet period: nothing fires until the flushes.
  const topics = { b: { target: `${rx.url}/b`, wait_ms: 600_000, payload: "all", ...delivery } };
  const edge = await startEdge({ topics, persist: state.dir });
  try {
    const api = client(edge.url);
    const started = Date.now();
    let next = 0;
    await Promise.all(Array.from({ length: SENDERS }, async () => {
      while (next < EVENTS) {
        const i = next++;
        const res = await api.event("b", `k${Math.floor(i / (EVENTS / KEYS))}`, { i }); // each key's events back to back: a burst
        if (res.status !== 202) throw new Error(`event ${i}: ${res.status}`);
      }
    }));
    const sent = Date.now() - started;
    // Every key's window fires now (64 flushes at a time).
    const flushed = Date.now();
    let nextKey = 0;
    await Promise.all(Array.from({ length: 64 }, async () => {
      while (nextKey < KEYS) {
        const k = nextKey++;
        const res = await api.flush("b", `k${k}`);
        if (res.status !== 200) throw new Error(`flush k${k}: ${res.status}`);
      }
    }));
    const flushMs = Date.now() - flushed;
    const events = () => rx.deliveries.reduce((n, d) => n + (d.body.events?.length ?? 0), 0);
    const deadline = Date.now() + 600_000;
    while (events() < EVENTS) {
      if (Date.now() > deadline) throw new Error(`${name}: ${events()} of ${EVENTS} events delivered`);
      await new Promise((ok) => setTimeout(ok, 100));
    }
    const last = Math.max(...rx.deliveries.map((d) => d.at));
    const gate = delivery.delivery === "queue" ? await gateRequests(api, "b", rx.deliveries.length) : await topicRequests(api, "b", rx.deliveries.length);
    return { calls: rx.deliveries.length, peak_concurrency: peak, events: events(), send_ms: sent, flush_ms: flushMs, last_delivered_ms: last - flushed, ...gate };
  } finally {
    await edge.stop();
    await rx.close();
    state.cleanup();
  }
}

/**
 * The requests `topic`'s gate object served (its own count: every operation
 * but the status calls), once the counters show `forwards` acked, per forward.
 */
async function gateRequests(api, topic, forwards) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { json } = await api.call("GET", `/v1/topics/${topic}/queue`);
    if ((json?.counters?.acked ?? 0) >= forwards || Date.now() > deadline) {
      return {
        gate_requests: json.requests_total,
        gate_requests_by_op: json.requests,
        gate_requests_per_forward: Number((json.requests_total / forwards).toFixed(2)),
        requeued: json.counters.requeued ?? 0,
      };
    }
    await new Promise((ok) => setTimeout(ok, 200));
  }
}

/** What a webhook topic's object served (its own count), per delivery: the healthy path's cost. */
async function topicRequests(api, topic, deliveries) {
  const { json } = await api.call("GET", `/v1/topics/${topic}`);
  const total = Object.values(json.requests).reduce((n, r) => n + r, 0);
  return { topic_requests: total, topic_requests_by_op: json.requests, topic_requests_per_delivery: Number((total / deliveries).toFixed(4)) };
}

/** The peers of the throttling receiver's row besides lull-edge at this tree. */
const BASELINE_PEER = "lull-edge before";
const JS_PEER = "plain JS DO";
/** The worker-build output of the release before lull-edge honoured Retry-After (`cargo xtask bench` builds it and names it). */
const baseline = process.env.LULL_BASELINE_BUILD;

const THROTTLE_KEYS = 200;
const THROTTLE_MS = 5_000;
/**
 * `THROTTLE_KEYS` keys' windows fired together at a receiver answering `429
 * Retry-After: 2` for its first `THROTTLE_MS`: `who` is lull-edge, the
 * release before it honoured `Retry-After` (`BASELINE_PEER`) or the plain JS
 * object (`JS_PEER`). The receiver's requests while it throttles, in all, and
 * until every window was delivered.
 */
async function throttled(who) {
  let throttleUntil = Infinity;
  const rx = await startReceiver(() => (Date.now() < throttleUntil ? { status: 429, headers: { "retry-after": "2" } } : 200));
  const state = stateDir();
  let stop;
  let api;
  if (who !== JS_PEER) {
    const build = who === BASELINE_PEER ? baseline : undefined;
    const edge = await startEdge({ topics: { t: { target: `${rx.url}/t`, wait_ms: 50 } }, persist: state.dir, build });
    stop = () => edge.stop();
    api = client(edge.url);
  } else {
    const mf = new Miniflare(convertV4MiniflareOptions({
      ...runtimeOptions(state.dir),
      ...jsObjectWorker("plain", `${rx.url}/t`, { WAIT_MS: "50", MAX_WAIT_MS: "1000" }),
    }));
    const url = (await mf.ready).toString().replace(/\/$/, "");
    stop = () => mf.dispose();
    api = client(url, TOKENS.ingest);
  }
  try {
    throttleUntil = Date.now() + THROTTLE_MS;
    const started = Date.now();
    await Promise.all(Array.from({ length: THROTTLE_KEYS }, async (_, i) => {
      const res = await api.event("t", `k${i}`, { i });
      if (res.status >= 300) throw new Error(`${who}: event ${i}: ${res.status}`);
    }));
    const delivered = () => new Set(rx.deliveries.filter((d) => d.status === 200).map((d) => d.body.key)).size;
    const deadline = Date.now() + 120_000;
    while (delivered() < THROTTLE_KEYS && Date.now() < deadline) await new Promise((ok) => setTimeout(ok, 100));
    const whileThrottled = rx.deliveries.filter((d) => d.at < throttleUntil).length;
    const firstThrottle = rx.deliveries.find((d) => d.status === 429)?.at ?? started;
    const afterLearning = rx.deliveries.filter((d) => d.at >= firstThrottle + 500 && d.at < throttleUntil).length;
    const attempts = rx.deliveries.map((d) => d.attempt).filter(Number.isFinite);
    return {
      requests_while_throttled: whileThrottled,
      requests_after_the_first_half_second: afterLearning,
      requests: rx.deliveries.length,
      delivered: delivered(),
      all_delivered_ms: Math.max(...rx.deliveries.map((d) => d.at)) - started,
      // Lull-Attempt's largest (the JS object sends none): a throttle spends no attempt.
      max_attempt: attempts.length ? Math.max(...attempts) : null,
    };
  } finally {
    await stop();
    await rx.close();
    state.cleanup();
  }
}

/** 40 messages waiting at once for a topic at forward_concurrency 1: the gate's requests per forward. */
async function waiting(n = 40) {
  const rx = await startReceiver(() => new Promise((ok) => setTimeout(() => ok(200), RECEIVER_MS)));
  const state = stateDir();
  const topics = { w: { target: `${rx.url}/w`, wait_ms: 600_000, delivery: "queue", forward_concurrency: 1 } };
  const edge = await startEdge({ topics, persist: state.dir });
  try {
    const api = client(edge.url);
    for (let i = 0; i < n; i++) if ((await api.event("w", `k${i}`, { i })).status !== 202) throw new Error(`event ${i}`);
    const flushed = Date.now();
    await Promise.all(Array.from({ length: n }, (_, i) => api.flush("w", `k${i}`)));
    await rx.waitFor(n, 120_000);
    const gate = await gateRequests(api, "w", n);
    return { messages: n, calls: rx.deliveries.length, last_delivered_ms: Math.max(...rx.deliveries.map((d) => d.at)) - flushed, ...gate };
  } finally {
    await edge.stop();
    await rx.close();
    state.cleanup();
  }
}

const only = process.env.LULL_BENCH_ONLY;
if (only !== "gate" && !baseline) throw new Error("LULL_BASELINE_BUILD: the previous release's worker-build output (cargo xtask bench builds it)");
const results = only === "gate" || only === "throttle" ? {} : {
  webhook: await shape("webhook", {}),
  "queue, forward_concurrency 1": await shape("queue 1", { delivery: "queue", forward_concurrency: 1 }),
  "queue, forward_concurrency 4": await shape("queue 4", { delivery: "queue", forward_concurrency: 4 }),
};
if (!only) {
  console.log(`\nload levelling: ${EVENTS} events over ${KEYS} keys, every window fired at once (flush); receiver ${RECEIVER_MS} ms per call`);
  console.log("shape".padEnd(32) + ["calls", "peak in flight", "events", "flushes ms", "last delivered ms", "gate req/forward"].map((h) => h.padStart(18)).join(""));
  for (const [name, r] of Object.entries(results)) {
    const cells = [r.calls, r.peak_concurrency, r.events, r.flush_ms, r.last_delivered_ms, r.gate_requests_per_forward ?? "-"];
    console.log(name.padEnd(32) + cells.map((v) => String(v).padStart(18)).join(""));
  }
  console.log("(last delivered: from the first flush to the last window at the receiver; gate req/forward: requests the topic's gate object served, by its own count, per forward)");
}
const gate = only === "throttle" ? {} : await waiting();
if (only !== "throttle") {
  console.log(`\nthe gate's waiting protocol: ${gate.messages} messages waiting at forward_concurrency 1, receiver ${RECEIVER_MS} ms per call`);
  console.log(["forwards", "gate requests", "per forward", "requeued", "last delivered ms"].map((h) => h.padStart(18)).join(""));
  console.log([gate.calls, gate.gate_requests, gate.gate_requests_per_forward, gate.requeued, gate.last_delivered_ms].map((v) => String(v).padStart(18)).join(""));
  console.log(`(by operation: ${JSON.stringify(gate.gate_requests_by_op)}; goal: at most 3 per forward)`);
}
const throttle = {};
if (only !== "gate") for (const who of ["lull-edge", BASELINE_PEER, JS_PEER]) throttle[who] = await throttled(who);
if (only !== "gate") {
  console.log(`\na throttling receiver: ${THROTTLE_KEYS} keys' windows at once, 429 Retry-After: 2 for the first ${THROTTLE_MS / 1000} s`);
  console.log("who".padEnd(20) + ["while throttled", "after 0.5 s", "requests", "delivered", "all in ms"].map((h) => h.padStart(18)).join(""));
  for (const [who, r] of Object.entries(throttle)) {
    const cells = [r.requests_while_throttled, r.requests_after_the_first_half_second, r.requests, r.delivered, r.all_delivered_ms];
    console.log(who.padEnd(20) + cells.map((v) => String(v).padStart(18)).join(""));
  }
  const l = throttle["lull-edge"];
  for (const peer of [BASELINE_PEER, JS_PEER]) {
    const p = throttle[peer];
    console.log(`(lull-edge / ${peer}, requests while throttled: ${(l.requests_while_throttled / p.requests_while_throttled).toFixed(2)}×; after the first half second: ${l.requests_after_the_first_half_second} against ${p.requests_after_the_first_half_second})`);
  }
}
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, JSON.stringify({ run: { ...benchRun.end(), only: only ?? null }, events: EVENTS, keys: KEYS, senders: SENDERS, receiver_ms: RECEIVER_MS, results, waiting: gate, throttle: { keys: THROTTLE_KEYS, throttle_ms: THROTTLE_MS, baseline_rev: process.env.LULL_BASELINE_REV ?? null, results: throttle } }, null, 2));
console.log(`wrote ${out}`);
