// lull-web/edge's batch hand-over, end to end: a page in headless Chromium
// holding several keys' windows, a real lull-edge on local workerd
// (Miniflare, the worker-build output) and a receiver. The page is served by a
// small front server on 127.0.0.1 that forwards `/v1/…` to the edge and keeps
// every request it forwarded (body and answer): the requests are counted
// there, at the server side, not in the client. Deliveries are read from the
// receiver, stored events from the edge's status.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { existsSync, readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { launch } from "../web/chromium.mjs";
import { client, startEdge, startReceiver, until } from "../edge/harness.mjs";

const pkg = resolve(import.meta.dirname, "../../target/npm/lull-web");
const TOPIC = "page";
/** A page's client token covers the keys starting with this. */
const PREFIX = "pb-";
/** Keepalive's quota (64 KiB in flight), less the client's margin: a batch body holds at most this. */
const BODY_BOUND = 60 * 1024;

// The page: a lull-web/edge client of this origin (the front server) with the client token it was given.
const PAGE = `<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>batch</title>
<script type="module">
  import { edge } from "/lull-web/edge.js";
  const q = new URLSearchParams(location.search);
  window.client = edge({ url: location.origin, token: q.get("token"), retries: Number(q.get("retries")) });
</script>`;

const BLANK = `<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>blank</title>`;

/** Every `fetch` the page makes (url, keepalive, body bytes), noted in its origin's localStorage, which outlives the document. */
function noteFetches() {
  const fetch = window.fetch;
  window.fetch = (input, init) => {
    const noted = JSON.parse(localStorage.getItem("fetches") ?? "[]");
    noted.push({ url: String(input), keepalive: init?.keepalive === true, bytes: new Blob([init?.body ?? ""]).size });
    localStorage.setItem("fetches", JSON.stringify(noted));
    return fetch(input, init);
  };
}

let rx, edge, front, browser, api, token;
/** Keys whose deliveries the receiver refuses (500). */
const refused = new Set();
/** Requests to forward whose answer the front server loses (it closes the connection instead). */
let loseAnswer = () => false;

/**
 * The front server: `/` is the page, `/lull-web/*.js` the built package,
 * `/v1/…` goes to the edge. Each forwarded request is kept with its answer in
 * `front.forwarded`. Every answer closes its connection, so the browser never
 * sends a request again by itself on a reused one: a request seen twice was
 * sent twice by the client.
 */
async function startFront(edgeUrl) {
  const forwarded = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const url = new URL(req.url, "http://x");
      const file = join(pkg, basename(url.pathname));
      if (url.pathname === "/" || url.pathname === "/blank") {
        return res.writeHead(200, { "content-type": "text/html", connection: "close" }).end(url.pathname === "/" ? PAGE : BLANK);
      }
      if (url.pathname.startsWith("/lull-web/") && existsSync(file)) {
        return res.writeHead(200, { "content-type": "text/javascript", connection: "close" }).end(readFileSync(file));
      }
      if (!url.pathname.startsWith("/v1/")) return res.writeHead(404, { connection: "close" }).end();
      const body = Buffer.concat(chunks);
      const headers = Object.fromEntries(["authorization", "content-type", "idempotency-key"].filter((h) => req.headers[h]).map((h) => [h, req.headers[h]]));
      const answer = await fetch(edgeUrl + req.url, { method: req.method, headers, body: body.length ? body : undefined });
      const text = await answer.text();
      const request = {
        method: req.method,
        path: url.pathname,
        idempotencyKey: req.headers["idempotency-key"],
        body: body.toString("utf8"),
        bytes: body.length,
        status: answer.status,
        answer: JSON.parse(text),
      };
      forwarded.push(request);
      if (loseAnswer(request)) return req.socket.destroy();
      const out = { "content-type": "application/json", connection: "close" };
      if (answer.headers.get("retry-after")) out["retry-after"] = answer.headers.get("retry-after");
      res.writeHead(answer.status, out).end(text);
    });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  return {
    origin: `http://127.0.0.1:${server.address().port}`,
    forwarded,
    close: () => new Promise((ok) => (server.closeAllConnections(), server.close(ok))),
  };
}

before(async () => {
  rx = await startReceiver((d) => ((d.ok = !refused.has(d.body.key)) ? 200 : 500));
  edge = await startEdge({
    vars: { LULL_CLIENT_TOKEN_SECRET: "a-client-token-secret-for-the-page-batch-tests-0123456789" },
    topics: {
      // One pending window a key at most: a key holding a dead letter refuses events (429) until it is replayed.
      [TOPIC]: { target: `${rx.url}/hook`, wait_ms: 300, payload: "all", max_pending_windows: 1, retry: { max_attempts: 1 }, client_tokens: true },
    },
  });
  api = client(edge.url);
  const minted = await api.call("POST", `/v1/topics/${TOPIC}/client-tokens`, { key_prefix: PREFIX, ttl_s: 3600 });
  assert.equal(minted.status, 201, JSON.stringify(minted.json));
  token = minted.json.token;
  front = await startFront(edge.url);
  browser = await launch();
}, { timeout: 120_000 });

after(async () => {
  await browser?.close().catch(() => {});
  await front?.close();
  await edge?.stop();
  await rx?.close();
});

/** A fresh page of the front server with its client (`retries` tries after a 429/5xx), and what went wrong in it. */
async function openPage(retries = 4) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.addInitScript(noteFetches);
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => m.type() === "error" && problems.push(`console: ${m.text()}`));
  await page.goto(`${front.origin}/?token=${token}&retries=${retries}`);
  await page.waitForFunction(() => window.client !== undefined);
  return { page, context, problems };
}

/** The requests the front server forwarded for `keys` (any of them in the request), after `since`. */
const requestsFor = (keys, since = 0) =>
  front.forwarded.slice(since).filter((r) => keys.some((k) => r.path.includes(encodeURIComponent(k)) || r.body.includes(JSON.stringify(k))));
const itemsOf = (r) => JSON.parse(r.body).events;
const keysOf = (r) => itemsOf(r).map((i) => i.key).sort();
const batchPath = `/v1/topics/${TOPIC}/events:batch`;
/** How many events the edge stored for `key`. */
const stored = async (key) => (await api.status(TOPIC, key)).json.stats.events;
/** The events of `key` the receiver took (answered 200), one list per delivery. */
const delivered = (key) => rx.of(key).filter((d) => d.ok).map((d) => d.body.events);
const fresh = (name) => `${PREFIX}${name}-${Date.now().toString(36)}`;

test("keys held when the page goes are sent in one batch request, with keepalive, and each key's events are delivered", { timeout: 60_000 }, async () => {
  const keys = ["a", "b", "c"].map(fresh);
  const since = front.forwarded.length;
  const { page, context, problems } = await openPage();
  try {
    const held = await page.evaluate((keys) => {
      keys.forEach((key, n) => {
        for (const edit of [1, 2]) window.client.send("page", key, { key: n, edit }, { debounce: 60_000, combine: "all" });
      });
      // Leave in the next task: pagehide hands over what the client holds.
      setTimeout(() => (location.href = "about:blank"));
      return window.client.pending();
    }, keys);
    assert.equal(held, true);
    for (const key of keys) await rx.waitFor(1, 15_000, key);
    const requests = requestsFor(keys, since);
    assert.deepEqual(requests.map((r) => `${r.method} ${r.path}`), [`POST ${batchPath}`], "one request for the three keys");
    assert.deepEqual(keysOf(requests[0]), [...keys].sort());
    assert.equal(requests[0].status, 207);
    assert.deepEqual(requests[0].answer.results.map((r) => r.status), [202, 202, 202]);
    keys.forEach((key, n) => assert.deepEqual(delivered(key), [[[{ key: n, edit: 1 }, { key: n, edit: 2 }]]], `${key}: both edits, once`));
    for (const key of keys) assert.equal(await stored(key), 1);
    // What the page's fetch was, read back from its origin's storage.
    await page.goto(`${front.origin}/blank`);
    const noted = await page.evaluate(() => JSON.parse(localStorage.getItem("fetches")));
    assert.deepEqual(noted.filter((f) => f.url.includes("/v1/")).map((f) => [new URL(f.url).pathname, f.keepalive]), [[batchPath, true]]);
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
  }
});

test("a partly refused batch: the accepted keys are not sent again; the refused one (429) goes again alone, with its idempotency key, and is stored once", { timeout: 90_000 }, async () => {
  const [a, b, jam] = ["a", "b", "jam"].map(fresh);
  // The jam key holds a dead letter (its one pending window): its events get 429 until it is replayed.
  refused.add(jam);
  assert.equal((await api.event(TOPIC, jam, { jam: true })).status, 202);
  const dead = await until(async () => (await api.status(TOPIC, jam)).json.dead_letters?.[0], 15_000, "the jam's dead letter");
  const since = front.forwarded.length;
  const { page, context, problems } = await openPage(10);
  try {
    const flushed = page.evaluate(async (keys) => {
      const sends = keys.map((key) => window.client.send("page", key, { key }, { debounce: 60_000 }));
      await window.client.flush("page");
      return Promise.all(sends);
    }, [a, b, jam]);
    flushed.catch(() => {}); // awaited below; a failed assertion before then is the test's error
    // The first answer refused the jam only; then it is replayed, and its room comes back.
    const first = await until(() => requestsFor([a, b, jam], since)[0], 15_000, "the first batch");
    assert.equal(first.path, batchPath);
    assert.deepEqual(keysOf(first), [a, b, jam].sort());
    const results = Object.fromEntries(itemsOf(first).map((item, n) => [item.key, first.answer.results[n]]));
    assert.deepEqual([results[a].status, results[b].status, results[jam].status, results[jam].error.code], [202, 202, 429, "too_many_pending"]);
    refused.delete(jam);
    assert.equal((await api.replay(TOPIC, jam, dead.window)).status, 200);
    const answers = await flushed;
    assert.deepEqual(answers.map((s) => s.count), [1, 1, 1]);

    const requests = requestsFor([a, b, jam], since);
    assert.ok(requests.length >= 2, `the jam went again: ${requests.length} request(s)`);
    assert.ok(requests.every((r) => r.path === batchPath || r.path === `/v1/topics/${TOPIC}/keys/${jam}/events`));
    const itemsOfJam = requests.flatMap((r) => (r.path === batchPath ? itemsOf(r) : [{ key: jam, idempotency_key: r.idempotencyKey }]));
    assert.deepEqual(requests.slice(1).map((r) => (r.path === batchPath ? keysOf(r) : [jam])), requests.slice(1).map(() => [jam]), "only the jam went again");
    const jamKeys = new Set(itemsOfJam.filter((i) => i.key === jam).map((i) => i.idempotency_key));
    assert.deepEqual([...jamKeys], [answers[2].idempotencyKey], "every try of the jam's window with one idempotency key");
    const last = requests.at(-1);
    assert.equal(last.answer.results[0].status, 202);
    // Stored once each: a and b from the first request; the jam's dead letter and its page event.
    assert.deepEqual([await stored(a), await stored(b), await stored(jam)], [1, 1, 2]);
    for (const key of [a, b]) await rx.waitFor(1, 15_000, key);
    const jamPageEvents = () => delivered(jam).flat().filter((e) => e.key === jam);
    await until(() => jamPageEvents().length > 0, 15_000, "the jam's page event delivered");
    assert.deepEqual([delivered(a), delivered(b)], [[[{ key: a }]], [[{ key: b }]]]);
    assert.deepEqual(jamPageEvents(), [{ key: jam }], "the jam's page event, once");
    assert.deepEqual(problems, []);
  } finally {
    refused.delete(jam);
    await context.close();
  }
});

test("a batch whose answer was lost is sent again with the same idempotency keys, and the edge stores each event once", { timeout: 60_000 }, async () => {
  const keys = ["x", "y"].map(fresh);
  const since = front.forwarded.length;
  let lost = 0;
  loseAnswer = (r) => r.path === batchPath && r.body.includes(JSON.stringify(keys[0])) && lost++ === 0;
  const { page, context } = await openPage();
  try {
    const answers = await page.evaluate(async (keys) => {
      const sends = keys.map((key) => window.client.send("page", key, { key }, { debounce: 60_000 }));
      await window.client.flush();
      return Promise.all(sends);
    }, keys);
    const requests = requestsFor(keys, since);
    assert.equal(lost, 2, "the first answer was lost, the second was not");
    assert.deepEqual(requests.map((r) => r.path), [batchPath, batchPath]);
    assert.equal(requests[1].body, requests[0].body, "the same events, with the same idempotency keys");
    assert.deepEqual(requests[1].answer, requests[0].answer, "the edge answered the repeat as the first time");
    assert.deepEqual(answers.map((s) => [s.window, s.seq]), [[1, 1], [1, 1]]);
    for (const key of keys) assert.equal(await stored(key), 1, `${key} stored once`);
    for (const key of keys) await rx.waitFor(1, 15_000, key);
    assert.deepEqual(keys.map(delivered), keys.map((key) => [[{ key }]]));
  } finally {
    loseAnswer = () => false;
    await context.close();
  }
});

test("more than keepalive's quota held when the page is hidden: as few batch requests as 60 KiB bodies allow, each within it, all delivered", { timeout: 60_000 }, async () => {
  const keys = ["p", "q", "r", "s"].map(fresh);
  const since = front.forwarded.length;
  const { page, context, problems } = await openPage();
  try {
    await page.evaluate((keys) => {
      // About 25 KB a key, 100 KB in all: two bodies of two keys each is the fewest.
      keys.forEach((key) => window.client.send("page", key, { key, text: key.repeat(25_000 / key.length) }, { debounce: 60_000 }));
      // The tab goes to the background: hidden, not left.
      Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
      document.dispatchEvent(new Event("visibilitychange"));
    }, keys);
    for (const key of keys) await rx.waitFor(1, 15_000, key);
    const requests = requestsFor(keys, since);
    assert.deepEqual(requests.map((r) => r.path), [batchPath, batchPath], `${requests.map((r) => r.bytes)}`);
    assert.ok(requests.every((r) => r.bytes <= BODY_BOUND), `bodies of ${requests.map((r) => r.bytes)} bytes`);
    assert.deepEqual(requests.flatMap(keysOf).sort(), [...keys].sort());
    assert.deepEqual(requests.map((r) => keysOf(r).length), [2, 2]);
    for (const key of keys) {
      const [[event]] = delivered(key);
      assert.equal(event.text.length, 25_000 - (25_000 % key.length), `${key} delivered whole`);
      assert.equal(await stored(key), 1);
    }
    // keepalive's quota counts bodies in flight: the first goes with it, the second (sent beside it) without.
    const noted = await page.evaluate(() => JSON.parse(localStorage.getItem("fetches")));
    const sends = noted.filter((f) => f.url.endsWith(batchPath));
    assert.deepEqual(sends.map((f) => f.keepalive), [true, false]);
    assert.ok(sends.every((f) => f.bytes <= BODY_BOUND));
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
  }
});
