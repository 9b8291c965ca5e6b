// DESIGN.md's reference scenarios 1-5 on a real workerd, times scaled by 0.03
// (wait 10 s -> 300 ms, max_wait 60 s -> 1.5 s, events 3 s apart -> 90 ms).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, stateDir, client, sleep } from "./harness.mjs";

const WAIT = 300;
const MAX_WAIT = 1500;
// The alarm, the delivery and the receiver on a busy 2-core machine.
const SLACK = 250;
let edge, rx, state, api;
const slow = new Map(); // key -> ms the receiver takes to answer its first delivery

before(async () => {
  rx = await startReceiver((d) => {
    const delayMs = slow.get(d.body.key);
    slow.delete(d.body.key);
    return { status: 200, delayMs: delayMs ?? 0 };
  });
  state = stateDir();
  const topic = (payload) => ({ target: `${rx.url}/hook`, wait_ms: WAIT, max_wait_ms: MAX_WAIT, payload });
  edge = await startEdge({ persist: state.dir, topics: { all: topic("all"), last: topic("last"), first: topic("first") } });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

async function send(topic, key, body) {
  const res = await api.event(topic, key, body);
  assert.equal(res.status, 202, JSON.stringify(res.json));
  return res.json;
}

function assertSigned(d, topic, key, window) {
  assert.equal(d.idempotencyKey, `${topic}/${key}/${window}`);
  assert.equal(d.attempt, 1);
  assert.ok(d.verified, "signature verifies with the secret");
}

test("1: one event runs once, `wait` after it", async () => {
  const t0 = Date.now();
  const accepted = await send("all", "s1", { n: 1 });
  assert.deepEqual(accepted, { window: 1, seq: 1 });
  const [d] = await rx.waitFor(1, 5_000, "s1");
  assert.deepEqual(
    { reason: d.body.reason, count: d.body.count, window: d.body.window, events: d.body.events },
    { reason: "quiet", count: 1, window: 1, events: [{ n: 1 }] },
  );
  assertSigned(d, "all", "s1", 1);
  const delay = d.at - d.body.first_at;
  assert.ok(delay >= WAIT && delay <= WAIT + SLACK, `delivered ${delay} ms after the event`);
  assert.ok(d.body.first_at >= t0 - 5);
  await sleep(WAIT + SLACK);
  assert.equal(rx.of("s1").length, 1, "exactly once");
});

test("2: events at 0, 3, 7 s run once, `wait` after the last, with all (or the last, or the first) payloads", async () => {
  for (const [i, gap] of [0, 90, 120].entries()) {
    await sleep(gap);
    for (const topic of ["all", "last", "first"]) await send(topic, "s2", { n: i });
  }
  await rx.waitFor(3, 5_000, "s2");
  await sleep(WAIT + SLACK);
  const got = rx.of("s2");
  assert.equal(got.length, 3, "one delivery per topic");
  const by = Object.fromEntries(got.map((d) => [d.body.topic, d]));
  assert.deepEqual(by.all.body.events, [{ n: 0 }, { n: 1 }, { n: 2 }]);
  assert.deepEqual(by.last.body.event, { n: 2 });
  assert.deepEqual(by.first.body.event, { n: 0 });
  for (const d of got) {
    assert.equal(d.body.reason, "quiet");
    assert.equal(d.body.count, 3);
    assertSigned(d, d.body.topic, "s2", 1);
    const quiet = d.at - d.body.last_at;
    assert.ok(quiet >= WAIT && quiet <= WAIT + SLACK, `${d.body.topic}: ${quiet} ms after the last event`);
  }
});

test("3: events every 5 s for 65 s: max_wait forces a run, the rest run once after they go quiet", async () => {
  const start = Date.now();
  let n = 0;
  while (Date.now() - start <= 1950) {
    await send("all", "s3", { n: n++ });
    await sleep(150 - ((Date.now() - start) % 150));
  }
  const [first, second] = await rx.waitFor(2, 5_000, "s3");
  await sleep(WAIT + SLACK);
  assert.equal(rx.of("s3").length, 2, "exactly two runs");
  assert.equal(first.body.reason, "max_wait");
  const forced = first.at - first.body.first_at;
  assert.ok(forced >= MAX_WAIT && forced <= MAX_WAIT + SLACK, `max_wait fire ${forced} ms after the first event`);
  assert.equal(second.body.reason, "quiet");
  assert.ok(second.at - second.body.last_at >= WAIT, "the rest waited for quiet");
  assert.deepEqual(
    [...first.body.events, ...second.body.events],
    Array.from({ length: n }, (_, i) => ({ n: i })),
    "every event once, in order, never starved",
  );
  assert.deepEqual([first.body.window, second.body.window], [1, 2]);
  assertSigned(second, "all", "s3", 2);
});

test("4: an event after a run starts a fresh window and runs again", async () => {
  await send("all", "s4", { n: 1 });
  await rx.waitFor(1, 5_000, "s4");
  const again = await send("all", "s4", { n: 2 });
  assert.equal(again.window, 2);
  const [a, b] = await rx.waitFor(2, 5_000, "s4");
  assert.deepEqual([a.body.window, b.body.window], [1, 2]);
  assert.deepEqual(b.body.events, [{ n: 2 }]);
  assertSigned(b, "all", "s4", 2);
});

test("5: events during a run make exactly one follow-up run", async () => {
  slow.set("s5", 800);
  await send("all", "s5", { n: 0 });
  await rx.waitFor(1, 5_000, "s5"); // the run has started; it answers in 800 ms
  const during = [];
  for (let i = 1; i <= 3; i++) during.push(await send("all", "s5", { n: i }));
  assert.ok(during.every((a) => a.window === 2), "they join the next window");
  const status = await api.status("all", "s5");
  assert.equal(status.json.state, "delivering");
  const [, follow] = await rx.waitFor(2, 5_000, "s5");
  await sleep(WAIT + SLACK);
  assert.equal(rx.of("s5").length, 2, "exactly one follow-up");
  assert.deepEqual(follow.body.events, [{ n: 1 }, { n: 2 }, { n: 3 }]);
  assert.ok(follow.at >= rx.of("s5")[0].at + 800, "not before the first run ended");
  const end = await api.status("all", "s5");
  assert.equal(end.json.state, "idle");
  assert.equal(end.json.stored_events, 0, "delivered rows are deleted");
  assert.equal(end.json.stats.succeeded, 2);
  assert.equal(end.json.stats.coalesced, 2);
});
