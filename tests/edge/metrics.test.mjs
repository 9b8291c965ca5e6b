// GET /v1/metrics on local workerd: every topic's counters in Prometheus'
// text format, read with a Prometheus text parser, against what the test did
// and what the receiver's own log shows; admin only. An isolate hands its sums
// over at most every 10 s, with the next request or alarm of the topic: the
// test waits past the period and sends one more event to have them handed over.
import { test } from "node:test";
import assert from "node:assert/strict";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { client, sleep, startEdge, startReceiver, stateDir, until, TOKENS } from "./harness.mjs";

/** An isolate hands its sums to a topic's object at most this often (`metrics::TALLY_FLUSH_MS`). */
const TALLY_FLUSH_MS = 10_000;

/** The value of `name` whose labels include `labels`, 0 if there is none. */
function valueOf(families, name, labels) {
  const family = families.find((f) => f.name === name);
  const metric = family?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return metric ? Number(metric.value) : 0;
}

test("GET /v1/metrics: accepted and refused events, fires, attempts by outcome and the target's state, as counted", { timeout: 120_000 }, async () => {
  const receiver = await startReceiver((d) => (d.body.key.startsWith("bad") ? 500 : 200));
  const state = stateDir();
  const topics = {
    m: { target: `${receiver.url}/m`, wait_ms: 50, retry: { max_attempts: 2, base_ms: 50, cap_ms: 50 } },
    quiet: { target: `${receiver.url}/q`, wait_ms: 50 },
  };
  const edge = await startEdge({ topics, persist: state.dir });
  try {
    const api = client(edge.url);
    const anonymous = await fetch(`${edge.url}/v1/metrics`);
    assert.equal(anonymous.status, 401);
    assert.equal((await client(edge.url, TOKENS.ingest).call("GET", "/v1/metrics")).status, 403, "a producer may not read them");

    const send = async (key, n) => assert.equal((await api.event("m", key, { n })).status, 202);
    // Phase 1: three good keys, one whose target refuses (two attempts, then a dead letter), two refusals.
    for (const key of ["a", "b", "c", "bad"]) await send(key, 1);
    assert.equal((await api.event("m", "a", "{ not json")).status, 400);
    assert.equal((await client(edge.url, "wrong-token-0123456789abcdef").event("m", "a", { n: 2 })).status, 401);
    await until(async () => receiver.deliveries.length >= 5, 30_000, "four windows, the refused one twice");
    await until(async () => (await api.status("m", "bad")).json.dead_letter_count === 1, 15_000, "the dead letter");
    // Phase 2, past the hand-over period: one more event and refusal, whose alarm and request hand over every sum.
    await sleep(TALLY_FLUSH_MS + 500);
    await send("c", 2);
    assert.equal((await api.event("m", "c", "{ not json")).status, 400);
    await until(async () => receiver.deliveries.length >= 6, 15_000, "the last window");
    // Phase 3, past the period again: one more event, whose request hands over what came since.
    await sleep(TALLY_FLUSH_MS + 500);
    await send("z", 1);

    const families = await until(async () => {
      const res = await api.call("GET", "/v1/metrics");
      assert.equal(res.status, 200, res.text);
      assert.match(res.headers.get("content-type"), /^text\/plain; version=0\.0\.4/);
      const families = parsePrometheusTextFormat(res.text);
      until.last = res.text;
      return valueOf(families, "lull_events_accepted_total", { topic: "m" }) >= 6 && families;
    }, 15_000, "the counts handed over");
    const value = (name, labels = {}) => valueOf(families, name, { topic: "m", ...labels });
    // What the receiver's log shows.
    const ok = receiver.deliveries.filter((d) => d.status === 200).length;
    const refused = receiver.deliveries.filter((d) => d.status === 500).length;
    assert.ok(ok >= 4, `${ok} delivered`);
    assert.equal(refused, 2);
    assert.equal(value("lull_events_accepted_total"), 6);
    assert.equal(value("lull_events_refused_total", { code: "malformed_json" }), 2);
    assert.equal(value("lull_events_refused_total", { code: "unauthorized" }), 1);
    assert.equal(value("lull_windows_fired_total", { reason: "quiet" }), 5);
    assert.equal(value("lull_delivery_attempts_total", { outcome: "2xx" }), 4, "z's delivery comes after its hand-over");
    assert.equal(value("lull_delivery_attempts_total", { outcome: "5xx" }), refused);
    assert.equal(value("lull_dead_letters_total"), 1);
    assert.equal(value("lull_target_state", { state: "active" }), 1);
    assert.equal(value("lull_target_state", { state: "paused" }), 0);
    // A topic with nothing yet is listed at 0, not left out.
    assert.equal(valueOf(families, "lull_events_accepted_total", { topic: "quiet" }), 0);
    assert.ok(families.find((f) => f.name === "lull_events_accepted_total").metrics.some((m) => m.labels.topic === "quiet"));
    for (const f of families) assert.ok(["COUNTER", "GAUGE"].includes(f.type), `${f.name}: ${f.type}`);
  } finally {
    await edge.stop();
    await receiver.close();
    state.cleanup();
  }
});
