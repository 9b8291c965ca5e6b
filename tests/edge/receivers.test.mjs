// A topic's target as a good citizen meets it, on local workerd: a throttle
// (`429`/`503`) pauses every key of the topic, not only the key that met it;
// after the pause one probe goes first; a `410` disables the target until an
// operator resumes it; a webhook topic's `forward_concurrency` bounds its
// keys' deliveries together. Judged from the receiver's own log (what it got,
// when, and what it answered), and the topic's status route.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startReceiver, until, withEdge } from "./harness.mjs";

/** Post one event to each of `keys` of `topic` in batches of 500. */
async function postKeys(api, topic, keys) {
  for (let i = 0; i < keys.length; i += 500) {
    const events = keys.slice(i, i + 500).map((key, n) => ({ key, event: { key, n: i + n } }));
    const res = await api.call("POST", `/v1/topics/${topic}/events:batch`, { events });
    assert.equal(res.status, 207, res.text);
    assert.ok(res.json.results.every((r) => r.status === 202), res.text);
  }
}

/**
 * The pauses a receiver's log implies: each throttled answer at `t` pauses the
 * topic at least until `t + pauseMs(i)`. Requests the receiver got inside one,
 * past the half second every key has to learn of it: none may come.
 */
function requestsInsidePauses(deliveries, pauseMs) {
  const throttles = deliveries.filter((d) => d.status === 429 || d.status === 503);
  const inside = [];
  throttles.forEach((t, i) => {
    const [from, to] = [t.at + 500, t.at + pauseMs(i) - 50];
    for (const d of deliveries) if (d.at > from && d.at < to) inside.push({ at: d.at - t.at, after: t.status, key: d.body.key });
  });
  return inside;
}

/** Every window once with a 2xx, and every try of it as attempt 1: no attempt spent. */
function assertDeliveredOnceUnspent(deliveries, keys) {
  const ok = deliveries.filter((d) => d.status === 200);
  assert.deepEqual(ok.map((d) => d.body.key).sort(), [...keys].sort(), "each key's window delivered once");
  assert.equal(new Set(ok.map((d) => d.idempotencyKey)).size, keys.length);
  const spent = deliveries.filter((d) => d.attempt !== 1);
  assert.deepEqual(spent.map((d) => `${d.body.key}#${d.attempt}`), [], "a throttled try spends no attempt");
}

for (const [name, answer, pauseMs] of [
  ["429 Retry-After: 2", { status: 429, headers: { "retry-after": "2" } }, () => 2_000],
  // Without Retry-After: lull's own backoff, 1 s doubling, shared by the topic.
  ["503 without Retry-After", { status: 503 }, () => 1_000],
]) {
  test(`200 keys at a receiver answering ${name} for its first 5 s: paused together, one probe per pause, each window once, no attempt spent`, { timeout: 120_000 }, async () => {
    let throttleUntil = Infinity;
    const receiver = await startReceiver(() => (Date.now() < throttleUntil ? answer : 200));
    try {
      const topics = { t: { target: `${receiver.url}/hook`, wait_ms: 50, retry: { max_attempts: 2, base_ms: 100, cap_ms: 200 } } };
      await withEdge(topics, async (api) => {
        const keys = Array.from({ length: 200 }, (_, i) => `k${i}`);
        throttleUntil = Date.now() + 5_000;
        await postKeys(api, "t", keys);
        await until(async () => receiver.deliveries.filter((d) => d.status === 200).length >= keys.length, 90_000, "every window delivered");
        await new Promise((ok) => setTimeout(ok, 1_000));
        const log = receiver.deliveries;
        const inside = requestsInsidePauses(log, pauseMs);
        assert.deepEqual(inside, [], "no request inside a pause (after the half second to learn of it)");
        // After each pause, until one is delivered, the tries come one at a time: the probe.
        const throttled = log.filter((d) => d.status !== 200);
        const firstThrottle = throttled[0].at;
        const afterFirst = log.filter((d) => d.at > firstThrottle + 500 && d.at < throttleUntil);
        const probes = afterFirst.length;
        assert.ok(probes <= Math.ceil(5_000 / pauseMs(0)) + 1, `${probes} probes while throttled: ${afterFirst.map((d) => d.at - firstThrottle)}`);
        assertDeliveredOnceUnspent(log, keys);
        const status = await api.call("GET", "/v1/topics/t");
        assert.equal(status.status, 200, status.text);
        assert.equal(status.json.target.state, "active", status.text);
        assert.equal(status.json.target.last_answer.status, 200, "the probe's delivery was the last answer told");
        console.log(`# ${name}: ${log.length} requests for ${keys.length} windows; ${throttled.length} throttled, ${probes} while paused (probes); topic object requests ${JSON.stringify(status.json.requests)}`);
      });
    } finally {
      await receiver.close();
    }
  });
}

test("410 disables the target: status says so, events are still accepted, resume delivers all in key order", { timeout: 180_000 }, async () => {
  let gone = true;
  const receiver = await startReceiver(() => (gone ? 410 : 200));
  try {
    const topics = { t: { target: `${receiver.url}/hook`, wait_ms: 50, payload: "all" } };
    await withEdge(topics, async (api) => {
      const keys = ["a", "b", "c"];
      for (const key of keys) assert.equal((await api.event("t", key, { key, n: 0 })).status, 202);
      await until(async () => receiver.deliveries.length >= 1, 30_000, "the first delivery");
      const status = await until(async () => {
        const res = await api.call("GET", "/v1/topics/t");
        return res.json.target?.state === "disabled" && res.json;
      }, 15_000, "the target disabled");
      assert.equal(status.target.last_answer.status, 410);
      assert.ok(status.target.since >= receiver.deliveries[0].at - 1_000, JSON.stringify(status.target));
      // Disabled: nothing more is sent, and events are still accepted.
      await new Promise((ok) => setTimeout(ok, 2_000));
      const sentWhileDisabled = receiver.deliveries.length;
      assert.ok(sentWhileDisabled <= keys.length, `${sentWhileDisabled} requests: at most one per key (those in flight when the 410 came)`);
      for (const key of keys) {
        for (let n = 1; n <= 3; n++) assert.equal((await api.event("t", key, { key, n })).status, 202, "accepted while disabled");
      }
      await new Promise((ok) => setTimeout(ok, 2_000));
      assert.equal(receiver.deliveries.length, sentWhileDisabled, "delivers nothing while disabled");
      gone = false;
      const resumed = await api.call("POST", "/v1/topics/t/target:resume");
      assert.equal(resumed.status, 200, resumed.text);
      assert.equal(resumed.json.target.state, "active");
      // Each key holding windows looks again within a minute, and delivers them in order.
      await until(async () => {
        const delivered = receiver.deliveries.filter((d) => d.status === 200).flatMap((d) => d.body.events.map((e) => `${e.key}${e.n}`));
        return keys.every((k) => [0, 1, 2, 3].every((n) => delivered.includes(`${k}${n}`)));
      }, 120_000, "every event delivered after the resume");
      for (const key of keys) {
        const events = receiver.of(key).filter((d) => d.status === 200).flatMap((d) => d.body.events.map((e) => e.n));
        assert.deepEqual(events, [0, 1, 2, 3], `${key}: in order, the window that got the 410 first`);
        const got410 = receiver.of(key).find((d) => d.status === 410);
        if (got410) {
          const first = receiver.of(key).find((d) => d.status === 200);
          assert.equal(first.idempotencyKey, got410.idempotencyKey, `${key}: the window that got the 410 goes first`);
          assert.equal(first.attempt, got410.attempt, `${key}: the 410 spent no attempt`);
        }
      }
    });
  } finally {
    await receiver.close();
  }
});

test("a webhook topic with forward_concurrency 4: at most 4 in flight at the receiver over 1,000 keys, each window once", { timeout: 300_000 }, async () => {
  let inFlight = 0;
  let peak = 0;
  const receiver = await startReceiver(() => {
    inFlight += 1;
    peak = Math.max(peak, inFlight);
    return new Promise((ok) => setTimeout(() => {
      inFlight -= 1;
      ok(200);
    }, 20));
  });
  try {
    const topics = { t: { target: `${receiver.url}/hook`, wait_ms: 50, forward_concurrency: 4 } };
    await withEdge(topics, async (api) => {
      const keys = Array.from({ length: 1_000 }, (_, i) => `k${i}`);
      await postKeys(api, "t", keys);
      await receiver.waitFor(keys.length, 240_000);
      await new Promise((ok) => setTimeout(ok, 1_000));
      assert.ok(peak <= 4, `the receiver's peak in flight was ${peak}`);
      assert.equal(peak, 4, "the bound is used");
      const byKey = new Set(receiver.deliveries.map((d) => d.idempotencyKey));
      assert.equal(byKey.size, keys.length, "each window once");
      assert.equal(receiver.deliveries.length, keys.length, "no window twice");
      const status = await api.call("GET", "/v1/topics/t");
      assert.equal(status.json.forward_concurrency, 4, status.text);
      console.log(`# 1,000 keys under forward_concurrency 4: peak ${peak}; the topic object served ${JSON.stringify(status.json.requests)}`);
    });
  } finally {
    await receiver.close();
  }
});

test("recover replays exactly the windows dead-lettered since a time, under their idempotency keys", { timeout: 120_000 }, async () => {
  let refusing = true;
  const receiver = await startReceiver(() => (refusing ? 500 : 200));
  try {
    // One attempt: a refused window is a dead letter at once.
    const topics = { t: { target: `${receiver.url}/hook`, wait_ms: 50, retry: { max_attempts: 1 } } };
    await withEdge(topics, async (api) => {
      const deadLetter = async (keys) => {
        for (const key of keys) assert.equal((await api.event("t", key, { key })).status, 202);
        await until(async () => {
          const counts = await Promise.all(keys.map(async (k) => (await api.status("t", k)).json.dead_letter_count));
          return counts.every((n) => n === 1);
        }, 30_000, `${keys} dead-lettered`);
      };
      await deadLetter(["old-1", "old-2"]);
      await new Promise((ok) => setTimeout(ok, 1_000));
      const since = new Date(Date.now()).toISOString();
      await new Promise((ok) => setTimeout(ok, 500));
      await deadLetter(["new-1", "new-2", "new-3"]);
      refusing = false;
      assert.equal((await api.call("POST", "/v1/topics/t/recover", { since: "yesterday" })).status, 400);
      const res = await api.call("POST", "/v1/topics/t/recover", { since });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json, { replayed: 3, remaining: 0, next_after: null });
      await until(async () => receiver.deliveries.filter((d) => d.status === 200).length >= 3, 30_000, "the replays");
      await new Promise((ok) => setTimeout(ok, 1_000));
      const ok = receiver.deliveries.filter((d) => d.status === 200);
      assert.deepEqual(ok.map((d) => d.body.key).sort(), ["new-1", "new-2", "new-3"], "only those dead-lettered since then");
      for (const d of ok) {
        const refused = receiver.deliveries.find((r) => r.status === 500 && r.body.key === d.body.key);
        assert.equal(d.idempotencyKey, refused.idempotencyKey, `${d.body.key}: the same idempotency key`);
        assert.equal(d.body.reason, "replay");
      }
      for (const key of ["old-1", "old-2"]) assert.equal((await api.status("t", key)).json.dead_letter_count, 1, `${key} still a dead letter`);
      // Since the start, by unix ms: the older ones too.
      const all = await api.call("POST", "/v1/topics/t/recover", { since: 0 });
      assert.deepEqual(all.json, { replayed: 2, remaining: 0, next_after: null });
      await until(async () => receiver.deliveries.filter((d) => d.status === 200).length >= 5, 30_000, "the older replays");
    });
  } finally {
    await receiver.close();
  }
});
