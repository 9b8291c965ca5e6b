// Restarts: stop workerd mid-window, mid-delivery and mid-retry-backoff, start it
// again on the same persisted state; everything accepted is delivered, windows keep their ids.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  startEdge, startReceiver, stateDir, client, sleep, until, ScheduleBroken, withFreshKey, idempotencyKeyPattern,
} from "./harness.mjs";

let rx, state;
const failFirst = new Set(); // keys whose first attempt fails
const hangFirst = new Set(); // keys whose first attempt gets no answer

before(async () => {
  rx = await startReceiver((d) => {
    if (failFirst.has(d.body.key) && d.attempt === 1) return 500;
    if (hangFirst.has(d.body.key) && d.attempt === 1) return "hang";
    return 200;
  });
  state = stateDir();
});

after(async () => {
  await rx?.close();
  state?.cleanup();
});

// A quiet period and a backoff (exact: no jitter) long enough that workerd is
// stopped inside them; each test checks that it was.
const WAIT = 2_000;
const BACKOFF = 3_000;
const topics = () => ({
  t: { target: `${rx.url}/hook`, wait_ms: WAIT, max_wait_ms: 5_000, payload: "all",
       retry: { max_attempts: 3, base_ms: BACKOFF, cap_ms: BACKOFF, jitter: "none" } },
});

test("stopped mid-window: the window is delivered after the restart, and ids continue", async () => {
  await withFreshKey("mid-window", async (key) => {
    let edge = await startEdge({ persist: state.dir, topics: topics() });
    let api = client(edge.url);
    const firstSent = Date.now();
    for (let n = 1; n <= 3; n++) assert.equal((await api.event("t", key, { n })).status, 202);
    await edge.stop();
    const stoppedAt = Date.now();
    // Stopped inside the quiet period, unless the machine stalled the test past it.
    if (stoppedAt >= firstSent + WAIT) throw new ScheduleBroken(`workerd stopped ${stoppedAt - firstSent} ms after the first event`);
    assert.equal(rx.of(key).length, 0, "nothing delivered before the quiet period ended");
    await sleep(300);
    edge = await startEdge({ persist: state.dir, topics: topics() });
    api = client(edge.url);
    try {
      const [d] = await rx.waitFor(1, WAIT + 10_000, key);
      assert.deepEqual(d.body.events, [{ n: 1 }, { n: 2 }, { n: 3 }]);
      assert.deepEqual([d.body.window, d.body.reason], [1, "quiet"]);
      assert.match(d.idempotencyKey, idempotencyKeyPattern("t", key, 1));
      assert.ok(d.at >= d.body.last_at + WAIT, "the restart kept the quiet period");
      const next = await api.event("t", key, { n: 4 });
      assert.deepEqual(next.json, { window: 2, seq: 4 }, "window and event ids continue after the restart");
      const [, d2] = await rx.waitFor(2, WAIT + 10_000, key);
      assert.deepEqual(d2.body.events, [{ n: 4 }]);
      const s = await until(async () => {
        const s = await api.status("t", key);
        return s.json.stats.succeeded === 2 && s.json;
      });
      assert.deepEqual([s.stats.events, s.stored_events, s.state], [4, 0, "idle"]);
    } finally {
      await edge.stop();
    }
  });
});

// A delivery sets no alarm of its own: the runtime holds the alarm whose
// handler is delivering, and runs it again when the handler was cut short.
test("stopped mid-delivery: the runtime runs the alarm again, the attempt counts as interrupted, the window goes out again", async () => {
  await withFreshKey("mid-delivery", async (key) => {
    hangFirst.add(key);
    let edge = await startEdge({ persist: state.dir, topics: topics() });
    let api = client(edge.url);
    assert.equal((await api.event("t", key, { n: 1 })).status, 202);
    const [first] = await rx.waitFor(1, WAIT + 10_000, key); // attempt 1 gets no answer
    await edge.stop();
    const stoppedAt = Date.now();
    // Stopped inside the delivery (its timeout is 10 s), unless the machine stalled the test past it.
    if (stoppedAt >= first.at + 10_000) throw new ScheduleBroken(`workerd stopped ${stoppedAt - first.at} ms into the delivery`);
    edge = await startEdge({ persist: state.dir, topics: topics() });
    api = client(edge.url);
    try {
      const [, again] = await rx.waitFor(2, 30_000, key);
      assert.equal(again.attempt, 2, "the cut-short attempt counted");
      assert.equal(again.idempotencyKey, first.idempotencyKey, "the same window, the same idempotency key");
      assert.deepEqual(again.body.events, [{ n: 1 }]);
      const s = await until(async () => {
        const s = await api.status("t", key);
        return s.json.stats.succeeded === 1 && s.json;
      });
      assert.deepEqual([s.stats.failures, s.state, s.stored_events], [1, "idle", 0]);
      const { json } = await api.call("GET", `/v1/topics/t/keys/${encodeURIComponent(key)}/timeline`);
      assert.ok(
        json.timeline.some((e) => e.lull === "deliver" && e.attempt === 1 && e.outcome === "interrupted"),
        JSON.stringify(json.timeline),
      );
      assert.equal(rx.of(key).length, 2, "sent twice: the cut-short attempt and the one after it");
    } finally {
      await edge.stop();
    }
  });
});

test("stopped mid-retry-backoff: the retry happens after the restart with the same idempotency key", async () => {
  await withFreshKey("mid-backoff", async (key) => {
    failFirst.add(key);
    let edge = await startEdge({ persist: state.dir, topics: topics() });
    let api = client(edge.url);
    assert.equal((await api.event("t", key, { n: 1 })).status, 202);
    await rx.waitFor(1, WAIT + 10_000, key); // attempt 1 fails
    const retrying = await until(async () => {
      const s = await api.status("t", key);
      return s.json.state === "retrying" && s.json;
    });
    assert.equal(retrying.run.retry_at, retrying.last_delivery.at + BACKOFF, "no jitter: exactly the backoff");
    await edge.stop();
    const stoppedAt = Date.now();
    if (stoppedAt >= retrying.run.retry_at) {
      throw new ScheduleBroken(`workerd stopped ${stoppedAt - retrying.run.retry_at} ms after the retry was due`);
    }
    assert.equal(rx.of(key).length, 1, "no retry before the stop");
    await sleep(300);
    edge = await startEdge({ persist: state.dir, topics: topics() });
    api = client(edge.url);
    try {
      const got = await rx.waitFor(2, BACKOFF + 10_000, key);
      const retry = got[1];
      assert.deepEqual([retry.attempt, retry.idempotencyKey, retry.body.reason], [2, got[0].idempotencyKey, "retry"]);
      assert.match(retry.idempotencyKey, idempotencyKeyPattern("t", key, 1));
      assert.deepEqual(retry.body.events, [{ n: 1 }]);
      assert.ok(retry.at >= retrying.run.retry_at, "the retry kept its time across the restart");
      const s = await until(async () => {
        const s = await api.status("t", key);
        return s.json.state === "idle" && s.json;
      });
      assert.deepEqual([s.stats.failures, s.stats.succeeded, s.stored_events], [1, 1, 0]);
      assert.equal(rx.of(key).length, 2, "nothing delivered twice beyond the retry");
    } finally {
      await edge.stop();
    }
  });
});

// A key makes its backlog and producer-key tables when it first needs them:
// after a restart, a key that made them reads them back, and one that had not
// makes them then.
test("tables made when first needed: a producer key remembered before a restart still is after it; a key without the table makes it after", async () => {
  const events = (api, key) => (body, idem) => api.event("t", key, body, idem ? { "idempotency-key": idem } : {});
  let edge = await startEdge({ persist: state.dir, topics: topics() });
  let api = client(edge.url);
  let first;
  try {
    const a = events(api, "lazy-a");
    assert.equal((await a({ n: 1 })).status, 202);
    first = await a({ n: 2 }, "p-1");
    assert.equal(first.status, 202);
    assert.equal((await events(api, "lazy-b")({ n: 1 })).status, 202);
    // The key that remembered a producer key holds two more tables (a page each) than the one that did not.
    const [sa, sb] = [(await api.status("t", "lazy-a")).json, (await api.status("t", "lazy-b")).json];
    assert.ok(sb.database_bytes < sa.database_bytes, `lazy-b ${sb.database_bytes} B, lazy-a ${sa.database_bytes} B`);
  } finally {
    await edge.stop();
  }
  edge = await startEdge({ persist: state.dir, topics: topics() });
  api = client(edge.url);
  try {
    const again = await events(api, "lazy-a")({ n: 2 }, "p-1");
    assert.deepEqual([again.status, again.json], [202, first.json], "remembered across the restart: the first answer");
    const b = events(api, "lazy-b");
    const stored = await b({ n: 2 }, "p-2");
    assert.equal(stored.status, 202);
    assert.deepEqual((await b({ n: 2 }, "p-2")).json, stored.json, "remembered in the table made after the restart");
    const s = await until(async () => {
      const s = (await api.status("t", "lazy-b")).json;
      return s.stats.succeeded >= 1 && s.state === "idle" && s;
    }, WAIT + 15_000, "lazy-b delivered");
    assert.equal(s.stats.events, 2, "lazy-b stored two events, not three");
    const delivered = await until(async () => {
      const events = rx.of("lazy-a").flatMap((d) => d.body.events);
      return events.length >= 2 && events;
    }, WAIT + 15_000, "lazy-a delivered");
    assert.deepEqual(delivered, [{ n: 1 }, { n: 2 }], "lazy-a: each event delivered once");
  } finally {
    await edge.stop();
  }
});
