// What a delivered event costs in rows written, all-in (accept, delivery,
// cleanup), as SQLite counted them (the sum of each statement's rowsWritten).
// Windows of 10 events (max_batch), each delivered before the next begins:
// 10 event rows + the snapshot that marks the delivery begun + the one that
// records its outcome; a delivered event's row is reused, never deleted; the
// key's first event also writes its first snapshot. A window closed by its
// quiet period costs the same: its fire is stored with its begun, unless the
// key had to ask its topic's object about the target first.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, stateDir, client, until } from "./harness.mjs";

const WINDOWS = 10;
const EACH = 10;
let edge, rx, state, api;

before(async () => {
  rx = await startReceiver(() => 200);
  state = stateDir();
  const topic = (payload) => ({ target: `${rx.url}/hook`, wait_ms: 60_000, payload, max_batch: EACH });
  const quiet = { target: `${rx.url}/hook`, wait_ms: 200 };
  edge = await startEdge({ persist: state.dir, topics: { all: topic("all"), last: topic("last"), quiet } });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

for (const mode of ["all", "last"]) {
  test(`mode ${mode}, ${EACH} events per window: rows written per event, all-in, from SQLite`, async () => {
    for (let w = 0; w < WINDOWS; w++) {
      for (let i = 0; i < EACH; i++) assert.equal((await api.event(mode, "k", { w, i })).status, 202);
      await until(async () => {
        const s = (await api.status(mode, "k")).json;
        return s.state === "idle" && s.stats.succeeded === w + 1;
      }, 10_000, `window ${w + 1} delivered`);
    }
    const s = (await api.status(mode, "k")).json;
    const events = WINDOWS * EACH;
    const perEvent = s.io.rows_written / events;
    console.log(`# cost ${mode}: ${s.io.rows_written} rows for ${events} events = ${perEvent.toFixed(3)} per event; alarms ${s.io.alarms_set}`);
    assert.equal(s.stats.events, events);
    assert.equal(rx.of("k").filter((d) => d.body.topic === mode).length, WINDOWS);
    // (EACH + 2) rows per window, plus the key's first snapshot.
    assert.ok(s.io.rows_written <= WINDOWS * (EACH + 2) + 1, `${s.io.rows_written} rows`);
    assert.equal(s.stored_events, 0);
  });
}

test("windows closed by their quiet period: the event, the begun and the outcome, from SQLite", async () => {
  const KEYS = 20;
  const keys = Array.from({ length: KEYS }, (_, i) => `q${i}`);
  // Sent together, so their windows close together: the isolate's copy of the target's state decides.
  const sent = await Promise.all(keys.map((k) => api.event("quiet", k, { k })));
  assert.deepEqual(sent.map((r) => r.status), keys.map(() => 202));
  await until(async () => rx.deliveries.filter((d) => d.body.topic === "quiet").length === KEYS, 15_000, "every window delivered");
  const rows = [];
  for (const k of keys) {
    const s = (await until(async () => {
      const s = (await api.status("quiet", k)).json;
      return s.state === "idle" && s.stats.succeeded === 1 && s;
    }, 10_000, `${k} idle`));
    rows.push(s.io.rows_written);
  }
  // Each key that asked its topic's object for the target's state stored its fire before asking.
  const asked = (await api.call("GET", "/v1/topics/quiet")).json.requests.target ?? 0;
  const total = rows.reduce((a, b) => a + b, 0);
  console.log(`# cost quiet: ${total} rows for ${KEYS} single-event windows; target asked ${asked} times; per key ${rows}`);
  assert.ok(asked < KEYS / 2, `the copy decided most deliveries: asked ${asked}`);
  // Per key: the event and the key's first snapshot, the begun, the outcome.
  assert.ok(total <= KEYS * 4 + asked, `${total} rows`);
});
