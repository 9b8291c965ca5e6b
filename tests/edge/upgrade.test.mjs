// Storage written before event rows carried their length (the `bytes`
// column, read at load instead of every body) loads in this one: the fixture
// is a Miniflare state directory the previous release's worker left (an open
// window of three events under `all`; one of four events under `last`, each
// in its own row then). The column is added and filled once; the windows are
// delivered whole and the keys go on, under the window bounds of this release.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { cpSync } from "node:fs";
import { join } from "node:path";
import { startEdge, startReceiver, stateDir, client, until } from "./harness.mjs";

let edge, rx, state, api;

before(async () => {
  rx = await startReceiver(() => 200);
  state = stateDir();
  cpSync(join(import.meta.dirname, "fixtures/schema-2-state"), state.dir, { recursive: true });
  const target = `${rx.url}/hook`;
  edge = await startEdge({
    persist: state.dir,
    topics: {
      open: { target, wait_ms: 3_600_000, payload: "all" },
      last: { target, wait_ms: 3_600_000, payload: "last" },
    },
  });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

test("an open `all` window stored before the bytes column is delivered whole, and the key goes on", async () => {
  const status = (await api.status("open", "pre")).json;
  assert.deepEqual([status.open.window, status.open.span.first, status.open.span.last], [1, 1, 3], JSON.stringify(status));
  assert.equal(status.event_rows, 3);
  assert.deepEqual((await api.event("open", "pre", { n: 4 })).json, { window: 1, seq: 4 });
  assert.equal((await api.flush("open", "pre")).status, 200);
  const [d] = await rx.waitFor(1, 10_000, "pre");
  assert.deepEqual(d.body.events, [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
  await until(async () => (await api.status("open", "pre")).json.state === "idle", 10_000, "open/pre idle");
});

test("a `last` window stored one row per event goes on under this release: its delivery counts every event", async () => {
  const before = (await api.status("last", "pre")).json;
  assert.equal(before.event_rows, 4, JSON.stringify(before));
  for (const n of [5, 6]) assert.equal((await api.event("last", "pre", { n })).status, 202);
  assert.equal((await api.flush("last", "pre")).status, 200);
  await until(() => rx.of("pre").some((d) => d.body.topic === "last"), 10_000, "the last window delivered");
  const d = rx.of("pre").find((d) => d.body.topic === "last");
  assert.deepEqual([d.body.count, d.body.event], [6, { n: 6 }]);
  await until(async () => (await api.status("last", "pre")).json.state === "idle", 10_000, "last/pre idle");
  const after = (await api.status("last", "pre")).json;
  assert.ok(after.event_rows <= 6, `${after.event_rows} rows`);
  assert.equal(after.stored_events, 0);
});
