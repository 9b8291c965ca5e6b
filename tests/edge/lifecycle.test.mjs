// Key lifecycle: an idle key (nothing open, queued, running or dead-lettered)
// is deleted — rows, snapshot, remembered producer keys, alarm — once its
// topic's retention has passed since its last change. A key that comes back
// starts a new life: window ids from 1 again, under a new incarnation, so a
// receiver deduping on Idempotency-Key never sees one twice. And a key that
// delivered holds nothing open, so the runtime lets its object go as it lets
// any idle one go, and its delivery's connection goes back to the runtime's
// pool for the next one.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { startEdge, startReceiver, stateDir, client, until, sleep, idempotencyKeyPattern } from "./harness.mjs";

const RETENTION = 1_500;
// Far longer than the runtime keeps an idle object (about 10 s on workerd).
const DELIVERY_TIMEOUT = 300_000;
let edge, rx, state, api;

before(async () => {
  rx = await startReceiver((d) => (d.body.key === "open-body" ? "open body" : 200));
  state = stateDir();
  edge = await startEdge({
    persist: state.dir,
    topics: {
      gc: { target: `${rx.url}/hook`, wait_ms: 50, payload: "all", retention_ms: RETENTION, dedupe_window_ms: 1_000 },
      held: { target: `${rx.url}/hook`, wait_ms: 50, payload: "all", delivery_timeout_ms: DELIVERY_TIMEOUT },
    },
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

/** The key objects' SQLite files under the state directory. */
function objectFiles() {
  const root = join(state.dir, "do");
  return readdirSync(root)
    .filter((d) => d.endsWith("-KeyWindow"))
    .flatMap((d) => readdirSync(join(root, d)).filter((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite").map((f) => join(root, d, f)));
}

/** This process's children (the runtime): their pids, read from `/proc`. */
function children() {
  return readdirSync("/proc").filter((p) => {
    if (!/^\d+$/.test(p)) return false;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === process.pid;
    } catch {
      return false;
    }
  });
}

/** Whether one of `pids` holds `file` open (told by device and inode: no path spelling to match). */
function heldOpen(pids, file) {
  const { dev, ino } = statSync(file);
  return pids.some((pid) => {
    try {
      return readdirSync(`/proc/${pid}/fd`).some((fd) => {
        try {
          const open = statSync(`/proc/${pid}/fd/${fd}`);
          return open.dev === dev && open.ino === ino;
        } catch {
          return false;
        }
      });
    } catch {
      return false;
    }
  });
}

for (const [key, answer] of [
  ["k", "answers at once"],
  ["open-body", "answers with headers and holds its body open"],
]) {
  test(
    `a key that delivered holds nothing open when the target ${answer}: its object is let go as an idle one is`,
    { skip: !existsSync("/proc/self/fd") && "reads the runtime's open files from /proc" },
    async () => {
      const existing = new Set(objectFiles());
      assert.equal((await api.event("held", key, { n: 1 })).status, 202);
      await until(async () => (await api.status("held", key)).json.stats.succeeded === 1, 10_000, `${key} delivered`);
      const delivered = Date.now();
      const [file] = objectFiles().filter((f) => !existing.has(f));
      assert.ok(file, "the key's storage file");
      const runtime = children();
      // The object is in memory now (the probe sees what it means to see) ...
      assert.ok(heldOpen(runtime, file), "the object holds its storage open after its delivery");
      // ... and is let go once idle (about 10 s on workerd), well within this bound: a timer
      // left running (the delivery's timeout), or a body held open, would keep it longer.
      await until(
        async () => {
          until.last = { held_open: file, since_delivery_ms: Date.now() - delivered };
          if (!heldOpen(runtime, file)) return true;
          await sleep(500);
          return false;
        },
        45_000,
        "the object let go",
      );
    },
  );
}

test("deliveries one after another reuse the receiver's connection", async () => {
  const KEYS = 10;
  for (let i = 0; i < KEYS; i++) {
    const key = `pool-${i}`;
    assert.equal((await api.event("held", key, { i })).status, 202);
    // Answered, not only arrived: the next delivery begins after this one ended.
    await until(async () => (await api.status("held", key)).json.stats.succeeded === 1, 10_000, `${key} delivered`);
  }
  const connections = new Set(rx.deliveries.filter((d) => d.body.key.startsWith("pool-")).map((d) => d.connection));
  // One connection would do; a few allow for the runtime's pool. A new one per delivery is the defect.
  assert.ok(connections.size <= KEYS / 2, `${KEYS} deliveries came over ${connections.size} connections`);
});
