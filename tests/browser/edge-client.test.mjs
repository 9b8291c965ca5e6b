// `lull-web/edge` as built into target/npm, over a `fetch` that records every
// request and answers as each test scripts it: retries keep their
// Idempotency-Key, refusals are typed errors, bad input sends nothing, a
// burst coalesces in the page, `flush` stores the page's window before it
// fires the edge's, windows of several keys go in batches answered per item.
// (The demo test and edge-batch.test.mjs drive the same client against a real edge.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const built = resolve(import.meta.dirname, "../../target/npm/lull-web/edge.js");
const { edge, EdgeError } = await import(pathToFileURL(built).href);

/** A fetch answering `script(request, i)` (a status, `[status, body, headers]`, or an Error to throw). */
function fakeFetch(script) {
  const requests = [];
  const fetch = async (url, init) => {
    const request = { url, method: init.method, headers: init.headers, body: init.body, keepalive: init.keepalive, at: Date.now() };
    requests.push(request);
    const answer = await script(request, requests.length - 1);
    if (answer instanceof Error) throw answer;
    const [status, body = {}, headers = {}] = Array.isArray(answer) ? answer : [answer];
    return new Response(JSON.stringify(body), { status, headers });
  };
  return { fetch, requests };
}

const accepted = (window = 1, seq = 1) => [202, { window, seq }];

test("a send is one POST with a bearer token and an Idempotency-Key; its promise gets the edge's answer", async () => {
  const f = fakeFetch(() => accepted(3, 7));
  const client = edge({ url: "http://edge.test/", token: "t0k", fetch: f.fetch });
  const sent = await client.send("orders", "customer/42", { n: 1 });
  assert.equal(f.requests.length, 1);
  const [r] = f.requests;
  assert.equal(r.url, "http://edge.test/v1/topics/orders/keys/customer%2F42/events");
  assert.equal(r.method, "POST");
  assert.equal(r.headers.authorization, "Bearer t0k");
  assert.match(r.headers["idempotency-key"], /^[0-9a-z]+\.1$/);
  assert.equal(r.body, '{"n":1}');
  assert.equal(r.keepalive, false, "keepalive only when the page is going");
  assert.deepEqual(sent, { window: 3, seq: 7, idempotencyKey: r.headers["idempotency-key"], count: 1 });
});

test("503 (after Retry-After), 429 and a network error are retried with the same Idempotency-Key; 400 is not", async () => {
  const answers = [[503, { error: { code: "unavailable", message: "storage" } }, { "retry-after": "1" }], new TypeError("network"), 429, accepted()];
  const f = fakeFetch((_, i) => answers[i]);
  const client = edge({ url: "http://edge.test", token: "t", fetch: f.fetch });
  const started = Date.now();
  await client.send("t", "k", 1);
  assert.equal(f.requests.length, 4);
  assert.equal(new Set(f.requests.map((r) => r.headers["idempotency-key"])).size, 1, "one key for every try of one send");
  assert.ok(f.requests[1].at - f.requests[0].at >= 990, "waited Retry-After before the second try");
  assert.ok(Date.now() - started < 10_000);

  const refused = fakeFetch(() => [400, { error: { code: "malformed_json", message: "bad" } }]);
  const strict = edge({ url: "http://edge.test", token: "t", fetch: refused.fetch });
  const error = await strict.send("t", "k", 1).then(() => null, (e) => e);
  assert.ok(error instanceof EdgeError);
  assert.deepEqual([error.status, error.code], [400, "malformed_json"]);
  assert.equal(refused.requests.length, 1, "a refusal is not retried");

  const down = fakeFetch(() => 503);
  const bounded = edge({ url: "http://edge.test", token: "t", retries: 2, fetch: down.fetch });
  const last = await bounded.send("t", "k", 1).then(() => null, (e) => e);
  assert.equal(last.status, 503);
  assert.equal(down.requests.length, 3, "retries: 2 means three tries in all");
});

/** A JWT-shaped token with `exp` (unsigned: the fake edge does not check it). */
const tokenWithExp = (name, exp) => `h.${Buffer.from(JSON.stringify({ exp })).toString("base64url")}.${name}`;

test("a token function is called for the first send, again before exp, and again after a 401; a 403 is not retried", async () => {
  let minted = 0;
  const mint = async () => tokenWithExp(`t${++minted}`, Math.floor(Date.now() / 1000) + (minted === 1 ? 10 : 3_600));
  const f = fakeFetch((r) => (r.headers.authorization.endsWith(".t3") ? 401 : accepted()));
  const client = edge({ url: "http://edge.test", token: mint, retries: 0, fetch: f.fetch });
  await client.send("docs", "d", 1);
  await client.send("docs", "d", 2);
  assert.deepEqual(f.requests.map((r) => r.headers.authorization.split(".").pop()), ["t1", "t2"],
    "t1 expires within 30 s: the second send fetched t2 first");
  const refused = fakeFetch((r) => (r.headers.authorization.endsWith(".t3") ? 401 : accepted()));
  const again = edge({ url: "http://edge.test", token: async () => tokenWithExp(`t${++minted}`, 4_000_000_000), retries: 0, fetch: refused.fetch });
  await again.send("docs", "d", 3);
  assert.deepEqual(refused.requests.map((r) => r.headers.authorization.split(".").pop()), ["t3", "t4"], "401: a new token, once");
  const forbidden = fakeFetch(() => [403, { error: { code: "forbidden", message: "another key" } }]);
  const scoped = edge({ url: "http://edge.test", token: mint, retries: 4, fetch: forbidden.fetch });
  await assert.rejects(scoped.send("docs", "other", 1), (e) => e instanceof EdgeError && e.status === 403);
  assert.equal(forbidden.requests.length, 1, "a 403 is final");
});

test("bad input throws at once and sends nothing", () => {
  const f = fakeFetch(() => accepted());
  const client = edge({ url: "http://edge.test", token: "t", fetch: f.fetch });
  assert.throws(() => client.send("", "k", 1), /`topic` must be a non-empty string/);
  assert.throws(() => client.send("t", 5, 1), /`key` must be a non-empty string/);
  for (const dots of [".", ".."]) assert.throws(() => client.send("t", dots, 1), /`key` must not be "." or ".."/);
  assert.throws(() => client.send("t", "k", undefined), /`payload` must be JSON/);
  assert.throws(() => client.send("t", "k", 1, { combine: "first" }), /`combine` must be "last" or "all"/);
  assert.throws(() => edge({ url: "http://edge.test" }), /`token` must be a non-empty string/);
  assert.equal(f.requests.length, 0);
});

test("with debounce, a burst is one event (the last payload, or all with combine: 'all'); every caller gets its answer", async () => {
  const f = fakeFetch(() => accepted(1, 1));
  const client = edge({ url: "http://edge.test", token: "t", fetch: f.fetch });
  const last = [1, 2, 3].map((n) => client.send("t", "doc", { n }, { debounce: 200 }));
  const all = [1, 2].map((n) => client.send("t", "list", n, { debounce: 200, combine: "all" }));
  assert.equal(client.pending("t", "doc"), true);
  assert.equal(f.requests.length, 0, "held in the page");
  const answers = await Promise.all([...last, ...all]);
  assert.equal(f.requests.length, 2);
  const body = (key) => f.requests.find((r) => r.url.includes(`/keys/${key}/`)).body;
  assert.equal(body("doc"), '{"n":3}');
  assert.equal(body("list"), "[1,2]");
  assert.deepEqual(answers.map((a) => a.count), [3, 3, 3, 2, 2]);
  assert.equal(client.pending(), false);
});

test("flush stores the page's window before it fires the edge's; cancel rejects what the page held and cancels at the edge", async () => {
  let release;
  const slow = new Promise((ok) => (release = ok));
  const f = fakeFetch(async (r) => {
    if (r.url.endsWith("/events")) {
      await slow;
      return accepted();
    }
    return [200, { state: "due" }];
  });
  const client = edge({ url: "http://edge.test", token: "t", fetch: f.fetch });
  const sent = client.send("t", "k", { a: 1 }, { debounce: 10_000 });
  const flushed = client.flush("t", "k");
  await new Promise((ok) => setTimeout(ok, 50));
  assert.deepEqual(f.requests.map((r) => r.url.split("/keys/k")[1]), ["/events"], "the flush waits for the event to be stored");
  release();
  assert.deepEqual(await flushed, { state: "due" });
  await sent;
  assert.deepEqual(f.requests.map((r) => `${r.method} ${r.url.split("/keys/k")[1]}`), ["POST /events", "POST /flush"]);

  const c = fakeFetch(() => [200, { state: "idle" }]);
  const cancelling = edge({ url: "http://edge.test", token: "t", fetch: c.fetch });
  const dropped = cancelling.send("t", "k", 1, { debounce: 10_000 });
  await cancelling.cancel("t", "k");
  const error = await dropped.then(() => null, (e) => e);
  assert.equal(error.name, "AbortError");
  assert.deepEqual(c.requests.map((r) => `${r.method} ${r.url.split("/keys/k")[1]}`), ["DELETE "], "nothing sent, the edge's window cancelled");
});

test("status and timeline read the key with the token; the timeline pages after an entry", async () => {
  const f = fakeFetch(() => [200, { ok: true }]);
  const client = edge({ url: "http://edge.test", token: "admin", fetch: f.fetch });
  await client.status("t", "a b");
  await client.timeline("t", "a b", { after: 12, limit: 50 });
  assert.deepEqual(f.requests.map((r) => `${r.method} ${r.url}`), [
    "GET http://edge.test/v1/topics/t/keys/a%20b",
    "GET http://edge.test/v1/topics/t/keys/a%20b/timeline?after=12&limit=50",
  ]);
});

test("a key's bursts reach the edge in order: the next waits while the previous one is still retrying", async () => {
  let first = true;
  const f = fakeFetch(async (r) => {
    if (first) {
      first = false;
      return new TypeError("network"); // the first burst's first try fails, then backs off
    }
    return accepted();
  });
  const client = edge({ url: "http://edge.test", token: "t", fetch: f.fetch });
  const a = client.send("t", "doc", { v: 1 });
  const b = client.send("t", "doc", { v: 2 });
  await Promise.all([a, b]);
  assert.deepEqual(f.requests.map((r) => r.body), ['{"v":1}', '{"v":1}', '{"v":2}'], "v2 was sent only after v1 was stored");
});

test("flush rejects, firing nothing, when the page's window could not be handed over; cancel is not repeated after a network error", async () => {
  const f = fakeFetch((r) => (r.url.endsWith("/events") ? [400, { error: { code: "malformed_json", message: "no" } }] : [200, {}]));
  const client = edge({ url: "http://edge.test", token: "t", fetch: f.fetch });
  const sent = client.send("t", "k", 1, { debounce: 10_000 });
  const error = await client.flush("t", "k").then(() => null, (e) => e);
  assert.equal(error?.code, "malformed_json");
  assert.equal((await sent.then(() => null, (e) => e))?.code, "malformed_json");
  assert.deepEqual(f.requests.map((r) => r.method), ["POST"], "no flush after a failed hand-over");

  const lost = fakeFetch(() => new TypeError("network"));
  const cancelling = edge({ url: "http://edge.test", token: "t", fetch: lost.fetch });
  await assert.rejects(cancelling.cancel("t", "k"), TypeError);
  assert.equal(lost.requests.length, 1, "a cancel whose answer was lost may have happened: not sent again");
});

/** The items of a batch request's body. */
const itemsOf = (r) => JSON.parse(r.body).events;
const isBatch = (r) => r.url.endsWith("/events:batch");
/** A fake edge's 207 for a batch: `answer(item, i)` is each item's status (202 gets a window and seq). */
const batchAnswer = (r, answer) => [207, {
  results: itemsOf(r).map((item, i) => {
    const status = answer(item, i);
    return status === 202 ? { status, window: 1, seq: i + 1 } : { status, error: { code: `code_${status}`, message: `item ${i}` } };
  }),
}];

test("windows of several keys handed over at once go in one batch request per topic, each with its idempotency key; a lone window keeps its key's route", async () => {
  const f = fakeFetch((r) => (isBatch(r) ? batchAnswer(r, () => 202) : accepted(4, 9)));
  const client = edge({ url: "http://edge.test", token: "t", fetch: f.fetch });
  const sends = [
    client.send("docs", "a", { n: 1 }, { debounce: 10_000 }),
    client.send("docs", "a", { n: 2 }, { debounce: 10_000 }),
    client.send("docs", "b/1", [1], { debounce: 10_000, combine: "all" }),
    client.send("docs", "c", "x", { debounce: 10_000 }),
    client.send("notes", "n", { only: true }, { debounce: 10_000 }),
  ];
  await client.flush();
  const answers = await Promise.all(sends);
  assert.deepEqual(f.requests.map((r) => r.url).sort(), [
    "http://edge.test/v1/topics/docs/events:batch",
    "http://edge.test/v1/topics/notes/keys/n/events",
  ]);
  const batch = f.requests.find(isBatch);
  assert.equal(batch.headers.authorization, "Bearer t");
  assert.equal(batch.headers["idempotency-key"], undefined, "each item carries its own");
  const items = itemsOf(batch);
  assert.deepEqual(items.map((i) => [i.key, i.event]).sort(), [["a", { n: 2 }], ["b/1", [[1]]], ["c", "x"]]);
  assert.equal(new Set(items.map((i) => i.idempotency_key)).size, 3);
  for (const i of items) assert.match(i.idempotency_key, /^[0-9a-z]+\.\d+$/);
  const byKey = Object.fromEntries(items.map((i, n) => [i.key, { ...i, seq: n + 1 }]));
  assert.deepEqual(answers.slice(0, 4), [
    { window: 1, seq: byKey.a.seq, idempotencyKey: byKey.a.idempotency_key, count: 2 },
    { window: 1, seq: byKey.a.seq, idempotencyKey: byKey.a.idempotency_key, count: 2 },
    { window: 1, seq: byKey["b/1"].seq, idempotencyKey: byKey["b/1"].idempotency_key, count: 1 },
    { window: 1, seq: byKey.c.seq, idempotencyKey: byKey.c.idempotency_key, count: 1 },
  ]);
  assert.deepEqual(answers[4], { window: 4, seq: 9, idempotencyKey: f.requests.find((r) => !isBatch(r)).headers["idempotency-key"], count: 1 });
});

test("a batch's answer is read per item: an accepted item is not sent again; a 429 or 5xx item goes again with its idempotency key; another refusal is that item's EdgeError", async () => {
  // First answer: a 202, b 429, c 503, d 400; second: b 202, c 500; third: c 202.
  const plan = [{ a: 202, b: 429, c: 503, d: 400 }, { b: 202, c: 500 }, { c: 202 }];
  const f = fakeFetch((r, i) => batchAnswer(r, (item) => plan[i][item.key]));
  const client = edge({ url: "http://edge.test", token: "t", fetch: f.fetch });
  const sends = ["a", "b", "c", "d"].map((key) => client.send("t", key, key, { debounce: 10_000 }).then((s) => s, (e) => e));
  const failed = await client.flush("t").then(() => null, (e) => e);
  const [a, b, c, d] = await Promise.all(sends);
  assert.deepEqual(f.requests.map((r) => itemsOf(r).map((i) => i.key).sort()), [["a", "b", "c", "d"], ["b", "c"], ["c"]]);
  const keys = f.requests.map((r) => Object.fromEntries(itemsOf(r).map((i) => [i.key, i.idempotency_key])));
  assert.equal(keys[1].b, keys[0].b, "b went again with its idempotency key");
  assert.equal(keys[2].c, keys[0].c, "c too, each time");
  assert.deepEqual([a.idempotencyKey, b.idempotencyKey, c.idempotencyKey], [keys[0].a, keys[0].b, keys[0].c]);
  assert.ok(d instanceof EdgeError);
  assert.deepEqual([d.status, d.code], [400, "code_400"]);
  assert.equal(failed, d, "flush rejects with the item's error");

  // Retries run out per item as for one event: `retries: 1` is two tries.
  const down = fakeFetch((r) => batchAnswer(r, (item) => (item.key === "x" ? 202 : 503)));
  const bounded = edge({ url: "http://edge.test", token: "t", retries: 1, fetch: down.fetch });
  const [x, y] = ["x", "y"].map((key) => bounded.send("t", key, 1, { debounce: 10_000 }).then((s) => s, (e) => e));
  await bounded.flush("t").catch(() => {});
  assert.equal((await x).seq, 1);
  assert.equal((await y).status, 503);
  assert.deepEqual(down.requests.map((r) => itemsOf(r).length), [2, 1]);
});

test("a batch refused as a whole for one named item (nothing stored) fails that item only: the others go again", async () => {
  const f = fakeFetch((r) => {
    const at = itemsOf(r).findIndex((i) => i.key === "other");
    if (at >= 0) return [403, { error: { code: "forbidden", message: `events[${at}]: the token covers another key` } }];
    return batchAnswer(r, () => 202);
  });
  const client = edge({ url: "http://edge.test", token: "t", fetch: f.fetch });
  const [mine, also, other] = ["doc-1", "doc-2", "other"].map((key) => client.send("t", key, 1, { debounce: 10_000 }).then((s) => s, (e) => e));
  await client.flush("t").catch(() => {});
  assert.deepEqual([(await mine).window, (await also).window], [1, 1]);
  assert.deepEqual([(await other).status, (await other).code], [403, "forbidden"]);
  assert.deepEqual(f.requests.map((r) => itemsOf(r).map((i) => i.key).sort()), [["doc-1", "doc-2", "other"], ["doc-1", "doc-2"]]);
});

test("windows handed over at once go in as few requests as 60 KiB bodies allow (largest first), each body within it", async () => {
  const f = fakeFetch((r) => (isBatch(r) ? batchAnswer(r, () => 202) : accepted()));
  const client = edge({ url: "http://edge.test", token: "t", fetch: f.fetch });
  // 40, 30, 40, 30 KB: in order, no two neighbours fit one body (four requests); largest first, three.
  const sizes = { a: 40_000, b: 30_000, c: 40_000, d: 30_000 };
  const sends = Object.entries(sizes).map(([key, n]) => client.send("t", key, "x".repeat(n), { debounce: 10_000 }));
  await client.flush();
  await Promise.all(sends);
  const bodies = f.requests.map((r) => new TextEncoder().encode(r.body).length);
  assert.equal(f.requests.length, 3, `${bodies}`);
  assert.ok(bodies.every((n) => n <= 60 * 1024), `${bodies}`);
  const keys = f.requests.map((r) => (isBatch(r) ? itemsOf(r).map((i) => i.key).sort() : [r.url.split("/keys/")[1].split("/")[0]]));
  assert.deepEqual(keys.map((k) => k.join()).sort(), ["a", "b,d", "c"], "a lone window keeps its key's route");
});
