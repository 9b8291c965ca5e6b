// Storage a release that kept a key's snapshot in a table of its own left
// (fixtures/snapshot-table-state, made by the worker at e015adb: `open/cur`
// holds an open `all` window of three events; `done/cur` delivered its one
// window, whose event came with a producer's Idempotency-Key, and is idle;
// `done/one` holds one event; made.json has what that run saw). This release
// moves each key's snapshot into its events table (row 0) and drops the table
// at the key's first load: the keys go on in the same life, with the next seq
// and their producer keys remembered, a new key takes a page less, and after a
// restart every key loads from its moved row.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { cpSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startEdge, startReceiver, stateDir, client, until, lifeOf } from "./harness.mjs";

const fixture = join(import.meta.dirname, "fixtures/snapshot-table-state");
const made = JSON.parse(readFileSync(join(fixture, "made.json"), "utf8"));
let edge, rx, state, api;

const start = async () => {
  const target = `${rx.url}/hook`;
  edge = await startEdge({
    persist: state.dir,
    topics: { open: { target, wait_ms: 3_600_000, payload: "all" }, done: { target, wait_ms: 3_600_000, payload: "all" } },
  });
  api = client(edge.url);
};

before(async () => {
  rx = await startReceiver(() => 200);
  state = stateDir();
  cpSync(fixture, state.dir, { recursive: true });
  await start();
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

const of = (topic) => rx.of("cur").filter((d) => d.body.topic === topic);

test("an idle key goes on from its moved snapshot: the same life, the next seq and window, its producer key remembered", async () => {
  const status = (await api.status("done", "cur")).json;
  assert.equal(status.state, "idle", JSON.stringify(status));
  assert.equal(status.event_rows, 1, "its one event's row; the snapshot's row is not an event row");
  const repeat = await api.event("done", "cur", { n: 1 }, { "idempotency-key": "made-1" });
  assert.equal(repeat.status, 202);
  assert.equal(repeat.json.seq, 1, "the producer key's first answer again: nothing stored");
  const next = await api.event("done", "cur", { n: 2 });
  assert.equal(next.json.seq, 2, JSON.stringify(next.json));
  assert.equal((await api.flush("done", "cur")).status, 200);
  await until(() => of("done").length === 1, 10_000, "done/cur delivered");
  const [delivery] = of("done");
  assert.deepEqual(delivery.body.events, [{ n: 2 }], "the repeat was not stored");
  assert.equal(lifeOf(delivery.idempotencyKey), lifeOf(made.idempotency_key), "the same incarnation");
  assert.match(delivery.idempotencyKey, /\.2$/, "the next window");
});

test("an open window of the release before is delivered whole with the key's next event", async () => {
  // The fixture's window waits an hour of quiet from when it was made: once
  // that has passed, the overdue alarm delivers it at load; else the next event joins it.
  const next = await api.event("open", "cur", { n: 4 });
  assert.equal(next.json.seq, 4, "seqs go on");
  assert.equal((await api.flush("open", "cur")).status, 200);
  await until(() => of("open").reduce((n, d) => n + d.body.count, 0) === 4, 10_000, "all four events delivered");
  assert.deepEqual(of("open").flatMap((d) => d.body.events), [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
});

test("a new key's storage is a page smaller than the release before's: one table, not two", async () => {
  assert.equal((await api.event("done", "two", { n: 1 })).status, 202);
  const bytes = (await api.status("done", "two")).json.database_bytes;
  assert.equal(bytes, made.one_event_database_bytes - 4096, `${bytes} B here, ${made.one_event_database_bytes} B then, for one event`);
});

test("after a restart, every key loads from its moved snapshot", async () => {
  await edge.stop();
  await start();
  const next = await api.event("done", "cur", { n: 3 });
  assert.equal(next.status, 202, JSON.stringify(next.json));
  assert.equal(next.json.seq, 3);
  assert.equal((await api.flush("done", "cur")).status, 200);
  await until(() => of("done").length === 2, 10_000, "done/cur's next window delivered");
  assert.equal(lifeOf(of("done")[1].idempotencyKey), lifeOf(made.idempotency_key), "still the same incarnation");
  assert.equal((await api.event("open", "cur", { n: 5 })).json.seq, 5);
  assert.equal((await api.event("done", "one", { n: 2 })).json.seq, 2, "a key first loaded after the restart moves its snapshot then");
});
