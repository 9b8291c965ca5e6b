// A key's windows have a size: a window that never goes quiet holds a
// bounded number of event rows under `payload: "last"` (counted by SQLite:
// the status's `event_rows` is `SELECT count(*)`), and a window fires `full`
// before an event would take it past `max_window_bytes` — the body a
// delivery builds stays bounded even with 1 MiB events and `max_batch` 100.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, client, until } from "./harness.mjs";

const MiB = 1024 * 1024;
let edge, rx, api;

before(async () => {
  rx = await startReceiver(() => 200);
  const target = `${rx.url}/hook`;
  edge = await startEdge({
    topics: {
      // Never quiet: a minute's quiet period, no max_wait_ms, room for 20,000 events.
      last: { target, wait_ms: 60_000, payload: "last", max_window_events: 100_000 },
      // 1 MiB events, 100 a batch: 8 MiB of events at most per window (the default).
      big: { target, wait_ms: 60_000, payload: "all", max_body_bytes: MiB, max_batch: 100 },
    },
  });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
});

test("20,000 events in one never-quiet `last` window hold a constant number of rows, and its delivery counts them all", async () => {
  const total = 20_000;
  const producers = 32;
  let next = 0;
  let newest = { seq: 0, n: -1 };
  let mostRows = 0;
  const window = new Set();
  const sample = async () => {
    const s = (await api.status("last", "k")).json;
    mostRows = Math.max(mostRows, s.event_rows);
  };
  await Promise.all(
    Array.from({ length: producers }, async () => {
      while (next < total) {
        const n = next++;
        const res = await api.event("last", "k", { n });
        assert.equal(res.status, 202, JSON.stringify(res.json));
        window.add(res.json.window);
        if (res.json.seq > newest.seq) newest = { seq: res.json.seq, n };
        if (n % 1_000 === 0) await sample();
      }
    }),
  );
  await sample();
  const s = (await api.status("last", "k")).json;
  console.log(`# never-quiet last window: ${total} events, at most ${mostRows} event rows (now ${s.event_rows})`);
  assert.deepEqual([...window], [1], "one window");
  assert.equal(s.open.span.last, total);
  // CHECKPOINT_ROWS (64) superseded rows before a snapshot frees them, the newest, and a free one.
  assert.ok(mostRows <= 66, `${mostRows} event rows`);
  assert.equal((await api.flush("last", "k")).status, 200);
  const [delivery] = await rx.waitFor(1, 30_000, "k");
  assert.equal(delivery.body.count, total);
  assert.equal(delivery.body.event.n, newest.n, "the window's last event");
});

test("a window fires `full` before an event would take it past max_window_bytes; that event opens the next", async () => {
  const pad = "x".repeat(1_000_000);
  const windows = [];
  for (let n = 0; n < 10; n++) {
    const res = await api.event("big", "b", { n, pad });
    assert.equal(res.status, 202, JSON.stringify(res.json));
    windows.push(res.json.window);
  }
  // 8 events of ~1 MB fit in 8 MiB; the 9th would pass it.
  assert.deepEqual(windows, [1, 1, 1, 1, 1, 1, 1, 1, 2, 2]);
  const [first] = await rx.waitFor(1, 30_000, "b");
  assert.equal(first.body.reason, "full");
  assert.equal(first.body.count, 8);
  assert.ok(first.raw.length <= 8 * MiB + 1_000, `${first.raw.length} bytes`);
  assert.equal((await api.flush("big", "b")).status, 200);
  const both = await rx.waitFor(2, 30_000, "b");
  assert.deepEqual(both[1].body.events.map((e) => e.n), [8, 9]);
  await until(async () => (await api.status("big", "b")).json.state === "idle", 10_000, "key b idle");
});
