// A configuration change reaching a live key: the operator redeploys with
// another quiet period and retry policy while a delivery of the key is in
// its backoff. The run in flight keeps the retry it started with; the next
// window waits the new quiet period and runs the new retry.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, stateDir, client, until, ScheduleBroken, withFreshKey, keyLabel } from "./harness.mjs";

const LATE = 1_500; // the most a fire may be late on a loaded machine
const BACKOFF = 2_500;
let rx, state;

before(async () => {
  // Window 1 fails twice, then succeeds; window 2 fails its first attempt.
  rx = await startReceiver((d) => {
    if (d.body.window === 1) return d.attempt <= 2 ? 500 : 200;
    if (d.body.window === 2) return 500;
    return 200;
  });
  state = stateDir();
});

after(async () => {
  await rx?.close();
  state?.cleanup();
});

const oldTopics = () => ({
  t: { target: `${rx.url}/hook`, wait_ms: 5_000, payload: "all",
       retry: { max_attempts: 3, base_ms: BACKOFF, cap_ms: BACKOFF, jitter: "none" } },
});
const newTopics = () => ({
  t: { target: `${rx.url}/hook`, wait_ms: 200, payload: "all", retry: { max_attempts: 1, base_ms: 0, cap_ms: 0 } },
});

test("a redeployed policy reaches a live key from its next window; the run in flight keeps its retry", async () => {
  await withFreshKey("reconfigured", async (key) => {
    let edge = await startEdge({ persist: state.dir, topics: oldTopics() });
    let api = client(edge.url);
    try {
      assert.equal((await api.event("t", key, { n: 1 })).status, 202);
      assert.equal((await api.flush("t", key)).status, 200);
      await rx.waitFor(1, 10_000, key); // attempt 1 of window 1 fails
      await until(async () => (await api.status("t", key)).json.state === "retrying");
    } finally {
      await edge.stop();
    }

    const logs = [];
    edge = await startEdge({ persist: state.dir, topics: newTopics(), logs });
    api = client(edge.url);
    try {
      const s = (await api.status("t", key)).json;
      if (s.run?.attempt !== 1 || s.state !== "retrying") {
        throw new ScheduleBroken(`the restart came after the backoff: ${JSON.stringify(s.run)}`);
      }
      assert.deepEqual([s.wait_ms, s.policy_pending], [200, false], "no window open: the new policy is in force");
      assert.equal(s.run.retry_at, s.last_delivery.at + BACKOFF, "the retry scheduled before the change stands");
      const changed = logs.map((l) => JSON.parse(l)).filter((l) => l.lull === "policy_changed" && l.key === keyLabel(key));
      assert.equal(changed.length, 1, "the change is logged once");
      assert.ok(!logs.some((l) => l.includes(key)), "no log line names the key itself (the topic has no log_keys)");

      const sent = Date.now();
      assert.deepEqual((await api.event("t", key, { n: 2 })).json, { window: 2, seq: 2 });
      await rx.waitFor(2, BACKOFF + 10_000, key); // attempt 2 of window 1 fails
      const mid = await until(async () => {
        const s = (await api.status("t", key)).json;
        return s.run?.attempt === 2 && s.run.retry_at && s;
      });
      if (Date.now() - sent >= 5_000) throw new ScheduleBroken("window 2 is 5 s old: the old wait would be over too");
      assert.equal(mid.run.retry_at, mid.last_delivery.at + BACKOFF, "the run keeps its own backoff and max_attempts");
      assert.equal(mid.dead_letter_count, 0);
      assert.equal(mid.open.window, 2);
      assert.equal(mid.open.due, "quiet", "window 2 waited the new 200 ms, not the old 5 s, and waits for the slot");

      // Attempt 3 of window 1 succeeds; window 2 runs at once, under the new retry: no retries.
      const got = await rx.waitFor(4, BACKOFF + 10_000, key);
      assert.deepEqual(got.map((d) => [d.body.window, d.attempt]), [[1, 1], [1, 2], [1, 3], [2, 1]]);
      const done = await until(async () => {
        const s = (await api.status("t", key)).json;
        return s.dead_letter_count === 1 && s;
      });
      assert.deepEqual([done.dead_letters[0].window, done.dead_letters[0].attempts], [2, 1]);
      assert.equal(done.stats.succeeded, 1);

      // A later window is timed by the new quiet period.
      assert.equal((await api.event("t", key, { n: 3 })).status, 202);
      const [, , , , d3] = await rx.waitFor(5, 200 + LATE + 5_000, key);
      const waited = d3.at - d3.body.last_at;
      assert.ok(waited >= 200 && waited <= 200 + LATE, `window 3 fired ${waited} ms after its last event`);
      assert.equal(d3.body.reason, "quiet");
    } finally {
      await edge.stop();
    }
  });
});
