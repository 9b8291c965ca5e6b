// Key lifecycle: an idle key (nothing open, queued, running or dead-lettered)
// is deleted — rows, snapshot, remembered producer keys, alarm — once its
// topic's retention has passed since its last change. A key that comes back
// starts a new life: window ids from 1 again, under a new incarnation, so a
// receiver deduping on Idempotency-Key never sees one twice.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, stateDir, client, until, idempotencyKeyPattern } from "./harness.mjs";

const RETENTION = 1_500;
let edge, rx, state, api;

before(async () => {
  rx = await startReceiver(() => 200);
  state = stateDir();
  edge = await startEdge({
    persist: state.dir,
    topics: { gc: { target: `${rx.url}/hook`, wait_ms: 50, payload: "all", retention_ms: RETENTION, dedupe_window_ms: 1_000 } },
  });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

test("an idle key is collected after its retention and comes back with a new incarnation", async () => {
  assert.deepEqual((await api.event("gc", "k", { n: 1 })).json, { window: 1, seq: 1 });
  const [first] = await rx.waitFor(1, 5_000, "k");
  const lived = await until(async () => {
    const s = (await api.status("gc", "k")).json;
    return s.state === "idle" && s.stats.succeeded === 1 && s;
  });
  const collected = await until(async () => {
    const s = (await api.status("gc", "k")).json;
    return s.stats.events === 0 && s;
  }, RETENTION + 10_000, "the key collected");
  const idleFor = Date.now() - lived.last_delivery.at;
  assert.ok(idleFor >= RETENTION, `collected ${idleFor} ms after its last change`);
  assert.notEqual(collected.incarnation, lived.incarnation);
  assert.equal(collected.stored_events, 0);
  assert.deepEqual((await api.event("gc", "k", { n: 2 })).json, { window: 1, seq: 1 }, "ids start again");
  const [, second] = await rx.waitFor(2, 5_000, "k");
  assert.match(first.idempotencyKey, idempotencyKeyPattern("gc", "k", 1));
  assert.match(second.idempotencyKey, idempotencyKeyPattern("gc", "k", 1));
  assert.notEqual(second.idempotencyKey, first.idempotencyKey, "never the same idempotency key");
  assert.deepEqual(second.body.events, [{ n: 2 }]);
});
