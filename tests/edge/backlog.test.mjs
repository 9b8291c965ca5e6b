// A target down while one key builds a backlog of thousands of windows: the
// cost of accepting an event does not grow with it (latency, rows and bytes
// written, read from SQLite), the topic's bound answers 429 and stores nothing,
// and when the target returns the key drains every window, in order.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, stateDir, client, until } from "./harness.mjs";

const BOUND = 2_100; // max_pending_windows: queued windows (the run in flight is not counted)
let edge, rx, state, api;
let down = true;

before(async () => {
  rx = await startReceiver(() => (down ? 500 : 200));
  state = stateDir();
  edge = await startEdge({
    persist: state.dir,
    topics: {
      // One event per window; the first window retries while the rest queue behind it.
      b: { target: `${rx.url}/hook`, wait_ms: 50, payload: "all", max_batch: 1, max_pending_windows: BOUND,
           retry: { max_attempts: 1000, base_ms: 200, cap_ms: 200, jitter: "none" } },
    },
  });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

test("a backlog of 2,100 windows: accepting costs the same at the end as at the start; 429 past the bound; it drains in order", { timeout: 300_000 }, async () => {
  const io = async (key) => {
    const s = (await api.status("b", key)).json;
    return { rows: s.io.rows_written, bytes: s.database_bytes, queued: s.queued_count };
  };
  const timed = async (key, body) => {
    const t0 = performance.now();
    const res = await api.event("b", key, body);
    assert.equal(res.status, 202, `${key}: ${JSON.stringify(res.json)}`);
    return performance.now() - t0;
  };
  // Rows and bytes written by events `from..to` on key "k", from SQLite.
  const written = async (from, to) => {
    const before = await io("k");
    for (let n = from; n < to; n++) await timed("k", { n, pad: "x".repeat(80) });
    const after = await io("k");
    return { rows: after.rows - before.rows, bytes: after.bytes - before.bytes };
  };
  const BUILT = BOUND - 100;
  const first = await written(0, 100);
  await written(100, BUILT - 100);
  const last = await written(BUILT - 100, BUILT);
  // Latency with 2,000 windows queued vs with none, at the same moments (a
  // fresh key, events alternating), so the machine's load hits both alike.
  const backlogged = [];
  const fresh = [];
  for (let i = 0; i < 100; i++) {
    backlogged.push(await timed("k", { n: BUILT + i, pad: "x".repeat(80) }));
    fresh.push(await timed("fresh", { n: i, pad: "x".repeat(80) }));
  }
  let n = BUILT + 100;
  const report = { rows: [first.rows, last.rows], bytes: [first.bytes, last.bytes],
                   p50_ms: { fresh: median(fresh), backlogged: median(backlogged) } };
  console.log(`# backlog: first 100 vs last 100 events (rows, bytes), and accept p50 fresh vs 2,000 queued: ${JSON.stringify(report)}`);
  assert.ok(report.p50_ms.backlogged <= 1.5 * report.p50_ms.fresh + 1, `accept p50 grew: ${JSON.stringify(report.p50_ms)}`);
  // Each event writes its row and, as it fills a window while the first one
  // retries, that window's backlog row; the retries write their snapshots.
  assert.ok(report.rows[1] <= report.rows[0] + 10, `rows written grew: ${report.rows}`);
  assert.ok(report.rows[1] <= 2.5 * 100, `rows written per event: ${report.rows[1] / 100}`);
  assert.ok(report.bytes[1] <= 1.5 * report.bytes[0] + 8_192, `bytes written grew: ${report.bytes}`);

  // The bound: one more fills it (the retrying window is not counted); the
  // next is refused, with Retry-After, and changes nothing.
  await timed("k", { n, pad: "x".repeat(80) });
  n += 1;
  const full = await io("k");
  assert.equal(full.queued, BOUND);
  // The first window retries every 200 ms here, and each attempt writes its
  // snapshots: "nothing written" holds only between two reads with no attempt
  // begun or ended and no deadline served in between (same run, last delivery,
  // next deadline), so read again until so.
  // (An alarm that serves a deadline writes the snapshot even when nothing fires: the next deadline tells.)
  const lifecycle = (s) => JSON.stringify([s.run, s.last_delivery, s.next_deadline, s.open]);
  let quiet = false;
  for (let tries = 0; tries < 20 && !quiet; tries++) {
    const before = (await api.status("b", "k")).json;
    const refused = await api.event("b", "k", { n: "too many" });
    assert.equal(refused.status, 429, JSON.stringify(refused.json));
    assert.equal(refused.json.error.code, "too_many_pending");
    assert.ok(Number(refused.headers.get("retry-after")) >= 1);
    const afterRefusal = (await api.status("b", "k")).json;
    assert.equal(afterRefusal.stats.events, before.stats.events, "nothing accepted");
    assert.ok(afterRefusal.queued.length <= 10, "the status shows the oldest few, not all");
    quiet = lifecycle(afterRefusal) === lifecycle(before);
    if (quiet) assert.equal(afterRefusal.io.rows_written, before.io.rows_written, "nothing written");
  }
  assert.ok(quiet, "a refusal between two reads with no retry in between");

  // The target returns: every window is delivered once, in order.
  down = false;
  const done = await until(async () => {
    const s = await api.status("b", "k");
    return s.json.state === "idle" && s.json;
  }, 240_000, "the backlog drained");
  await until(async () => (await api.status("b", "fresh")).json.state === "idle", 60_000, "the fresh key drained");
  const ok = rx.of("k").filter((d, i, all) => all.findIndex((e) => e.idempotencyKey === d.idempotencyKey) === i);
  const delivered = ok.map((d) => d.body.events[0].n);
  assert.deepEqual(delivered, Array.from({ length: n }, (_, i) => i), "every event once, in order");
  assert.equal(done.stored_events, 0);
  assert.equal(done.stats.succeeded, n);
});
