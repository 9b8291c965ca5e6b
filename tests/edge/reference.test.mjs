// The bench's reference (fixtures/js-promises.mjs: the JavaScript object that
// keeps lull-edge's promises) keeps them, on a local workerd with a real
// receiver: a per-event goal measured against an object that drops events or
// skips work would mean nothing. Signed, windowed, retried under one
// idempotency key, nothing lost across a restart, rows taken again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import {
  client, jsObjectWorker, runtimeOptions, startReceiver, stateDir, TOKENS, sleep, until, timedSend, assertGapsUnder, withFreshKey,
} from "./harness.mjs";

const WAIT_MS = 100;

/** The reference object on workerd, delivering to `target`, persisting to `dir`. */
async function startReference(target, dir) {
  const mf = new Miniflare(
    convertV4MiniflareOptions({ ...runtimeOptions(dir), ...jsObjectWorker("promises", target, { WAIT_MS: String(WAIT_MS), MAX_WAIT_MS: "1000", MAX_BATCH: "100" }) }),
  );
  const url = (await mf.ready).toString().replace(/\/$/, "");
  return { api: client(url, TOKENS.ingest), url, stop: () => mf.dispose() };
}

/** Each event `i` of `key` in the receiver's 2xx-answered windows, counted. */
function seen(rx, key) {
  const counts = new Map();
  for (const d of rx.of(key).filter((d) => d.status === 200)) for (const e of d.body.events) counts.set(e.i, (counts.get(e.i) ?? 0) + 1);
  return counts;
}

test("the reference delivers each key's events once, signed, in windows of at most 100, and refuses bad input", async () => {
  const rx = await startReceiver();
  const state = stateDir();
  const ref = await startReference(`${rx.url}/t`, state.dir);
  try {
    for (let i = 0; i < 30; i++) assert.equal((await ref.api.event("t", `k${i % 3}`, { i })).status, 202);
    const events = Array.from({ length: 250 }, (_, i) => ({ key: "batched", event: { i } }));
    const batch = await ref.api.call("POST", "/v1/topics/t/events:batch", { events });
    assert.equal(batch.status, 207);
    assert.deepEqual(batch.json.results.map((r) => r.seq), events.map((_, i) => i + 1));
    assert.equal((await ref.api.call("POST", "/v1/topics/t/keys/k0/events", "{nope")).status, 400);
    assert.equal((await client(ref.url, "wrong").event("t", "k0", { i: -1 })).status, 401);
    const all = () => [0, 1, 2].every((k) => seen(rx, `k${k}`).size === 10) && seen(rx, "batched").size === 250;
    await until(all, 20_000, "every event delivered");
    await sleep(3 * WAIT_MS);
    for (let k = 0; k < 3; k++) assert.deepEqual([...seen(rx, `k${k}`)].sort((a, b) => a[0] - b[0]), Array.from({ length: 10 }, (_, j) => [3 * j + k, 1]));
    const windows = rx.of("batched");
    assert.deepEqual(windows.map((d) => d.body.count), [100, 100, 50]);
    assert.equal(seen(rx, "batched").size, 250);
    assert.ok(rx.deliveries.every((d) => d.verified && d.idempotencyKey && d.attempt === 1), "every delivery signed, with an idempotency key, attempt 1");
  } finally {
    await ref.stop();
    await rx.close();
    state.cleanup();
  }
});

test("the reference retries a failed window as it was, under its idempotency key, across a restart", async () => {
  let failing = true;
  const rx = await startReceiver(() => (failing ? 500 : 200));
  const state = stateDir();
  let ref = await startReference(`${rx.url}/t`, state.dir);
  try {
    await withFreshKey("r", async (key) => {
      const sent = [];
      for (let i = 0; i < 5; i++) await timedSend(ref.api, "t", key, { i }, sent);
      // One window: each event came within the quiet period of the one before, unless the machine stalled the sender.
      assertGapsUnder(sent, WAIT_MS);
      await rx.waitFor(1, 15_000, key);
      // Events after the failure are not added to the failed window: it goes again as it was.
      for (let i = 5; i < 8; i++) assert.equal((await ref.api.event("t", key, { i })).status, 202);
      await ref.stop();
      failing = false;
      ref = await startReference(`${rx.url}/t`, state.dir);
      await until(() => rx.of(key).some((d) => d.status === 200 && d.body.events[0].i === 5), 20_000, "the second window");
      // The first window's tries (one or more failed before the restart, as the backoff's draw
      // fell), then its success after it: each the same window, its attempt counting up.
      const first = rx.of(key)[0].idempotencyKey;
      const tries = rx.of(key).filter((d) => d.idempotencyKey === first);
      assert.deepEqual(tries.map((d) => d.attempt), tries.map((_, i) => i + 1));
      assert.deepEqual(tries.map((d) => d.status), [...tries.slice(1).map(() => 500), 200]);
      for (const t of tries) assert.deepEqual(t.body.events.map((e) => e.i), [0, 1, 2, 3, 4]);
      const next = rx.of(key).filter((d) => d.idempotencyKey !== first);
      assert.equal(next.length, 1);
      assert.deepEqual(next[0].body.events.map((e) => e.i), [5, 6, 7]);
      // Numbering goes on across the restart and the delivered rows.
      assert.equal((await ref.api.event("t", key, { i: 8 })).json.seq, 9);
      await until(() => rx.of(key).some((d) => d.status === 200 && d.body.events[0].i === 8), 15_000, "the third window");
      // Since the restart, as SQLite counted them: each of the 3 windows sent a begun and an outcome
      // record, and event 8 took a delivered window's row (an update: 1 row, no delete beside it).
      // The last outcome record is written once the receiver's answer reaches the object: wait
      // for it, then a moment more for any row written past it.
      const rows = async () => (await ref.api.call("GET", `/v1/topics/t/keys/${key}`)).json.rows_written;
      await until(async () => (await rows()) >= 3 * 2 + 1, 10_000, "the third window's outcome record");
      await sleep(500);
      assert.equal(await rows(), 3 * 2 + 1);
    });
  } finally {
    await ref.stop();
    await rx.close();
    state.cleanup();
  }
});
