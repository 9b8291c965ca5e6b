// Storage written by the first release (schema 1: every event row carried the
// key's whole state) loads in this one: the fixture is a Miniflare state
// directory the first release's worker left (a key with an open window of
// three events; a key with two dead letters). The keys keep their windows,
// events, dead letters and idempotency keys, and go on from there.
//
// The open window waits an hour of quiet from when the fixture was made
// (`copyFixture`: this file runs at three ages): under an hour old it is still
// open; older, its overdue alarm delivers it at load. Dead letters are kept
// at any age (a key holding them is never idle, so never collected).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, stateDir, client, until } from "./harness.mjs";
import { copyFixture, HOUR } from "./fixture.mjs";

// The open window's quiet period, as stored with it (schema 1 kept the policy).
const QUIET = HOUR;

let edge, rx, state, api, fixture;

before(async () => {
  rx = await startReceiver(() => 200);
  state = stateDir();
  fixture = copyFixture("schema-1-state", state.dir, { bounds: [QUIET] });
  edge = await startEdge({
    persist: state.dir,
    topics: {
      open: { target: `${rx.url}/hook`, wait_ms: QUIET, payload: "all" },
      dead: { target: `${rx.url}/hook`, wait_ms: 10, payload: "all", retry: { max_attempts: 1 } },
    },
  });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

test("an open window written by schema 1 is delivered whole (at load once its quiet period passed, else when flushed), under its old idempotency key, and the key goes on", async () => {
  if (fixture.age < QUIET) {
    const status = (await api.status("open", "doc")).json;
    assert.equal(status.state, "open", JSON.stringify(status));
    assert.deepEqual([status.open.window, status.open.span.first, status.open.span.last], [1, 1, 3], JSON.stringify(status));
    assert.equal((await api.flush("open", "doc")).status, 200);
  }
  const [d] = await rx.waitFor(1, 10_000, "doc");
  assert.equal((await api.status("open", "doc")).json.incarnation, null, "a key from before incarnations keeps its idempotency keys");
  assert.deepEqual(d.body.events, [{ n: 1 }, { n: 2 }, { n: 3 }]);
  assert.equal(d.idempotencyKey, "open/doc/1");
  await until(async () => (await api.status("open", "doc")).json.state === "idle");
  const next = await api.event("open", "doc", { n: 4 });
  assert.deepEqual(next.json, { window: 2, seq: 4 }, "ids go on");
});

test("dead letters written by schema 1 are listed, and replayed with their events", async () => {
  const status = (await api.status("dead", "dead")).json;
  assert.equal(status.dead_letter_count, 2, JSON.stringify(status));
  const page = (await api.call("GET", "/v1/topics/dead/keys/dead/dead-letters?limit=1")).json;
  assert.deepEqual([page.dead_letters.map((d) => d.window), page.count, page.next_after], [[1], 2, 1]);
  assert.equal((await api.call("POST", "/v1/topics/dead/keys/dead/dead-letters/retry")).status, 200);
  const got = await rx.waitFor(2, 10_000, "dead");
  assert.deepEqual(got.map((d) => [d.idempotencyKey, d.body.reason, d.body.events]), [
    ["dead/dead/1", "replay", [{ d: 1 }]],
    ["dead/dead/2", "replay", [{ d: 2 }]],
  ]);
  const done = await until(async () => {
    const s = (await api.status("dead", "dead")).json;
    return s.state === "idle" && s;
  });
  assert.deepEqual([done.dead_letter_count, done.stored_events], [0, 0]);
});
