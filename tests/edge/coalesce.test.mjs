// Coalescing before the object: single events for one key that arrive while
// that key's object request is in flight ride the next one, as one batch (one
// transaction). Each producer still gets its own answer (its own event's seq
// and window, or the error its batch got), every accepted event is delivered
// exactly once, and a topic with `coalesce: false` sends one object request
// per event. Batches' shares of a key ride the same way, each whole. The worker
// logs one `coalesced` line per batch it sends (events, producer requests,
// status): how the tests count object requests.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, stateDir, client, until, keyLabel } from "./harness.mjs";

const CLIENT_SECRET = "a-client-token-secret-for-the-coalescing-tests-0123";
let edge, rx, state, api;
const logs = [];
/** Keys whose deliveries the receiver refuses (a jam), until removed. */
const refusing = new Set();

before(async () => {
  rx = await startReceiver((d) => (refusing.has(d.body.key) ? 500 : 200));
  state = stateDir();
  const target = `${rx.url}/hook`;
  edge = await startEdge({
    persist: state.dir,
    logs,
    vars: { LULL_CLIENT_TOKEN_SECRET: CLIENT_SECRET },
    topics: {
      hot: { target, wait_ms: 200, max_wait_ms: 1_000, payload: "all", max_batch: 100, client_tokens: true },
      solo: { target, wait_ms: 200, max_wait_ms: 1_000, payload: "all", coalesce: false },
      // One event a window, at most 8 windows held behind a failing run that
      // retries every 2 s: a batch of events that would need more is refused whole.
      jam: {
        target,
        wait_ms: 60_000,
        payload: "all",
        max_batch: 1,
        max_pending_windows: 8,
        retry: { max_attempts: 100, base_ms: 2_000, cap_ms: 2_000, jitter: "none" },
      },
    },
  });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

/** The `coalesced` lines the worker logged for (topic, key): one per batch sent. */
const batches = (topic, key) =>
  logs
    .filter((m) => m.includes('"lull":"coalesced"'))
    .map((m) => JSON.parse(m.slice(m.indexOf("{"))))
    .filter((l) => l.topic === topic && l.key === keyLabel(key));

/** Post `body` to (topic, key) from a producer of its own; `headers` more headers. */
const post = (topic, key, body, headers = {}, via = api) => via.event(topic, key, body, headers);

/** Every delivered window of `key` once (a retry repeats its idempotency key), in window order. */
const windowsOf = (key) =>
  [...new Map(rx.of(key).map((d) => [d.idempotencyKey, d])).values()].sort((a, b) => a.body.window - b.body.window);

test("concurrent producers on one key: each gets its own event's seq and window; each event is delivered once; fewer object requests than events", async () => {
  const key = "many";
  const producers = 128;
  const each = 4;
  const answers = [];
  await Promise.all(
    Array.from({ length: producers }, async (_, p) => {
      for (let i = 0; i < each; i++) {
        const res = await post("hot", key, { p, i });
        assert.equal(res.status, 202, res.text);
        assert.match(res.text, /^\{"seq":\d+,"window":\d+\}$/, "the single-event answer, byte for byte");
        assert.equal(res.headers.get("content-type"), "application/json");
        answers.push({ id: `${p}/${i}`, ...res.json });
      }
    }),
  );
  const events = producers * each;
  await until(async () => windowsOf(key).reduce((n, d) => n + d.body.count, 0) >= events, 20_000, "every window delivered");
  // A fresh key's windows hold its seqs in order: the n-th event delivered has seq n.
  const delivered = windowsOf(key).flatMap((d) => d.body.events.map((e) => ({ id: `${e.p}/${e.i}`, window: d.body.window })));
  assert.equal(delivered.length, events, "every accepted event delivered, none twice");
  const at = new Map(delivered.map((e, n) => [e.id, { seq: n + 1, window: e.window }]));
  assert.equal(at.size, events, "no event in two windows");
  for (const a of answers) assert.deepEqual({ seq: a.seq, window: a.window }, at.get(a.id), `${a.id}'s answer is its own event's`);
  const status = (await api.status("hot", key)).json;
  assert.equal(status.stats.events, events);
  const sent = batches("hot", key);
  const requests = events - sent.reduce((n, b) => n + b.events - 1, 0);
  assert.ok(sent.length > 0 && requests < events, `${requests} object requests for ${events} events`);
  assert.ok(sent.every((b) => b.events >= 2 && b.events <= 256 && b.status === 202), JSON.stringify(sent.slice(0, 5)));
  console.log(`# ${events} events in ${requests} object requests (${sent.length} coalesced batches, largest ${Math.max(...sent.map((b) => b.events))})`);
});

test("batches' shares of one key ride together with single events, each share whole: every item its own seq, contiguous within its share; each event delivered once", async () => {
  const key = "shares";
  const batchers = 48;
  const rounds = 4;
  const per = 10;
  const singles = 32;
  const answers = [];
  await Promise.all([
    ...Array.from({ length: batchers }, async (_, b) => {
      for (let r = 0; r < rounds; r++) {
        const events = Array.from({ length: per }, (_, i) => ({ key, event: { id: `b${b}/${r}/${i}` } }));
        const res = await api.call("POST", "/v1/topics/hot/events:batch", { events });
        assert.equal(res.status, 207, res.text);
        const results = res.json.results;
        assert.equal(results.length, per);
        for (const [i, x] of results.entries()) {
          assert.equal(x.status, 202, JSON.stringify(x));
          answers.push({ id: `b${b}/${r}/${i}`, seq: x.seq, window: x.window });
        }
        const seqs = results.map((x) => x.seq);
        assert.deepEqual(seqs, seqs.map((_, i) => seqs[0] + i), `a share is never split: ${seqs}`);
      }
    }),
    ...Array.from({ length: singles }, async (_, p) => {
      for (let r = 0; r < rounds; r++) {
        const res = await post("hot", key, { id: `s${p}/${r}` });
        assert.equal(res.status, 202, res.text);
        assert.match(res.text, /^\{"seq":\d+,"window":\d+\}$/, "the single-event answer, byte for byte");
        answers.push({ id: `s${p}/${r}`, ...res.json });
      }
    }),
  ]);
  const events = batchers * rounds * per + singles * rounds;
  await until(async () => windowsOf(key).reduce((n, d) => n + d.body.count, 0) >= events, 30_000, "every window delivered");
  const delivered = windowsOf(key).flatMap((d) => d.body.events.map((e) => ({ id: e.id, window: d.body.window })));
  assert.equal(delivered.length, events, "every accepted event delivered, none twice");
  const at = new Map(delivered.map((e, n) => [e.id, { seq: n + 1, window: e.window }]));
  assert.equal(at.size, events, "no event in two windows");
  for (const a of answers) assert.deepEqual({ seq: a.seq, window: a.window }, at.get(a.id), `${a.id}'s answer is its own event's`);
  // Object requests: one per coalesced batch the worker logged, one per producer request that went alone.
  const requests = batchers * rounds + singles * rounds;
  const sent = batches("hot", key);
  const served = requests - sent.reduce((n, b) => n + b.requests - 1, 0);
  assert.ok(sent.some((b) => b.singles >= 1 && b.requests - b.singles >= 1), `shares rode with single events: ${JSON.stringify(sent.slice(0, 5))}`);
  assert.ok(sent.some((b) => b.requests - b.singles >= 2), "shares rode with shares");
  assert.ok(served < requests / 2, `${served} object requests for ${requests} producer requests`);
  // The object's own count agrees: it served at least those (its count adds alarms and this status read).
  assert.ok((await api.status("hot", key)).json.io.requests - 1 >= served);
  console.log(`# ${events} events from ${requests} producer requests in ${served} object requests`);
});

test("a refused batch fails exactly its own producers: its events are not stored, others' are, on its key and on others", async () => {
  // Try a fresh jam key until a coalesced batch of it was refused (the arrivals' timing decides).
  for (let attempt = 1; ; attempt++) {
    const key = `jam-${attempt}`;
    refusing.add(key);
    assert.equal((await post("jam", key, { n: "first" })).status, 202); // fires, fails, retries every 2 s
    await until(async () => (await api.status("jam", key)).json.run?.retry_at, 10_000, "the run waits to retry");
    const answers = [];
    const wave = (k, topic, count) =>
      Array.from({ length: count }, async (_, p) => answers.push({ key: k, p, res: await post(topic, k, { p }) }));
    // The jam key's events and other keys' at once (a free key of the topic holds 8 pending windows too).
    await Promise.all([...wave(key, "jam", 64), ...wave(`${key}-free`, "jam", 6), ...wave(`${key}-hot`, "hot", 32)]);
    // Right after the wave (and any refusal in it), other keys still take events.
    for (const [topic, other] of [["hot", `${key}-hot`], ["jam", `${key}-free`]]) {
      const res = await post(topic, other, { after: true });
      assert.equal(res.status, 202, `another key, after the wave: ${res.text}`);
    }
    const mine = answers.filter((a) => a.key === key);
    const others = answers.filter((a) => a.key !== key);
    for (const a of others) assert.equal(a.res.status, 202, `another key's producer: ${a.res.text}`);
    const accepted = mine.filter((a) => a.res.status === 202);
    const refused = mine.filter((a) => a.res.status !== 202);
    for (const a of refused) {
      assert.equal(a.res.status, 429, a.res.text);
      assert.equal(a.res.json.error.code, "too_many_pending");
      assert.ok(Number(a.res.headers.get("retry-after")) >= 1, "Retry-After, as a single refusal has");
    }
    const failed = batches("jam", key).filter((b) => b.status === 429);
    if (failed.length === 0 || accepted.length === 0) {
      // Nothing to judge: no coalesced batch was refused, or none accepted beside one.
      assert.ok(attempt < 5, `no refused batch beside an accepted event in ${attempt} tries`);
      refusing.delete(key);
      continue;
    }
    assert.ok(failed.reduce((n, b) => n + b.events, 0) <= refused.length, "a refused batch's producers were all refused");
    console.log(`# try ${attempt}: ${accepted.length} accepted, ${refused.length} refused (${failed.length} refused batches)`);
    // The key still takes what fits: single events one by one, until one is refused,
    // which looks as a refused member's answer did.
    let lone;
    for (let n = 0; n < 10; n++) {
      lone = await post("jam", key, { p: 1000 + n });
      if (lone.status !== 202) break;
      accepted.push({ key, p: 1000 + n, res: lone });
    }
    assert.equal(lone.status, 429);
    assert.deepEqual(Object.keys(lone.json.error).sort(), Object.keys(refused[0].res.json.error).sort());
    assert.equal(lone.json.error.code, refused[0].res.json.error.code);
    assert.ok(Number(lone.headers.get("retry-after")) >= 1);
    const stored = (await api.status("jam", key)).json.stats.events;
    assert.equal(stored, 1 + accepted.length, "exactly the accepted producers' events were stored");
    // Let the jam clear: exactly the accepted events are delivered, each once.
    refusing.delete(key);
    await until(async () => {
      const s = (await api.status("jam", key)).json;
      return s.state === "idle" && s.stored_events === 0;
    }, 20_000, "the jam cleared");
    const delivered = windowsOf(key).flatMap((d) => d.body.events.map((e) => e.p));
    assert.deepEqual(
      delivered.filter((p) => p !== undefined).sort((a, b) => a - b),
      accepted.map((a) => a.p).sort((a, b) => a - b),
      "delivered = the producers told 202",
    );
    return;
  }
});

test("a refused coalesced batch fails exactly its members' shares, each whole; the shares accepted are stored and delivered", async () => {
  for (let attempt = 1; ; attempt++) {
    const key = `jam-shares-${attempt}`;
    refusing.add(key);
    assert.equal((await post("jam", key, { n: "first" })).status, 202); // fires, fails, retries every 2 s
    await until(async () => (await api.status("jam", key)).json.run?.retry_at, 10_000, "the run waits to retry");
    // 24 shares of 3 at once: 7 pending windows are left (one event each), so most are refused.
    const shares = await Promise.all(
      Array.from({ length: 24 }, async (_, s) => {
        const events = Array.from({ length: 3 }, (_, i) => ({ key, event: { s, i } }));
        const res = await api.call("POST", "/v1/topics/jam/events:batch", { events });
        assert.equal(res.status, 207, res.text);
        return { s, results: res.json.results };
      }),
    );
    for (const { s, results } of shares) {
      const statuses = new Set(results.map((r) => r.status));
      assert.equal(statuses.size, 1, `share ${s} is all or nothing: ${JSON.stringify(results)}`);
      if (!statuses.has(202)) {
        assert.equal(results[0].status, 429);
        assert.equal(results[0].error.code, "too_many_pending");
      }
    }
    const accepted = shares.filter((x) => x.results[0].status === 202);
    const refusedTogether = batches("jam", key).filter((b) => b.status === 429 && b.requests >= 2);
    if (refusedTogether.length === 0 || accepted.length === 0) {
      assert.ok(attempt < 5, `no refused coalesced batch beside an accepted share in ${attempt} tries`);
      refusing.delete(key);
      continue;
    }
    console.log(`# try ${attempt}: ${accepted.length} shares accepted, ${24 - accepted.length} refused (${refusedTogether.length} refused coalesced batches)`);
    const stored = (await api.status("jam", key)).json.stats.events;
    assert.equal(stored, 1 + 3 * accepted.length, "exactly the accepted shares' events were stored");
    refusing.delete(key);
    await until(async () => {
      const st = (await api.status("jam", key)).json;
      return st.state === "idle" && st.stored_events === 0;
    }, 30_000, "the jam cleared");
    const delivered = windowsOf(key).flatMap((d) => d.body.events.filter((e) => e.s !== undefined).map((e) => `${e.s}/${e.i}`));
    const expected = accepted.flatMap((x) => [0, 1, 2].map((i) => `${x.s}/${i}`));
    assert.deepEqual(delivered.sort(), expected.sort(), "delivered = the items told 202");
    return;
  }
});

test("idempotency keys of coalesced producers still dedupe, inside a batch and across batches", async () => {
  const key = "dedupe";
  // One repeat known to the key before the burst.
  const early = await post("hot", key, { order: 0 }, { "idempotency-key": "order-0" });
  assert.equal(early.status, 202);
  const orders = 48;
  const answers = [];
  // Each order is sent by two producers at once, and order 0 once more.
  await Promise.all(
    [...Array.from({ length: 2 * orders }, (_, n) => n % orders), 0].map(async (order) => {
      const res = await post("hot", key, { order }, { "idempotency-key": `order-${order}` });
      assert.equal(res.status, 202, res.text);
      answers.push({ order, text: res.text });
    }),
  );
  for (let order = 0; order < orders; order++) {
    const texts = new Set(answers.filter((a) => a.order === order).map((a) => a.text));
    if (order === 0) texts.add(early.text);
    assert.equal(texts.size, 1, `every producer of order-${order} got the first answer: ${[...texts]}`);
  }
  assert.ok(batches("hot", key).length > 0, "some producers rode together");
  assert.equal((await api.status("hot", key)).json.stats.events, orders, "each order stored once");
  await until(async () => windowsOf(key).reduce((n, d) => n + d.body.count, 0) >= orders, 20_000, "delivered");
  const delivered = windowsOf(key).flatMap((d) => d.body.events.map((e) => e.order));
  assert.deepEqual(delivered.sort((a, b) => a - b), Array.from({ length: orders }, (_, n) => n));
});

test("a share's idempotency keys dedupe against coalesced single events and other shares", async () => {
  const orders = 40;
  // Whether a flight carries both kinds depends on when the requests arrive: the
  // burst goes again, on a new key, until one did (each try checks the dedupe).
  for (let attempt = 1; ; attempt++) {
    const key = `share-dedupe-${attempt}`;
    const singles = [];
    const shares = [];
    // Each order is sent twice at once: as a single event, and inside a share of a
    // batch; a batch is sent after every four single events, so both kinds arrive mixed.
    const single = async (n) => {
      const res = await post("hot", key, { order: n }, { "idempotency-key": `order-${n}` });
      assert.equal(res.status, 202, res.text);
      singles.push({ order: n, answer: res.json });
    };
    const batch = async (b) => {
      const events = Array.from({ length: 4 }, (_, i) => ({ key, event: { order: 4 * b + i }, idempotency_key: `order-${4 * b + i}` }));
      const res = await api.call("POST", "/v1/topics/hot/events:batch", { events });
      assert.equal(res.status, 207, res.text);
      res.json.results.forEach((r, i) => {
        assert.equal(r.status, 202, JSON.stringify(r));
        shares.push({ order: 4 * b + i, answer: { seq: r.seq, window: r.window } });
      });
    };
    await Promise.all(Array.from({ length: orders / 4 }, (_, b) => [0, 1, 2, 3].map((i) => single(4 * b + i)).concat(batch(b))).flat());
    for (let n = 0; n < orders; n++) {
      const one = singles.find((s) => s.order === n).answer;
      const other = shares.find((s) => s.order === n).answer;
      assert.deepEqual(other, one, `order-${n}: the share's item and the single event got the same first answer`);
    }
    assert.equal((await api.status("hot", key)).json.stats.events, orders, "each order stored once");
    await until(async () => windowsOf(key).reduce((n, d) => n + d.body.count, 0) >= orders, 20_000, "delivered");
    const delivered = windowsOf(key).flatMap((d) => d.body.events.map((e) => e.order));
    assert.deepEqual(delivered.sort((a, b) => a - b), Array.from({ length: orders }, (_, n) => n));
    const mixed = batches("hot", key).some((b) => b.singles >= 1 && b.requests > b.singles);
    if (mixed) break;
    assert.ok(attempt < 5, `no flight carried both single events and shares in ${attempt} tries`);
    console.log(`# try ${attempt}: no flight carried both kinds`);
  }
});

test("a topic with coalesce: false, and a client token's events and batches, send one object request per event or share", async () => {
  const burst = (topic, key, via) =>
    Promise.all(Array.from({ length: 64 }, async (_, p) => assert.equal((await post(topic, key, { p }, {}, via)).status, 202)));
  await burst("solo", "one-by-one", api);
  assert.equal((await api.status("solo", "one-by-one")).json.stats.events, 64);
  assert.deepEqual(batches("solo", "one-by-one"), [], "no batch on a topic that does not coalesce");
  const minted = await api.call("POST", "/v1/topics/hot/client-tokens", { key: "page", events_per_minute: 1_000 });
  assert.equal(minted.status, 201, minted.text);
  const page = client(edge.url, minted.json.token);
  await burst("hot", "page", page);
  assert.equal((await api.status("hot", "page")).json.stats.events, 64);
  // A client token's batches too: each share its own object request.
  await Promise.all(
    Array.from({ length: 16 }, async (_, b) => {
      const events = Array.from({ length: 4 }, (_, i) => ({ key: "page", event: { b, i } }));
      const res = await page.call("POST", "/v1/topics/hot/events:batch", { events });
      assert.equal(res.status, 207, res.text);
      assert.ok(res.json.results.every((r) => r.status === 202), res.text);
    }),
  );
  assert.equal((await api.status("hot", "page")).json.stats.events, 128);
  assert.deepEqual(batches("hot", "page"), [], "a client token's events and shares go one by one");
  // The same burst with an ingest token rides together.
  await burst("hot", "backend", api);
  assert.ok(batches("hot", "backend").length > 0);
});

test("a long run in one isolate: 20,000 single events from 256 producers on one key are all answered 202", async () => {
  // On workerd, waking a waiting request from another request's context stopped
  // working after some 16,000 wakes in an isolate: every woken request then failed.
  const key = "long-run";
  const total = 20_000;
  let next = 0;
  const statuses = new Map();
  await Promise.all(
    Array.from({ length: 256 }, async () => {
      for (let i = next++; i < total; i = next++) {
        const res = await post("hot", key, { i });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
    }),
  );
  assert.deepEqual([...statuses], [[202, total]], JSON.stringify([...statuses]));
  assert.equal((await api.status("hot", key)).json.stats.events, total);
  const sent = batches("hot", key);
  assert.ok(sent.reduce((n, b) => n + b.events, 0) > total / 2, "most of them rode together");
});
