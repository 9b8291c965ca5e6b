// What a delivered event costs in rows written, all-in (accept, delivery,
// cleanup), as SQLite counted them (the sum of each statement's rowsWritten).
// Windows of 10 events (max_batch), each delivered before the next begins:
// 10 event rows + the snapshot that marks the delivery begun + the one that
// records its outcome; a delivered event's row is reused, never deleted; the
// key's first event also writes its first snapshot.
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
  edge = await startEdge({ persist: state.dir, topics: { all: topic("all"), last: topic("last") } });
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
