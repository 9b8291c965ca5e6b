// Storage written before event rows carried their length (the `bytes`
// column, read at load instead of every body) loads in this one: the fixture
// is a Miniflare state directory the previous release's worker left (an open
// window of three events under `all`; one of four events under `last`, each
// in its own row then). The column is added and filled once; the windows are
// delivered whole and the keys go on, under the window bounds of this release.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, stateDir, client, until, lifeOf } from "./harness.mjs";
import { copyFixture, HOUR } from "./fixture.mjs";

// The windows' quiet period, as the fixture's release had it.
const QUIET = HOUR;

let edge, rx, state, api, fixture;

/** The worker on the state directory, with the fixture's topics (again after a restart). */
async function start() {
  const target = `${rx.url}/hook`;
  edge = await startEdge({
    persist: state.dir,
    topics: {
      open: { target, wait_ms: QUIET, payload: "all" },
      last: { target, wait_ms: QUIET, payload: "last" },
    },
  });
  api = client(edge.url);
}

before(async () => {
  rx = await startReceiver(() => 200);
  state = stateDir();
  fixture = copyFixture("schema-2-state", state.dir, { bounds: [QUIET] });
  await start();
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

// The fixture's windows wait an hour of quiet from when the fixture was made
// (`copyFixture`: this file runs at three ages): once that has passed, the
// overdue alarm delivers them at load; else they are still open and the key's
// next event joins them. Either way every event is delivered once, in order,
// and the key goes on with the next seq.
const open = () => rx.of("pre").filter((d) => d.body.topic === "open");
const last = () => rx.of("pre").filter((d) => d.body.topic === "last");

test("an `all` window stored before the bytes column is delivered whole, and the key goes on", async () => {
  if (fixture.age >= QUIET) {
    await until(() => open().length === 1 && last().length === 1, 10_000, "both overdue windows delivered at load");
  } else {
    const status = (await api.status("open", "pre")).json;
    assert.equal(status.state, "open", JSON.stringify(status));
    assert.deepEqual([status.open.window, status.open.span.first, status.open.span.last], [1, 1, 3], JSON.stringify(status));
  }
  const next = await api.event("open", "pre", { n: 4 });
  assert.equal(next.json.seq, 4, "seqs go on");
  assert.equal((await api.flush("open", "pre")).status, 200);
  await until(() => open().reduce((n, d) => n + d.body.count, 0) === 4, 10_000, "all four events delivered");
  const windows = open().map((d) => d.body.events);
  assert.deepEqual(windows, fixture.age >= QUIET ? [[{ n: 1 }, { n: 2 }, { n: 3 }], [{ n: 4 }]] : [[{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]]);
  await until(async () => (await api.status("open", "pre")).json.state === "idle", 10_000, "open/pre idle");
});

test("a `last` window stored one row per event goes on under this release: its deliveries count every event", async () => {
  for (const n of [5, 6]) assert.equal((await api.event("last", "pre", { n })).status, 202);
  assert.equal((await api.flush("last", "pre")).status, 200);
  await until(() => last().reduce((n, d) => n + d.body.count, 0) === 6, 10_000, "all six events counted");
  assert.deepEqual(last().map((d) => [d.body.count, d.body.event.n]), fixture.age >= QUIET ? [[4, 4], [2, 6]] : [[6, 6]], "each window's count and its newest event");
  await until(async () => (await api.status("last", "pre")).json.state === "idle", 10_000, "last/pre idle");
  const after = (await api.status("last", "pre")).json;
  assert.ok(after.event_rows <= 6, `${after.event_rows} rows`);
  assert.equal(after.stored_events, 0);
});

// The release before kept a key's snapshot in a table of its own; this one
// moves it into the events table (row 0) at the key's first load. A restart
// then loads each key from the moved row: the same life of the key (its
// incarnation, in every delivery's idempotency key) and the next seq, where
// a key that had lost its snapshot would be refused (rows without a snapshot).
test("after a restart, migrated keys load from their moved snapshot: the same life of the key, the next seq", async () => {
  const life = (topic) => lifeOf(rx.of("pre").filter((d) => d.body.topic === topic).at(-1).idempotencyKey);
  const before = { open: life("open"), last: life("last") };
  await edge.stop();
  await start();
  const open = await api.event("open", "pre", { n: 5 });
  assert.equal(open.status, 202, JSON.stringify(open.json));
  assert.equal(open.json.seq, 5, "open/pre goes on from its moved snapshot");
  const last = await api.event("last", "pre", { n: 7 });
  assert.equal(last.status, 202, JSON.stringify(last.json));
  assert.equal(last.json.seq, 7, "last/pre goes on from its moved snapshot");
  for (const topic of ["open", "last"]) assert.equal((await api.flush(topic, "pre")).status, 200);
  await until(() => rx.of("pre").some((d) => d.body.topic === "open" && d.body.events?.some((e) => e.n === 5)), 10_000, "open/pre delivered");
  await until(() => rx.of("pre").some((d) => d.body.topic === "last" && d.body.event?.n === 7), 10_000, "last/pre delivered");
  assert.deepEqual({ open: life("open"), last: life("last") }, before, "the same incarnation before and after the restart");
});
