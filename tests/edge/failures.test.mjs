// Failing targets (500s, timeouts, connection refused): the backoff schedule,
// dead letters after max_attempts, replay; and the signature with a wrong secret.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  startEdge, startReceiver, stateDir, client, until, verifyWebhook, freePort, TOKENS, idempotencyKeyPattern,
  timedSend, assertGapsUnder, withFreshKey,
} from "./harness.mjs";

const RETRY = { max_attempts: 3, base_ms: 200, cap_ms: 400 };
const ceiling = (attempt) => Math.min(RETRY.base_ms * 2 ** (attempt - 1), RETRY.cap_ms);
// How late an alarm and its delivery may be on a loaded 2-core machine.
const LATE = 1500;
// Without jitter a retry waits exactly its ceiling: long enough that the status
// is read while it waits, whatever the machine's load.
const EXACT = { max_attempts: 2, base_ms: 2_000, cap_ms: 2_000, jitter: "none" };
let edge, rx, state, api, refusedUrl;
let failing = true;
const logs = [];
/** The worker's structured log lines of `lull` kind `kind` for (topic, key). */
const logged = (kind, topic, key) =>
  logs.flatMap((m) => {
    try {
      const line = JSON.parse(m);
      return line.lull === kind && line.topic === topic && line.key === key ? [line] : [];
    } catch {
      return [];
    }
  });

before(async () => {
  rx = await startReceiver((d) => (d.body.topic === "hangs" ? "hang" : failing ? 500 : 200));
  refusedUrl = `http://127.0.0.1:${await freePort()}/hook`;
  state = stateDir();
  // log_keys: the lines these tests read name keys as they are.
  const topic = (target, extra = {}) => ({ target, wait_ms: 100, payload: "all", retry: RETRY, log_keys: true, ...extra });
  edge = await startEdge({
    persist: state.dir,
    logs,
    topics: {
      fails: topic(`${rx.url}/hook`),
      hangs: topic(`${rx.url}/hook`, { delivery_timeout_ms: 300 }),
      refused: topic(refusedUrl),
      slow: topic(`${rx.url}/hook`, { retry: EXACT }),
    },
  });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

const deadLettered = (topic, key) => async () => {
  const s = await api.status(topic, key);
  return s.json.dead_letters?.length === 1 && s.json;
};

test("6: 500s retry with backoff and full jitter, dead-letter after max_attempts, replay delivers", async () => {
  await withFreshKey("k", async (key) => {
    failing = true;
    const sent = [];
    await timedSend(api, "fails", key, { n: 1 }, sent);
    await timedSend(api, "fails", key, { n: 2 }, sent);
    // Both in one window: the second came within the quiet period, unless the machine stalled the sender.
    assertGapsUnder(sent, 100);
    const tries = await rx.waitFor(3, 10_000, key);
    const status = await until(deadLettered("fails", key), 10_000, "the dead letter");
    assert.deepEqual(
      tries.map((d) => [d.attempt, d.idempotencyKey, d.body.reason]),
      [
        [1, tries[0].idempotencyKey, "quiet"],
        [2, tries[0].idempotencyKey, "retry"],
        [3, tries[0].idempotencyKey, "retry"],
      ],
      "the same window and idempotency key on every attempt",
    );
    assert.match(tries[0].idempotencyKey, idempotencyKeyPattern("fails", key, 1));
    for (const d of tries) assert.deepEqual(d.body.events, [{ n: 1 }, { n: 2 }]);
    // The engine's decisions, from the worker's log: after failed attempt n it
    // drew a delay within 0..=ceiling(n); the retry then came at that time, not
    // before, and at most LATE after.
    const failed = logged("deliver", "fails", key).filter((l) => !l.ok);
    const retries = logged("retry", "fails", key);
    assert.deepEqual(failed.map((l) => l.attempt), [1, 2, 3]);
    assert.deepEqual(retries.map((l) => l.attempt), [2, 3]);
    for (const [i, retry] of retries.entries()) {
      const delay = retry.at - failed[i].at;
      assert.ok(delay >= 0 && delay <= ceiling(i + 1), `retry ${i + 2} drawn ${delay} ms after the failure; ceiling ${ceiling(i + 1)} ms`);
      const late = tries[i + 1].at - retry.at;
      assert.ok(late >= 0 && late <= LATE, `retry ${i + 2} arrived ${late} ms after its time`);
    }
    const [dead] = status.dead_letters;
    assert.deepEqual([dead.window, dead.attempts, dead.span.first, dead.span.last], [1, 3, 1, 2]);
    assert.equal(status.stats.dead_lettered, 1);
    assert.equal(status.stats.failures, 3);
    assert.equal(status.stored_events, 2, "a dead letter keeps its rows");
    assert.equal(status.last_delivery.outcome, "500");
    const listed = await api.deadLetters("fails", key);
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.json.dead_letters, status.dead_letters);

    failing = false;
    const replay = await api.replay("fails", key, 1);
    assert.equal(replay.status, 200, JSON.stringify(replay.json));
    const [, , , again] = await rx.waitFor(4, 5_000, key);
    assert.deepEqual([again.body.reason, again.idempotencyKey, again.attempt], ["replay", tries[0].idempotencyKey, 1]);
    assert.deepEqual(again.body.events, [{ n: 1 }, { n: 2 }]);
    const done = await until(async () => {
      const s = await api.status("fails", key);
      return s.json.state === "idle" && s.json;
    });
    assert.equal(done.dead_letters.length, 0);
    assert.equal(done.stored_events, 0);
    assert.equal((await api.replay("fails", key, 1)).status, 404, "a dead letter replays once");
  });
});

test("a dead letter can be discarded: its events go, and it is no longer listed", async () => {
  failing = true;
  await api.event("fails", "discard", { n: 1 });
  const s = await until(deadLettered("fails", "discard"), 10_000, "the dead letter");
  const window = s.dead_letters[0].window;
  assert.equal(s.stored_events, 1);
  const gone = await api.call("DELETE", `/v1/topics/fails/keys/discard/dead-letters/${window}`);
  assert.equal(gone.status, 200, JSON.stringify(gone.json));
  assert.deepEqual([gone.json.dead_letter_count, gone.json.state], [0, "idle"]);
  assert.equal((await api.status("fails", "discard")).json.stored_events, 0);
  assert.equal((await api.call("DELETE", `/v1/topics/fails/keys/discard/dead-letters/${window}`)).status, 404);
});

test("a retry waiting for its time shows in the status with its attempt and time", async () => {
  failing = true;
  await api.event("slow", "sched", { n: 1 });
  await rx.waitFor(1, 5_000, "sched");
  const s = await until(async () => {
    const s = await api.status("slow", "sched");
    return s.json.state === "retrying" && s.json;
  }, 15_000, "the retrying state, during the backoff");
  assert.equal(s.run.retry_at - s.last_delivery.at, EXACT.base_ms, "without jitter, exactly base_ms after the failure");
  assert.deepEqual([s.run.attempt, s.run.window, s.last_delivery.ok, s.last_delivery.attempt], [1, 1, false, 1]);
  const [, retry] = await rx.waitFor(2, EXACT.base_ms + LATE, "sched");
  assert.ok(retry.at >= s.run.retry_at, `the retry came ${s.run.retry_at - retry.at} ms before its time`);
  assert.equal(retry.attempt, 2);
  await until(deadLettered("slow", "sched"), 10_000, "the dead letter");
});

test("a target that never answers times out and counts as failed", async () => {
  await api.event("hangs", "k", { n: 1 });
  const s = await until(deadLettered("hangs", "k"), 15_000, "the dead letter");
  assert.equal(s.last_delivery.outcome, "timeout");
  assert.equal(rx.of("k").filter((d) => d.body.topic === "hangs").length, 3);
});

test("connection refused counts as failed and dead-letters", async () => {
  await api.event("refused", "k", { n: 1 });
  const s = await until(deadLettered("refused", "k"), 15_000, "the dead letter");
  assert.match(s.last_delivery.outcome, /^network/);
  assert.equal(s.stats.failures, 3);
});

test("the signature verifies with the secret and fails with a wrong one or a changed body", async () => {
  const [d] = rx.deliveries;
  const wrong = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
  assert.ok(verifyWebhook(TOKENS.secret, d.headers, Buffer.from(d.raw)));
  assert.ok(!verifyWebhook(wrong, d.headers, Buffer.from(d.raw)));
  assert.ok(!verifyWebhook(TOKENS.secret, d.headers, Buffer.from(d.raw.replace('"n":1', '"n":9'))));
  assert.match(d.signature, /^v1,[A-Za-z0-9+/]{43}=$/);
  assert.equal(d.headers["webhook-id"], d.idempotencyKey);
  assert.equal(d.headers["lull-signature"], undefined);
});
