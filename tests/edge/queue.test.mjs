// Queue delivery on local workerd's Queues simulation: windows of many keys go
// to the queue once each, and the consumer forwards them to a slow receiver
// no more than `forward_concurrency` at a time (measured by the receiver).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  client, startEdge, startReceiver, stateDir, until, withEdge, timedSend, assertGapsUnder, withFreshKey,
} from "./harness.mjs";

/** A receiver answering after `ms`, measuring its own peak of requests in flight. */
async function slowReceiver(ms, status = () => 200) {
  let inFlight = 0;
  const peak = { value: 0 };
  const receiver = await startReceiver((d) => {
    inFlight += 1;
    peak.value = Math.max(peak.value, inFlight);
    return new Promise((ok) => setTimeout(() => {
      inFlight -= 1;
      ok({ status: status(d) });
    }, ms));
  });
  return { receiver, peak };
}

for (const concurrency of [1, 4]) {
  test(`forward_concurrency ${concurrency}: every window once, the receiver's peak in flight is ${concurrency}`, { timeout: 120_000 }, async () => {
    const { receiver, peak } = await slowReceiver(300);
    const state = stateDir();
    const topics = { q: { target: `${receiver.url}/hook`, wait_ms: 50, payload: "all", delivery: "queue", forward_concurrency: concurrency } };
    const edge = await startEdge({ topics, persist: state.dir });
    try {
      const api = client(edge.url);
      const keys = Array.from({ length: 16 }, (_, i) => `k${i}`);
      // k0's event carries an integer JavaScript cannot hold: the body must arrive byte for byte.
      await Promise.all(keys.map((k) => api.event("q", k, k === "k0" ? '{"k":"k0","big":12345678901234567890}' : { k })));
      await receiver.waitFor(16, 60_000);
      await new Promise((ok) => setTimeout(ok, 1500));
      const byKey = new Map();
      for (const d of receiver.deliveries) byKey.set(d.idempotencyKey, (byKey.get(d.idempotencyKey) ?? 0) + 1);
      assert.equal(byKey.size, 16, "one idempotency key per window");
      assert.ok(receiver.deliveries.every((d) => d.verified), "signed as webhooks are");
      assert.equal(peak.value, concurrency, `peak in flight ${peak.value}`);
      const k0 = receiver.deliveries.find((d) => d.body.key === "k0");
      assert.ok(k0.raw.includes('"big":12345678901234567890'), k0.raw);
      const status = await until(async () => {
        const res = await api.call("GET", "/v1/topics/q/queue");
        return res.json?.counters?.acked >= 16 && res.json;
      }, 10_000, "the counters");
      assert.equal(status.forward_concurrency, concurrency);
      assert.equal(status.dead_letter_count, 0);
      if (concurrency === 1) {
        // 16 × 300 ms one at a time is longer than a message's 2 s budget, but each
        // one's turn came within the gate's longest hold: it waited there, none went back on the queue.
        assert.equal(status.counters.requeued ?? 0, 0, JSON.stringify(status.counters));
      }
    } finally {
      await edge.stop();
      await receiver.close();
      state.cleanup();
    }
  });
}

test("a 2 s target behind six windows drains at its own pace: about 6 × 2 s, gaps near 2 s", { timeout: 120_000 }, async () => {
  const { receiver, peak } = await slowReceiver(2000);
  try {
    const topics = { slow: { target: `${receiver.url}/slow`, wait_ms: 50, delivery: "queue", forward_concurrency: 1 } };
    await withEdge(topics, async (api) => {
      const t0 = Date.now();
      await Promise.all(Array.from({ length: 6 }, (_, i) => api.event("slow", `k${i}`, { i })));
      // One at a time, 2 s each: 12 s of forwarding. The windows that found no
      // room come back when the gate expects their turn, not on a doubling backoff.
      await receiver.waitFor(6, 60_000);
      const arrivals = receiver.deliveries.map((d) => d.at).sort((a, b) => a - b);
      const gaps = arrivals.slice(1).map((at, i) => at - arrivals[i]);
      const span = arrivals.at(-1) - t0;
      assert.equal(new Set(receiver.deliveries.map((d) => d.idempotencyKey)).size, 6, "each window once");
      assert.equal(peak.value, 1);
      assert.ok(span <= 6 * 2000 + 5000, `the sixth arrived ${span} ms after the events (gaps ${gaps})`);
      assert.ok(Math.max(...gaps) <= 4500, `gaps ${gaps} ms`);
    });
  } finally {
    await receiver.close();
  }
});

test("forward_rate_per_s: the receiver's measured starts stay under the rate", { timeout: 120_000 }, async () => {
  const { receiver } = await slowReceiver(20);
  try {
    const topics = { r: { target: `${receiver.url}/r`, wait_ms: 50, delivery: "queue", forward_concurrency: 4, forward_rate_per_s: 5 } };
    await withEdge(topics, async (api) => {
      await Promise.all(Array.from({ length: 12 }, (_, i) => api.event("r", `k${i}`, { i })));
      await receiver.waitFor(12, 60_000);
      // The gate starts forwards 200 ms apart; the receiver sees them after a
      // transit that varies by some ms, so it judges rates, allowing 50 ms of it.
      const starts = receiver.deliveries.map((d) => d.at).sort((a, b) => a - b);
      const rate = ((starts.length - 1) * 1000) / (starts.at(-1) - starts[0]);
      assert.ok(rate <= 5 * 1.05, `${rate.toFixed(2)} a second over the run`);
      for (let i = 0; i + 5 < starts.length; i++) {
        assert.ok(starts[i + 5] - starts[i] >= 950, `6 arrivals within ${starts[i + 5] - starts[i]} ms`);
      }
    });
  } finally {
    await receiver.close();
  }
});

test("a receiver that keeps failing: retried per the queue's settings, then dead-lettered; the counters agree", { timeout: 120_000 }, async () => {
  const { receiver } = await slowReceiver(10, () => 500);
  try {
    const topics = { f: { target: `${receiver.url}/f`, wait_ms: 50, delivery: "queue", retry: { max_attempts: 1 } } };
    await withEdge(topics, async (api) => {
      await Promise.all(["a", "b", "c"].map((k) => api.event("f", k, { k })));
      const status = await until(async () => {
        const res = await api.call("GET", "/v1/topics/f/queue");
        return res.json?.dead_letter_count === 3 && res.json;
      }, 60_000, "three dead letters kept");
      // forward_max_attempts 4: four deliveries of each message, every one refused, then the consumer dead-letters it.
      const perKey = new Map();
      for (const d of receiver.deliveries) perKey.set(d.idempotencyKey, (perKey.get(d.idempotencyKey) ?? 0) + 1);
      assert.deepEqual([...perKey.values()], [4, 4, 4]);
      assert.equal(status.counters.retried, 12);
      assert.equal(status.counters.acked ?? 0, 0);
      assert.deepEqual(status.dead_letters.map((d) => d.idempotency_key).sort(), [...perKey.keys()].sort(), "the dead letters kept are those windows");
    });
  } finally {
    await receiver.close();
  }
});

test("a window larger than a message is split: every part arrives, each with its own idempotency key", { timeout: 120_000 }, async () => {
  const { receiver } = await slowReceiver(10);
  try {
    const topics = { big: { target: `${receiver.url}/big`, wait_ms: 300, payload: "all", delivery: "queue", forward_concurrency: 2 } };
    await withEdge(topics, async (api) => {
      const pad = "x".repeat(50_000);
      await withFreshKey("doc", async (key) => {
        const sent = [];
        for (let i = 0; i < 6; i++) await timedSend(api, "big", key, { i, pad }, sent);
        // One window: each event came within the quiet period of the one before, unless the machine stalled the sender.
        assertGapsUnder(sent, 300);
        const [some] = await receiver.waitFor(1, 30_000, key);
        const count = some.body.part.count;
        assert.ok(count >= 3, `${count} parts`);
        await receiver.waitFor(count, 30_000, key);
        // A moment more: a part sent twice would show.
        await new Promise((ok) => setTimeout(ok, 1500));
        const parts = receiver.of(key).map((d) => d.body).sort((a, b) => a.part.index - b.part.index);
        assert.equal(parts.length, count);
        assert.deepEqual(parts.map((p) => p.part.index), [...Array(count).keys()]);
        assert.deepEqual(parts.flatMap((p) => p.events.map((e) => e.i)), [0, 1, 2, 3, 4, 5], "every event once, in order");
        const keys = receiver.of(key).map((d) => d.idempotencyKey);
        assert.equal(new Set(keys).size, count);
        keys.forEach((k) => assert.match(k, new RegExp(`^big/${key}/[0-9a-z]{10}\\.1\\.part-\\d+-of-${count}$`)));
      });
    });
  } finally {
    await receiver.close();
  }
});

test("two topics sharing a queue: a slow target on one does not slow the other's deliveries", { timeout: 120_000 }, async () => {
  const slow = await slowReceiver(3000);
  const fast = await slowReceiver(10);
  try {
    const topics = {
      slow: { target: `${slow.receiver.url}/s`, wait_ms: 50, delivery: "queue", forward_concurrency: 1 },
      fast: { target: `${fast.receiver.url}/f`, wait_ms: 50, delivery: "queue", forward_concurrency: 1 },
    };
    await withEdge(topics, async (api) => {
      const sent = Date.now();
      await Promise.all(Array.from({ length: 5 }, (_, i) => api.event("slow", `s${i}`, { i })));
      await Promise.all(Array.from({ length: 5 }, (_, i) => api.event("fast", `f${i}`, { i })));
      await fast.receiver.waitFor(5, 30_000);
      const fastDone = Math.max(...fast.receiver.deliveries.map((d) => d.at)) - sent;
      // The slow topic needs 5 × 3 s one at a time; the fast one is done long before its first slow forward ends twice.
      assert.ok(fastDone < 5000, `the fast topic took ${fastDone} ms`);
      // Judged by when the deliveries came, not by when this line runs.
      assert.ok(slow.receiver.deliveries.filter((d) => d.at <= sent + fastDone).length < 5, "the slow one was still at it when the fast one was done");
    });
  } finally {
    await slow.receiver.close();
    await fast.receiver.close();
  }
});
