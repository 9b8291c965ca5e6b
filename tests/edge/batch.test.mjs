// POST /v1/topics/{topic}/events:batch: many keys' events in one request.
// Each key's events go to its object in one request and one transaction (all
// or nothing per key); the answer is per event, in the batch's order; a bad
// event is refused by its place and nothing of the batch is stored.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, client, until, TOKENS } from "./harness.mjs";

let edge, rx, api;
const failing = new Set(["jam"]);

before(async () => {
  rx = await startReceiver((d) => (failing.has(d.body.key) ? 500 : 200));
  const target = `${rx.url}/hook`;
  edge = await startEdge({
    vars: { LULL_CLIENT_TOKEN_SECRET: "a-client-token-secret-for-the-batch-tests-0123456789" },
    topics: {
      t: { target, wait_ms: 60_000, payload: "all", client_tokens: true },
      // One event a window, one pending window, and a retry a minute away (no jitter): a jam.
      jam: {
        target,
        wait_ms: 60_000,
        payload: "all",
        max_batch: 1,
        max_pending_windows: 1,
        retry: { max_attempts: 5, base_ms: 60_000, cap_ms: 60_000, jitter: "none" },
      },
    },
  });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
});

const batch = (topic, events, token) =>
  (token ? client(edge.url, token) : api).call("POST", `/v1/topics/${topic}/events:batch`, { events });

test("events are grouped by key, answered in the batch's order, and delivered per key in order", async () => {
  const keys = ["a", "b", "a", "c", "b", "a"];
  const res = await batch("t", keys.map((key, n) => ({ key, event: { n } })));
  assert.equal(res.status, 207, JSON.stringify(res.json));
  assert.deepEqual(
    res.json.results.map((r) => [r.status, r.seq]),
    [[202, 1], [202, 1], [202, 2], [202, 1], [202, 2], [202, 3]],
  );
  for (const key of ["a", "b", "c"]) assert.equal((await api.flush("t", key)).status, 200);
  await rx.waitFor(3, 10_000);
  const events = (key) => rx.of(key).flatMap((d) => d.body.events.map((e) => e.n));
  assert.deepEqual([events("a"), events("b"), events("c")], [[0, 2, 5], [1, 4], [3]]);
});

test("a key's events of one batch share one row; delivered, it is overwritten by the next batch's", async () => {
  const send = (from) =>
    batch("t", Array.from({ length: 20 }, (_, i) => ({ key: "shared", event: { n: from + i, pad: "x".repeat(i * 50) } })));
  const sent = [];
  for (const from of [0, 20, 40]) {
    const res = await send(from);
    assert.equal(res.status, 207, JSON.stringify(res.json));
    assert.ok(res.json.results.every((r) => r.status === 202), JSON.stringify(res.json));
    sent.push(...res.json.results.map((r) => r.seq));
  }
  assert.deepEqual(sent, Array.from({ length: 60 }, (_, i) => i + 1), "each event its own seq");
  const held = (await api.status("t", "shared")).json;
  assert.equal(held.event_rows, 3, "one row per batch (SQLite's count)");
  assert.equal(held.io.accept_rows_written, 3 + 1, "3 rows, and the key's first snapshot (SQLite's count)");
  assert.equal((await api.flush("t", "shared")).status, 200);
  await rx.waitFor(1, 10_000, "shared");
  const delivered = rx.of("shared").flatMap((d) => d.body.events);
  assert.deepEqual(delivered.map((e) => e.n), Array.from({ length: 60 }, (_, i) => i), "every event, once, in order");
  assert.ok(delivered.every((e, i) => e.pad === "x".repeat((i % 20) * 50)), "each body whole");
  await until(async () => (await api.status("t", "shared")).json.state === "idle", 10_000, "delivered");
  const res = await send(60);
  assert.ok(res.json.results.every((r) => r.status === 202));
  assert.equal((await api.status("t", "shared")).json.event_rows, 3, "the next batch overwrote a free row");
});

test("all or nothing per key: a key whose second event is refused stores neither; other keys are stored", async () => {
  assert.equal((await api.event("jam", "jam", { n: 0 })).status, 202); // fires, fails, retries in a minute
  await until(async () => (await api.status("jam", "jam")).json.run?.retry_at, 10_000, "the run waits to retry");
  const before = (await api.status("jam", "jam")).json;
  // The first jam event makes a window queued behind the run (the bound: 1); the second is refused.
  const res = await batch("jam", [
    { key: "jam", event: { n: 1 } },
    { key: "free", event: { n: 2 } },
    { key: "jam", event: { n: 3 } },
  ]);
  assert.equal(res.status, 207, JSON.stringify(res.json));
  assert.deepEqual(res.json.results.map((r) => [r.status, r.error?.code ?? "ok"]), [
    [429, "too_many_pending"],
    [202, "ok"],
    [429, "too_many_pending"],
  ]);
  const after = (await api.status("jam", "jam")).json;
  assert.equal(after.stats.events, before.stats.events, "neither jam event was stored");
  assert.equal(after.event_rows, before.event_rows, "no row for them (SQLite's count)");
  assert.equal(after.queued_count, 0);
  assert.equal((await api.status("jam", "free")).json.stats.events, 1);
});

test("a producer's idempotency key inside a batch stores its event once", async () => {
  const res = await batch("t", [
    { key: "p", event: { n: 1 }, idempotency_key: "order-1" },
    { key: "p", event: { n: 1 }, idempotency_key: "order-1" },
    { key: "p", event: { n: 2 }, idempotency_key: "order-2" },
  ]);
  assert.equal(res.status, 207);
  const [first, again, other] = res.json.results;
  assert.deepEqual(again, first, "the repeat gets the first answer");
  assert.notEqual(other.seq, first.seq);
  const s = (await api.status("t", "p")).json;
  assert.equal(s.stats.events, 2);
  const retried = await batch("t", [{ key: "p", event: { n: 1 }, idempotency_key: "order-1" }]);
  assert.deepEqual(retried.json.results[0], first, "and a later batch's repeat too");
});

test("bad input is refused by its place, and nothing of the batch is stored", async () => {
  const cases = [
    [[{ key: "x1", event: 1 }, { key: "x1", event: 2 }, { key: "", event: 3 }], 400, "invalid_key", "events[2]"],
    [[{ key: "x1", event: 1 }, { key: "x1", event: 2, topic: "other" }], 400, "bad_request", "events[1]"],
    [[{ key: "x1", event: 1, idempotency_key: "has space" }], 400, "invalid_idempotency_key", "events[0]"],
    [[{ key: "x1", event: "x".repeat(70_000) }], 413, "payload_too_large", "events[0]"],
    [Array.from({ length: 1_001 }, (_, n) => ({ key: "x1", event: n })), 413, "too_many_items", "1000"],
    [[], 400, "bad_request", "no event"],
  ];
  for (const [events, status, code, names] of cases) {
    const res = await batch("t", events);
    assert.equal(res.status, status, JSON.stringify(res.json).slice(0, 300));
    assert.equal(res.json.error.code, code);
    assert.ok(res.json.error.message.includes(names), res.json.error.message);
  }
  // Over 4 MiB, streamed (no Content-Length to refuse it by): refused once read.
  const body = new TextEncoder().encode(`{"events": ["${"x".repeat(4 * 1024 * 1024)}"]}`);
  const stream = new ReadableStream({ start: (c) => (c.enqueue(body), c.close()) });
  const headers = { authorization: `Bearer ${TOKENS.admin}`, "content-type": "application/json" };
  const res = await fetch(`${edge.url}/v1/topics/t/events:batch`, { method: "POST", headers, body: stream, duplex: "half" });
  const huge = res.status;
  assert.equal((await res.json()).error.code, "payload_too_large");
  assert.equal(huge, 413);
  const at = await batch("t", Array.from({ length: 1_000 }, (_, n) => ({ key: `many-${n % 10}`, event: n })));
  assert.equal(at.status, 207, "1,000 events, the bound, are accepted");
  assert.equal(at.json.results.filter((r) => r.status === 202).length, 1_000);
  assert.equal((await api.status("t", "x1")).json.stats.events, 0, "nothing of the refused batches was stored");
});

test("a client token posts a batch only for the keys it covers", async () => {
  const minted = await api.call("POST", "/v1/topics/t/client-tokens", { key_prefix: "doc-" });
  assert.equal(minted.status, 201, JSON.stringify(minted.json));
  const token = minted.json.token;
  const ok = await batch("t", [{ key: "doc-1", event: 1 }, { key: "doc-2", event: 2 }], token);
  assert.equal(ok.status, 207);
  const refused = await batch("t", [{ key: "doc-3", event: 1 }, { key: "other", event: 2 }], token);
  assert.equal(refused.status, 403);
  assert.ok(refused.json.error.message.startsWith("events[1]"), refused.json.error.message);
  assert.equal((await api.status("t", "doc-3")).json.stats.events, 0, "nothing stored");
  const anonymous = await client(edge.url, "").call("POST", "/v1/topics/t/events:batch", { events: [{ key: "k", event: 1 }] });
  assert.equal(anonymous.status, 401);
  const wrongTopic = await batch("jam", [{ key: "doc-1", event: 1 }], token);
  assert.equal(wrongTopic.status, 401, "jam accepts no client token: a token of topic t posts nothing to it");
});
