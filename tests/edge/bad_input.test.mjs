// Every bad input gets its status and error code, and leaves the key as it was.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startEdge, startReceiver, stateDir, client, TOKENS } from "./harness.mjs";

let edge, rx, state, admin, ingest, anonymous;

before(async () => {
  rx = await startReceiver();
  state = stateDir();
  edge = await startEdge({
    persist: state.dir,
    topics: { t: { target: `${rx.url}/hook`, wait_ms: 60_000, payload: "all", max_body_bytes: 100 } },
  });
  admin = client(edge.url);
  ingest = client(edge.url, TOKENS.ingest);
  anonymous = client(edge.url, "");
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

const key = "/v1/topics/t/keys/k";

test("every bad input returns its status and code, and changes nothing", async () => {
  assert.equal((await ingest.event("t", "k", { n: 1 })).status, 202);
  const before = (await admin.status("t", "k")).json;
  assert.equal(before.stats.events, 1);

  const cases = [
    ["unknown topic", ingest.call("POST", "/v1/topics/nope/keys/k/events", { n: 2 }), 404, "unknown_topic"],
    ["no token", anonymous.call("POST", `${key}/events`, { n: 2 }), 401, "unauthorized"],
    ["wrong token", client(edge.url, "guess").call("POST", `${key}/events`, { n: 2 }), 401, "unauthorized"],
    ["no token on status", anonymous.call("GET", key), 401, "unauthorized"],
    ["ingest token on status", ingest.call("GET", key), 403, "forbidden"],
    ["ingest token on flush", ingest.call("POST", `${key}/flush`), 403, "forbidden"],
    ["ingest token on cancel", ingest.call("DELETE", key), 403, "forbidden"],
    ["ingest token on dead letters", ingest.call("GET", `${key}/dead-letters`), 403, "forbidden"],
    ["ingest token on replay", ingest.call("POST", `${key}/dead-letters/1/retry`), 403, "forbidden"],
    ["ingest token on the sink's list", ingest.call("GET", "/sink"), 403, "forbidden"],
    ["malformed JSON", ingest.call("POST", `${key}/events`, "{ not json"), 400, "malformed_json"],
    ["trailing garbage", ingest.call("POST", `${key}/events`, '{"n": 1} x'), 400, "malformed_json"],
    ["empty body", ingest.call("POST", `${key}/events`, ""), 400, "malformed_json"],
    ["body over the limit", ingest.call("POST", `${key}/events`, { pad: "x".repeat(200) }), 413, "payload_too_large"],
    ["empty key", ingest.call("POST", "/v1/topics/t/keys//events", { n: 2 }), 400, "invalid_key"],
    ["key over 512 bytes", ingest.call("POST", `/v1/topics/t/keys/${"k".repeat(513)}/events`, { n: 2 }), 400, "invalid_key"],
    ["key not UTF-8", ingest.call("POST", "/v1/topics/t/keys/%C3%28/events", { n: 2 }), 400, "invalid_key"],
    ["key with a control character", ingest.call("POST", "/v1/topics/t/keys/a%00b/events", { n: 2 }), 400, "invalid_key"],
    ["wrong method on events", ingest.call("GET", `${key}/events`), 405, "method_not_allowed"],
    ["wrong method on a key", admin.call("PUT", key, { n: 2 }), 405, "method_not_allowed"],
    ["wrong method on healthz", admin.call("POST", "/healthz"), 405, "method_not_allowed"],
    ["unknown route", admin.call("GET", "/v1/nothing"), 404, "not_found"],
    ["unknown dead letter", admin.call("POST", `${key}/dead-letters/99/retry`), 404, "not_found"],
    ["window that is not a number", admin.call("POST", `${key}/dead-letters/x/retry`), 404, "not_found"],
  ];
  for (const [what, pending, status, code] of cases) {
    const res = await pending;
    assert.equal(res.status, status, `${what}: ${JSON.stringify(res.json)}`);
    assert.equal(res.json.error?.code, code, what);
    assert.equal(typeof res.json.error.message, "string", what);
    assert.deepEqual(Object.keys(res.json), ["error"], what);
    if (status === 405) assert.ok(res.headers.get("allow"), `${what}: Allow header`);
  }
  const after = (await admin.status("t", "k")).json;
  // The object counts what reached it: the unknown dead letter and this status read, nothing else.
  assert.equal(after.io.requests, before.io.requests + 2, "only the unknown dead letter reached the object");
  assert.deepEqual({ ...after, io: { ...after.io, requests: 0 } }, { ...before, io: { ...before.io, requests: 0 } }, "the key is exactly as it was");
  const exactlyAtLimit = JSON.stringify({ pad: "x".repeat(100 - 10) });
  assert.equal(exactlyAtLimit.length, 100);
  assert.equal((await ingest.event("t", "k", exactlyAtLimit)).status, 202, "a body at the limit is accepted");
});

test("healthz tells anyone the worker is up, and only an admin its topics", async () => {
  const res = await anonymous.call("GET", "/healthz");
  assert.equal(res.status, 200);
  assert.deepEqual(res.json, { ok: true }, "no topic names for anonymous callers");
  assert.deepEqual((await ingest.call("GET", "/healthz")).json, { ok: true }, "nor for producers");
  assert.deepEqual((await admin.call("GET", "/healthz")).json, { ok: true, topics: ["t"] });
});

test("a bad LULL_TOPICS is refused on every request; only an admin learns why", async () => {
  const bad = stateDir();
  const broken = await startEdge({ persist: bad.dir, topics: { t: { target: "ftp://example.com", wait_ms: 10 } } });
  const detail = /topic "t": target "ftp:\/\/example.com" is not an absolute http\(s\) URL/;
  try {
    for (const [method, path, status] of [["GET", "/healthz", 503], ["POST", "/v1/topics/t/keys/k/events", 500]]) {
      const body = method === "POST" ? { n: 1 } : undefined;
      for (const caller of [client(broken.url, ""), client(broken.url, TOKENS.ingest)]) {
        const res = await caller.call(method, path, body);
        assert.equal(res.status, status, `${method} ${path}`);
        assert.equal(res.json.error.code, "config");
        assert.doesNotMatch(JSON.stringify(res.json), /example\.com|ftp/, "nothing of the configuration leaks");
        assert.match(res.json.error.request_id, /^[0-9a-f]{16}$/);
      }
      const res = await client(broken.url).call(method, path, body);
      assert.equal(res.status, status);
      assert.match(res.json.error.message, detail, "an admin token sees why");
    }
  } finally {
    await broken.stop();
    bad.cleanup();
  }
});
