// Queue delivery on local workerd's Queues simulation: windows of many keys go
// to the queue once each, and the consumer forwards them to a slow receiver
// no more than `forward_concurrency` at a time (measured by the receiver).
import { test } from "node:test";
import assert from "node:assert/strict";
import { client, startEdge, startReceiver, stateDir, until } from "./harness.mjs";

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
      await Promise.all(keys.map((k) => api.event("q", k, { k })));
      await receiver.waitFor(16, 60_000);
      await new Promise((ok) => setTimeout(ok, 1500));
      const byKey = new Map();
      for (const d of receiver.deliveries) byKey.set(d.idempotencyKey, (byKey.get(d.idempotencyKey) ?? 0) + 1);
      assert.equal(byKey.size, 16, "one idempotency key per window");
      assert.ok(receiver.deliveries.every((d) => d.verified), "signed as webhooks are");
      assert.equal(peak.value, concurrency, `peak in flight ${peak.value}`);
      const status = await until(async () => {
        const res = await api.call("GET", "/v1/topics/q/queue");
        return res.json?.counters?.acked >= 16 && res.json;
      }, 10_000, "the counters");
      assert.equal(status.forward_concurrency, concurrency);
    } finally {
      await edge.stop();
      await receiver.close();
      state.cleanup();
    }
  });
}
