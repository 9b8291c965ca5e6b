// Storage a release that kept a key's snapshot in a table of its own left
// (fixtures/snapshot-table-state, made by the worker at e015adb: `open/cur`
// holds an open `all` window of three events; `done/cur` delivered its one
// window, whose event came with a producer's Idempotency-Key, and is idle;
// `done/one` holds one event; made.json has what that run saw). This release
// moves each key's snapshot into its events table (row 0) and drops the table
// at the key's first load: the keys go on in the same life, with the next seq
// and their producer keys remembered, a new key takes a page less, and after a
// restart every key loads from its moved row.
//
// What the worker owes the stored keys depends on the fixture's age
// (`copyFixture`: this file runs at three), and each test says which:
// - under an hour, `open/cur`'s window is still open; after, its overdue
//   alarm delivers it at load;
// - under a day, `done/cur` remembers its producer key; after, the same key
//   is a new event;
// - under a week, `done/cur` is the same life of the key; after, its overdue
//   alarm collects it at load (idle past its retention) and it starts anew.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, stateDir, client, until, lifeOf, keyLabel } from "./harness.mjs";
import { copyFixture, HOUR, DAY } from "./fixture.mjs";

// The topics' quiet period, dedupe window and retention, as the fixture's release had them.
const QUIET = HOUR;
const DEDUPE = DAY;
const RETENTION = 7 * DAY;

let edge, rx, state, api, fixture;
/** done/cur's last seq before the restart. */
let doneSeq;

const start = async () => {
  const target = `${rx.url}/hook`;
  const topic = { target, wait_ms: QUIET, payload: "all", dedupe_window_ms: DEDUPE, retention_ms: RETENTION };
  edge = await startEdge({ persist: state.dir, topics: { open: topic, done: topic } });
  api = client(edge.url);
};

before(async () => {
  rx = await startReceiver(() => 200);
  state = stateDir();
  fixture = copyFixture("snapshot-table-state", state.dir, { bounds: [QUIET, DEDUPE, RETENTION] });
  await start();
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

const of = (topic) => rx.of("cur").filter((d) => d.body.topic === topic);
const remembered = () => fixture.age < DEDUPE;
const collected = () => fixture.age >= RETENTION;

test("an idle key goes on from its moved snapshot: the same life and the next seq within its retention, its producer key remembered within the day", async () => {
  if (collected()) {
    // Its retention passed while it was stored: the overdue alarm deletes it at load.
    const line = `"lull":"collected","topic":"done","key":"${keyLabel("cur")}"`;
    await until(() => edge.logs.some((l) => l.includes(line)), 10_000, "done/cur collected at load");
  }
  const status = (await api.status("done", "cur")).json;
  assert.equal(status.state, "idle", JSON.stringify(status));
  assert.equal(status.event_rows, collected() ? 0 : 1, "its one event's row (none once collected); the snapshot's row is not an event row");
  const repeat = await api.event("done", "cur", { n: 1 }, { "idempotency-key": "made-1" });
  assert.equal(repeat.status, 202);
  if (remembered()) assert.equal(repeat.json.seq, 1, "within the day, the producer key's first answer again: nothing stored");
  else assert.equal(repeat.json.seq, collected() ? 1 : 2, "after the day, a new event");
  const next = await api.event("done", "cur", { n: 2 });
  assert.equal(next.json.seq, repeat.json.seq + 1, JSON.stringify(next.json));
  doneSeq = next.json.seq;
  assert.equal((await api.flush("done", "cur")).status, 200);
  await until(() => of("done").length === 1, 10_000, "done/cur delivered");
  const [delivery] = of("done");
  assert.deepEqual(delivery.body.events, remembered() ? [{ n: 2 }] : [{ n: 1 }, { n: 2 }], "the repeat is stored only after the day");
  if (collected()) {
    assert.notEqual(lifeOf(delivery.idempotencyKey), lifeOf(fixture.made.idempotency_key), "a new incarnation");
    assert.match(delivery.idempotencyKey, /\.1$/, "its first window");
  } else {
    assert.equal(lifeOf(delivery.idempotencyKey), lifeOf(fixture.made.idempotency_key), "the same incarnation");
    assert.match(delivery.idempotencyKey, /\.2$/, "the next window");
  }
});

test("an open window of the release before is delivered whole: at load once its quiet period passed, else with the key's next event", async () => {
  if (fixture.age >= QUIET) {
    await until(() => of("open").length === 1, 10_000, "the overdue window delivered at load");
    assert.deepEqual(of("open")[0].body.events, [{ n: 1 }, { n: 2 }, { n: 3 }]);
  }
  const next = await api.event("open", "cur", { n: 4 });
  assert.equal(next.json.seq, 4, "seqs go on");
  assert.equal((await api.flush("open", "cur")).status, 200);
  await until(() => of("open").reduce((n, d) => n + d.body.count, 0) === 4, 10_000, "all four events delivered");
  const windows = of("open").map((d) => d.body.events);
  assert.deepEqual(windows, fixture.age >= QUIET ? [[{ n: 1 }, { n: 2 }, { n: 3 }], [{ n: 4 }]] : [[{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]]);
});

test("a new key's storage is a page smaller than the release before's: one table, not two", async () => {
  assert.equal((await api.event("done", "two", { n: 1 })).status, 202);
  const bytes = (await api.status("done", "two")).json.database_bytes;
  assert.equal(bytes, fixture.made.one_event_database_bytes - 4096, `${bytes} B here, ${fixture.made.one_event_database_bytes} B then, for one event`);
});

test("after a restart, every key loads from its moved snapshot", async () => {
  const [first] = of("done");
  await edge.stop();
  await start();
  const next = await api.event("done", "cur", { n: 3 });
  assert.equal(next.status, 202, JSON.stringify(next.json));
  assert.equal(next.json.seq, doneSeq + 1);
  assert.equal((await api.flush("done", "cur")).status, 200);
  await until(() => of("done").length === 2, 10_000, "done/cur's next window delivered");
  assert.equal(lifeOf(of("done")[1].idempotencyKey), lifeOf(first.idempotencyKey), "still the same incarnation");
  assert.equal((await api.event("open", "cur", { n: 5 })).json.seq, 5);
  assert.equal((await api.event("done", "one", { n: 2 })).json.seq, 2, "done/one goes on from its moved snapshot (moved at its first load: its overdue alarm's, or this event's)");
});
