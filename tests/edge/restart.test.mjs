// Restarts: stop workerd mid-window and mid-retry-backoff, start it again on
// the same persisted state; everything accepted is delivered, windows keep their ids.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, stateDir, client, sleep, until } from "./harness.mjs";

let rx, state;
const failFirst = new Set(); // keys whose first attempt fails

before(async () => {
  rx = await startReceiver((d) => {
    if (failFirst.has(d.body.key) && d.attempt === 1) return 500;
    return 200;
  });
  state = stateDir();
});

after(async () => {
  await rx?.close();
  state?.cleanup();
});

const topics = () => ({
  t: { target: `${rx.url}/hook`, wait_ms: 1_000, max_wait_ms: 5_000, payload: "all",
       retry: { max_attempts: 3, base_ms: 2_500, cap_ms: 2_500 } },
});

test("stopped mid-window: the window is delivered after the restart, and ids continue", async () => {
  let edge = await startEdge({ persist: state.dir, topics: topics() });
  let api = client(edge.url);
  for (let n = 1; n <= 3; n++) assert.equal((await api.event("t", "mid-window", { n })).status, 202);
  await edge.stop(); // before the 1 s quiet period ends
  assert.equal(rx.of("mid-window").length, 0);
  await sleep(300);
  edge = await startEdge({ persist: state.dir, topics: topics() });
  api = client(edge.url);
  try {
    const [d] = await rx.waitFor(1, 10_000, "mid-window");
    assert.deepEqual(d.body.events, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    assert.deepEqual([d.body.window, d.idempotencyKey], [1, "t/mid-window/1"]);
    const next = await api.event("t", "mid-window", { n: 4 });
    assert.deepEqual(next.json, { window: 2, seq: 4 }, "window and event ids continue after the restart");
    const [, d2] = await rx.waitFor(2, 10_000, "mid-window");
    assert.deepEqual(d2.body.events, [{ n: 4 }]);
    const s = await until(async () => {
      const s = await api.status("t", "mid-window");
      return s.json.stats.succeeded === 2 && s.json;
    });
    assert.deepEqual([s.stats.events, s.stored_events, s.state], [4, 0, "idle"]);
  } finally {
    await edge.stop();
  }
});

test("stopped mid-retry-backoff: the retry happens after the restart with the same idempotency key", async () => {
  failFirst.add("mid-backoff");
  let edge = await startEdge({ persist: state.dir, topics: topics() });
  let api = client(edge.url);
  assert.equal((await api.event("t", "mid-backoff", { n: 1 })).status, 202);
  await rx.waitFor(1, 10_000, "mid-backoff"); // attempt 1 fails
  const retrying = await until(async () => {
    const s = await api.status("t", "mid-backoff");
    return s.json.state === "retrying" && s.json;
  });
  // Stop it before the retry unless the jitter drew a retry too soon to beat.
  await edge.stop();
  const stoppedAt = Date.now();
  await sleep(300);
  edge = await startEdge({ persist: state.dir, topics: topics() });
  api = client(edge.url);
  try {
    const got = await rx.waitFor(2, 10_000, "mid-backoff");
    const retry = got[1];
    assert.deepEqual([retry.attempt, retry.idempotencyKey, retry.body.reason], [2, "t/mid-backoff/1", "retry"]);
    assert.deepEqual(retry.body.events, [{ n: 1 }]);
    if (retrying.run.retry_at > stoppedAt + 50) {
      assert.ok(retry.at >= retrying.run.retry_at - 5, "the retry kept its time across the restart");
    }
    const s = await until(async () => {
      const s = await api.status("t", "mid-backoff");
      return s.json.state === "idle" && s.json;
    });
    assert.deepEqual([s.stats.failures, s.stats.succeeded, s.stored_events], [1, 1, 0]);
    assert.equal(rx.of("mid-backoff").length, 2, "nothing delivered twice beyond the retry");
  } finally {
    await edge.stop();
  }
});
