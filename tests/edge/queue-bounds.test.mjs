// Nothing lost at the queue's bounds, on local workerd's Queues simulation:
// dead letters kept as rows (bodies intact), listed, replayed through the
// topic's queue and gate, discarded; a topic whose store is full refusing
// events; dead letters waiting on the dead-letter queue past its own
// retries; and Lull-Attempt counting the queue's redeliveries.
// Judged by what the receiver saw and what the API lists, polling with deadlines.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SignJWT } from "jose";
import { client, startEdge, startReceiver, stateDir, until, TOKENS } from "./harness.mjs";

/** lull-edge with `topics` (and queue consumer settings `consumers`, more `vars`); `body(api, edge)` runs the test. */
async function withEdge(topics, body, consumers = {}, vars = {}) {
  const state = stateDir();
  const edge = await startEdge({ topics, persist: state.dir, consumers, vars });
  try {
    return await body(client(edge.url), edge);
  } finally {
    await edge.stop();
    state.cleanup();
  }
}

/** Every dead letter of `topic`, page by page (following `next_after`). */
async function allDeadLetters(api, topic) {
  const rows = [];
  let after;
  for (let pages = 0; pages < 100; pages++) {
    const query = after === undefined ? "?limit=500" : `?after=${after}&limit=500`;
    const res = await api.call("GET", `/v1/topics/${topic}/queue/dead-letters${query}`);
    assert.equal(res.status, 200, JSON.stringify(res.json));
    rows.push(...res.json.dead_letters);
    if (res.json.next_after === null) return { rows, count: res.json.count, pages: pages + 1 };
    after = res.json.next_after;
  }
  throw new Error("more than 100 pages");
}

/** A receiver that measures its own peak in flight and answers `status(delivery)` after `ms`. */
async function receiver(ms, status) {
  let inFlight = 0;
  const peak = { value: 0 };
  const rx = await startReceiver((d) => {
    inFlight += 1;
    peak.value = Math.max(peak.value, inFlight);
    return new Promise((ok) => setTimeout(() => ((inFlight -= 1), ok({ status: status(d) })), ms));
  });
  return { rx, peak };
}

test("receiver down: 60 windows of ~100 KB kept as rows, listed intact, never deleted; replayed once each within the bound", { timeout: 240_000 }, async () => {
  let down = true;
  const { rx, peak } = await receiver(30, () => (down ? 500 : 200));
  const PAD = 100_000;
  try {
    const topics = {
      big: { target: `${rx.url}/big`, wait_ms: 50, delivery: "queue", forward_concurrency: 2, max_body_bytes: 120_000, retry: { max_attempts: 1 } },
    };
    await withEdge(topics, async (api, edge) => {
      for (let i = 0; i < 60; i += 10) {
        const sent = await Promise.all(Array.from({ length: 10 }, (_, j) => api.event("big", `k${i + j}`, { i: i + j, pad: "x".repeat(PAD) })));
        assert.ok(sent.every((r) => r.status === 202), JSON.stringify(sent.map((r) => r.status)));
      }
      // The consumer dead-letters each at its 4th failed forward (forward_max_attempts), then keeps it.
      const status = await until(async () => {
        const res = await api.call("GET", "/v1/topics/big/queue");
        until.last = res.json;
        return res.json?.dead_letter_count === 60 && res.json;
      }, 150_000, "60 dead letters kept");
      assert.ok(status.dead_letter_bytes > 60 * PAD, `${status.dead_letter_bytes} bytes kept`);
      assert.equal(status.counters.dead_lettered, 60, "each sent to the dead-letter queue by the consumer at its 4th failed forward");
      const failed = new Map();
      for (const d of rx.deliveries) failed.set(d.idempotencyKey, [...(failed.get(d.idempotencyKey) ?? []), d.attempt]);
      assert.equal(failed.size, 60);
      for (const [key, attempts] of failed) assert.deepEqual(attempts, [1, 2, 3, 4], `${key}: Lull-Attempt counts the queue's deliveries`);
      assert.ok(peak.value <= 2, `peak in flight ${peak.value}`);
      // Listed with bodies intact, over several pages (a page holds at most 4 MiB of bodies).
      const listed = await allDeadLetters(api, "big");
      assert.equal(listed.count, 60);
      assert.ok(listed.pages >= 2, `${listed.pages} page(s)`);
      assert.deepEqual(listed.rows.map((r) => r.body.event.i).sort((a, b) => a - b), [...Array(60).keys()]);
      assert.ok(listed.rows.every((r) => r.body.event.pad === "x".repeat(PAD) && r.body.key === `k${r.body.event.i}`));
      assert.deepEqual(new Set(listed.rows.map((r) => r.idempotency_key)), new Set(failed.keys()), "the windows that failed");
      assert.ok(listed.rows.every((r) => r.attempts === 4 && r.last_outcome === "500" && r.first_failed_at <= r.kept_at), JSON.stringify({ ...listed.rows[0], body: "…" }));
      // Still all there after the dead-letter consumer had time to run (nothing deleted, nothing dropped).
      await new Promise((ok) => setTimeout(ok, 3_000));
      assert.equal((await allDeadLetters(api, "big")).count, 60);
      assert.ok(!edge.runtime.some((l) => /Dropped message/.test(l.message)), "no message dropped by the queue");
      // The receiver recovers: replay them all, in calls of at most 100.
      down = false;
      peak.value = 0;
      const before = rx.deliveries.length;
      let remaining = 60;
      for (let calls = 0; remaining > 0 && calls < 10; calls++) {
        const res = await api.call("POST", "/v1/topics/big/queue/dead-letters/retry");
        assert.equal(res.status, 200, JSON.stringify(res.json));
        remaining = res.json.remaining;
      }
      assert.equal(remaining, 0);
      await rx.waitFor(before + 60, 120_000);
      await new Promise((ok) => setTimeout(ok, 1_500));
      const replayed = rx.deliveries.slice(before);
      assert.equal(replayed.length, 60, "each once");
      assert.deepEqual(new Set(replayed.map((d) => d.idempotencyKey)), new Set(failed.keys()), "same idempotency keys");
      assert.ok(replayed.every((d) => d.verified && d.headers["webhook-id"] === d.idempotencyKey && d.attempt === 5));
      assert.ok(replayed.every((d) => d.body.event.pad.length === PAD));
      assert.ok(peak.value <= 2, `the topic's bound held at the receiver: peak ${peak.value}`);
      assert.equal((await allDeadLetters(api, "big")).count, 0, "a row goes once its message is re-sent");
      const emptied = (await api.call("GET", "/v1/topics/big/queue")).json;
      assert.deepEqual([emptied.dead_letter_count, emptied.dead_letter_bytes], [0, 0], "the totals follow every delete");
    });
  } finally {
    await rx.close();
  }
});

test("a full store: events answer 429 and store nothing; dead letters wait on their queue past its retries; discard makes room", { timeout: 180_000 }, async () => {
  const { rx } = await receiver(5, () => 500);
  try {
    const topics = {
      tight: { target: `${rx.url}/t`, wait_ms: 50, delivery: "queue", max_queue_dead_letters: 2, retry: { max_attempts: 1 } },
    };
    // The dead-letter queue gives up after 2 deliveries: what waits there must be sent again, not retried.
    const consumers = { "lull-dead-letters": { maxRetries: 1 } };
    await withEdge(topics, async (api, edge) => {
      // Numbers JSON.parse (or serde_json's Value) would alter: they must come back as they went.
      const numbers = '"n":123456789012345678901234,"d":0.10000000000000000000000000000000000001,"e":1e400';
      for (const k of ["a", "b", "c", "d"]) assert.equal((await api.event("tight", k, `{"k":"${k}",${numbers}}`)).status, 202);
      const full = await until(async () => {
        const res = await api.call("GET", "/v1/topics/tight/queue");
        until.last = res.json;
        return res.json?.dead_letter_count === 2 && res.json.counters.requeued >= 4 && res.json;
      }, 90_000, "two kept, two waiting (each sent again more than once)");
      assert.equal(full.dead_letters_full, true);
      // New events are refused (the router's answer is at most 5 s stale) and nothing is stored.
      const refused = await until(async () => {
        const res = await api.event("tight", "late", { late: true });
        return res.status === 429 && res;
      }, 15_000, "429");
      assert.equal(refused.json.error.code, "dead_letters_full");
      assert.ok(Number(refused.headers.get("retry-after")) > 0);
      const late = await api.status("tight", "late");
      assert.equal(late.json.stats?.events ?? 0, 0, JSON.stringify(late.json));
      // Past the dead-letter queue's retries, the waiting ones are still there: discard one, one is kept.
      const kept = (await allDeadLetters(api, "tight")).rows;
      assert.equal(kept.length, 2);
      const page = await api.call("GET", "/v1/topics/tight/queue/dead-letters");
      const events = page.text.match(/"event":\{[^}]*\}/g) ?? [];
      assert.equal(events.length, 2, page.text);
      assert.ok(events.every((e) => e.endsWith(`,${numbers}}`)), `bodies listed byte for byte: ${events}`);
      const discarded = [];
      for (let round = 0; round < 2; round++) {
        const oldest = (await allDeadLetters(api, "tight")).rows[0];
        const gone = await api.call("DELETE", `/v1/topics/tight/queue/dead-letters/${oldest.id}`);
        assert.equal(gone.status, 200, JSON.stringify(gone.json));
        discarded.push(oldest.body.key);
        assert.equal((await api.call("DELETE", `/v1/topics/tight/queue/dead-letters/${oldest.id}`)).status, 404, "404 for an unknown id");
        await until(async () => (await allDeadLetters(api, "tight")).count === 2, 60_000, "a waiting dead letter kept");
      }
      // The totals the gate keeps as rows come and go agree with the rows listed.
      const rows = (await allDeadLetters(api, "tight")).rows;
      const totals = (await api.call("GET", "/v1/topics/tight/queue")).json;
      assert.deepEqual([totals.dead_letter_count, totals.dead_letter_bytes], [rows.length, rows.reduce((n, r) => n + r.bytes, 0)]);
      const last = rows.map((r) => r.body.key);
      assert.deepEqual([...discarded, ...last].sort(), ["a", "b", "c", "d"], "none deleted: each discarded or kept");
      assert.ok(!edge.runtime.some((l) => /Dropped message/.test(l.message)), "nothing dropped by the queue");
      // Room again (after one more discard): events are accepted.
      const oldest = (await allDeadLetters(api, "tight")).rows[0];
      assert.equal((await api.call("DELETE", `/v1/topics/tight/queue/dead-letters/${oldest.id}`)).status, 200);
      const accepted = await until(async () => (await api.event("tight", "again", { again: true })).status === 202, 15_000, "202");
      assert.ok(accepted);
      assert.equal((await api.call("POST", "/v1/topics/tight/queue/dead-letters/999/retry")).status, 404);
      // Ids and cursors past what storage holds (2^53 - 1) find nothing: 404s and an empty page, never a 503.
      const past = "9007199254740993";
      assert.equal((await api.call("POST", `/v1/topics/tight/queue/dead-letters/${past}/retry`)).status, 404);
      assert.equal((await api.call("DELETE", `/v1/topics/tight/queue/dead-letters/${past}`)).status, 404);
      const beyond = await api.call("GET", "/v1/topics/tight/queue/dead-letters?after=18446744073709551615");
      assert.equal(beyond.status, 200, beyond.text);
      assert.deepEqual(beyond.json.dead_letters, [], beyond.text);
    }, consumers);
  } finally {
    await rx.close();
  }
});

test("queue retries: Lull-Attempt grows 1, 2, 3 on each redelivery, under one idempotency key", { timeout: 120_000 }, async () => {
  const seen = new Map();
  const { rx } = await receiver(5, (d) => {
    const n = (seen.get(d.idempotencyKey) ?? 0) + 1;
    seen.set(d.idempotencyKey, n);
    return n < 3 ? 500 : 200;
  });
  try {
    const topics = { att: { target: `${rx.url}/a`, wait_ms: 50, delivery: "queue", forward_concurrency: 2 } };
    await withEdge(topics, async (api) => {
      await Promise.all(["x", "y", "z"].map((k) => api.event("att", k, { k })));
      await rx.waitFor(9, 60_000);
      await new Promise((ok) => setTimeout(ok, 1_500));
      const byKey = new Map();
      for (const d of rx.deliveries) byKey.set(d.idempotencyKey, [...(byKey.get(d.idempotencyKey) ?? []), d.attempt]);
      assert.equal(byKey.size, 3);
      for (const [key, attempts] of byKey) assert.deepEqual(attempts, [1, 2, 3], key);
      const status = await api.call("GET", "/v1/topics/att/queue");
      assert.equal(status.json.counters.acked, 3);
      assert.equal(status.json.counters.retried, 6);
    });
  } finally {
    await rx.close();
  }
});

test("one page's failing windows fill half the dead-letter bound: its events get 429, backends' are still stored", { timeout: 180_000 }, async () => {
  // The page's first two keys fail (their windows become dead letters); every other window is delivered.
  const failing = new Set(["page/a", "page/b"]);
  const { rx } = await receiver(5, (d) => (failing.has(d.body.key) ? 500 : 200));
  const secret = "queue-bounds-client-secret-0123456789";
  try {
    const topics = {
      shared: { target: `${rx.url}/s`, wait_ms: 50, delivery: "queue", max_queue_dead_letters: 4, forward_max_attempts: 1, client_tokens: true },
    };
    await withEdge(topics, async (api, edge) => {
      const now = Math.floor(Date.now() / 1000);
      const token = await new SignJWT({ topic: "shared", key_prefix: "page/" }).setProtectedHeader({ alg: "HS256" })
        .setIssuedAt(now).setExpirationTime(now + 600).sign(new TextEncoder().encode(secret));
      const page = client(edge.url, token);
      for (const k of ["page/a", "page/b"]) assert.equal((await page.event("shared", k, { k })).status, 202);
      await until(async () => (await api.call("GET", "/v1/topics/shared/queue")).json?.dead_letter_count === 2, 90_000, "two of four kept");
      // Half the bound: the page waits (the router's answer is at most 5 s stale)…
      const refused = await until(async () => {
        const res = await page.event("shared", "page/c", { k: "c" });
        return res.status === 429 && res;
      }, 15_000, "the page's event refused");
      assert.equal(refused.json.error.code, "dead_letters_full");
      const before = (await api.status("shared", "page/c")).json.stats?.events ?? 0;
      assert.equal((await page.event("shared", "page/c", { k: "c" })).status, 429, "still refused");
      assert.equal((await api.status("shared", "page/c")).json.stats?.events ?? 0, before, "a refused event stores nothing");
      // …while a backend's events are accepted and stored, up to the bound itself.
      const ingest = client(edge.url, TOKENS.ingest);
      const stored = await ingest.event("shared", "backend/1", { from: "backend" });
      assert.equal(stored.status, 202, JSON.stringify(stored.json));
      assert.equal((await api.status("shared", "backend/1")).json.stats.events, 1);
    }, {}, { LULL_CLIENT_TOKEN_SECRET: secret });
  } finally {
    await rx.close();
  }
});
