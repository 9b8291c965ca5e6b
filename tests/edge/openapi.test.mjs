// The HTTP API's contract (crates/lull-edge/openapi.yaml) against the real
// worker on local workerd: every operation of the document is called, its
// answers' error cases included (400/401/403/404/405/413/429; 500/503 on a
// worker whose configuration is broken; 409, a race, tried for some rounds
// and reported), and every answer — its status,
// the headers the document lists and its JSON body — is validated against the
// document's response for that operation and status (ajv, JSON Schema
// 2020-12, in strict mode). An answer of a status the document does not list
// for the operation fails; so does an operation the test never called.
// Every request that got a 2xx is checked against the document's request
// side too (parameters and body), so the document is not stricter than the
// worker.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { resolve } from "node:path";
import { parse } from "yaml";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { SignJWT, decodeProtectedHeader } from "jose";
import { startEdge, startReceiver, stateDir, until, sleep, TOKENS } from "./harness.mjs";

const DOC_PATH = resolve(import.meta.dirname, "../../crates/lull-edge/openapi.yaml");
const doc = parse(readFileSync(DOC_PATH, "utf8"));
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

// ---- The document, read once: its operations, and a validator per schema location. ----

const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true });
addFormats(ajv);
// The OpenAPI document is added whole (its `#/components/...` references
// resolve inside it); its top-level fields are not JSON Schema keywords.
ajv.addVocabulary(["openapi", "info", "jsonSchemaDialect", "servers", "paths", "webhooks", "components", "security", "tags", "externalDocs"]);
ajv.addSchema(doc, "openapi.yaml");

const escape = (part) => String(part).replaceAll("~", "~0").replaceAll("/", "~1");
const at = (pointer) => pointer.replace(/^#\//, "").split("/").map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~")).reduce((node, part) => node?.[part], doc);
/** An OpenAPI object that may be a `$ref` (a response, parameter, header): the object and its pointer. */
function deref(node, pointer) {
  for (let hops = 0; node && node.$ref && !pointer.includes("/schema"); hops++) {
    assert.ok(hops < 10, `a $ref loop at ${pointer}`);
    pointer = node.$ref;
    node = at(pointer);
    assert.ok(node, `${pointer}: not in the document`);
  }
  return [node, pointer];
}
const validators = new Map();
/** The validator of the schema at `pointer` (compiled once). */
function validator(pointer) {
  if (!validators.has(pointer)) validators.set(pointer, ajv.compile({ $ref: `openapi.yaml${pointer}` }));
  return validators.get(pointer);
}
/** The schema at `pointer`, its `$ref`s followed, for its `type` (to read a header's or parameter's text). */
function schemaType(pointer) {
  let schema = at(pointer);
  for (let hops = 0; schema?.$ref && hops < 10; hops++) schema = at(schema.$ref);
  return schema?.type;
}

/** operationId → { method, path, pointer, operation, parameters: [[parameter, pointer]] } */
const ops = new Map();
for (const [path, item] of Object.entries(doc.paths)) {
  for (const method of METHODS) {
    const operation = item[method];
    if (!operation) continue;
    const pointer = `#/paths/${escape(path)}/${method}`;
    const parameters = [
      ...(item.parameters ?? []).map((p, i) => deref(p, `#/paths/${escape(path)}/parameters/${i}`)),
      ...(operation.parameters ?? []).map((p, i) => deref(p, `${pointer}/parameters/${i}`)),
    ];
    assert.ok(operation.operationId, `${method} ${path} has an operationId`);
    assert.ok(!ops.has(operation.operationId), `operationId ${operation.operationId} is unique`);
    ops.set(operation.operationId, { method: method.toUpperCase(), path, pointer, operation, parameters });
  }
}

/** What the test called: operationId → the statuses it saw. */
const seen = new Map();

/**
 * Validate `res` (an answer to `opId`) against the document: its status is
 * one the operation lists, each header the response lists is there (if
 * required) and valid, and its body is the documented content, valid.
 */
function validate(opId, res, what) {
  const op = ops.get(opId);
  const where = `${what}: ${res.method} ${res.path} → ${res.status} ${res.text.slice(0, 300)}`;
  const listed = op.operation.responses?.[String(res.status)];
  assert.ok(listed, `${where}: status ${res.status} is not a documented answer of ${opId}`);
  const [response, pointer] = deref(listed, `${op.pointer}/responses/${res.status}`);
  for (const [name, header] of Object.entries(response.headers ?? {})) {
    const [h, headerPointer] = deref(header, `${pointer}/headers/${escape(name)}`);
    const value = res.headers[name.toLowerCase()];
    if (value === undefined) {
      assert.ok(!h.required, `${where}: the header ${name} is missing`);
      continue;
    }
    const typed = schemaType(`${headerPointer}/schema`) === "integer" && /^\d+$/.test(value) ? Number(value) : value;
    const check = validator(`${headerPointer}/schema`);
    assert.ok(check(typed), `${where}: header ${name}: ${value}: ${ajv.errorsText(check.errors)}`);
  }
  if (!response.content) {
    assert.equal(res.text, "", `${where}: no body is documented`);
  } else {
    const type = (res.headers["content-type"] ?? "").split(";")[0].trim();
    assert.ok(response.content[type], `${where}: content-type ${JSON.stringify(type)} is not documented`);
    let body = res.text;
    if (type !== "text/plain") assert.doesNotThrow(() => (body = JSON.parse(res.text)), `${where}: the body is not JSON`);
    const check = validator(`${pointer}/content/${escape(type)}/schema`);
    assert.ok(check(body), `${where}: the body does not match the document: ${ajv.errorsText(check.errors)}`);
  }
  if (!seen.has(opId)) seen.set(opId, new Set());
  seen.get(opId).add(res.status);
}

/** A request that got a 2xx was one the document allows: its parameters and body. */
function validateRequest(opId, req, res, what) {
  const op = ops.get(opId);
  const where = `${what}: ${res.method} ${res.path} (answered ${res.status})`;
  for (const [parameter, pointer] of op.parameters) {
    const source = { path: req.params, query: req.query, header: req.headers }[parameter.in] ?? {};
    const name = parameter.in === "header" ? Object.keys(source).find((n) => n.toLowerCase() === parameter.name.toLowerCase()) : parameter.name;
    const value = name === undefined ? undefined : source[name];
    if (value === undefined) {
      assert.ok(!parameter.required, `${where}: the parameter ${parameter.name} is required`);
      continue;
    }
    const text = String(value);
    const typed = schemaType(`${pointer}/schema`) === "integer" && /^\d+$/.test(text) ? Number(text) : text;
    const check = validator(`${pointer}/schema`);
    assert.ok(check(typed), `${where}: parameter ${parameter.name}=${text}: ${ajv.errorsText(check.errors)}`);
  }
  for (const name of Object.keys(req.query ?? {})) {
    assert.ok(op.parameters.some(([p]) => p.in === "query" && p.name === name), `${where}: query parameter ${name} is not documented`);
  }
  const body = op.operation.requestBody;
  if (req.body !== undefined && typeof req.body !== "string") {
    assert.ok(body, `${where}: a body is not documented`);
    const check = validator(`${op.pointer}/requestBody/content/application~1json/schema`);
    assert.ok(check(req.body), `${where}: the request's body does not match the document: ${ajv.errorsText(check.errors)}`);
  }
}

// ---- The worker. ----

const ORIGIN = "https://app.example";
const HOOKS_TOKEN = "hooks-own-ingest-token-0001";
const CLIENT_SECRET = "client-secret-openapi-0123456789abcdef";
let edge, rx, state, base;

before(async () => {
  // Deliveries to /hook succeed; to anything else they fail (dead letters).
  rx = await startReceiver((d) => (d.path.startsWith("/hook") ? 200 : 500));
  state = stateDir();
  edge = await startEdge({
    persist: state.dir,
    topics: {
      // A webhook topic whose windows stay open (flush, cancel), with its own ingest token.
      hooks: { target: `${rx.url}/hook`, wait_ms: 60_000, payload: "all", max_body_bytes: 1_000, ingest_token_env: "HOOKS_TOKEN", client_tokens: true },
      // Another webhook topic (a topic's own token may not post to it).
      other: { target: `${rx.url}/hook`, wait_ms: 60_000 },
      // A failing target: one attempt, then a dead letter; one pending window at most.
      fails: { target: `${rx.url}/fail`, wait_ms: 50, retry: { max_attempts: 1 }, max_pending_windows: 1 },
      // A queue topic with a failing target: dead-lettered at the first failed forward, two kept at most.
      q: { target: `${rx.url}/q`, wait_ms: 50, delivery: "queue", forward_max_attempts: 1, max_queue_dead_letters: 2 },
      // A queue topic whose messages are large: a replay of all sends them one per send, for a while.
      qbig: { target: `${rx.url}/qbig`, wait_ms: 50, delivery: "queue", forward_max_attempts: 1, max_body_bytes: 120_000 },
    },
    vars: { HOOKS_TOKEN, LULL_CLIENT_TOKEN_SECRET: CLIENT_SECRET, LULL_CORS_ORIGINS: ORIGIN },
  });
  base = new URL(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

/** One HTTP request as sent (node:http: the path goes as written, `%2E` and all). */
function send(url, method, path, headers, body) {
  return new Promise((ok, fail) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => ok({ method, path, status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", fail);
    });
    req.on("error", fail);
    req.end(body);
  });
}

/**
 * A request with a body too large to send whole before the worker refuses it
 * (it may answer and close while the body is still going): streamed, with no
 * `Content-Length`, by fetch.
 */
async function sendStreamed(url, method, path, headers, body) {
  const { "content-length": _, ...rest } = headers;
  const stream = new ReadableStream({ start: (c) => (c.enqueue(new Uint8Array(body)), c.close()) });
  const res = await fetch(new URL(path, url), { method, headers: rest, body: stream, duplex: "half" });
  return { method, path, status: res.status, headers: Object.fromEntries(res.headers), text: await res.text() };
}

/**
 * Call operation `opId` (its method, or `method` for a 405), its path's
 * parameters from `params` (percent-encoded, or as written with `raw`), with
 * `query`, `body` (JSON, or text as sent), `token` (admin by default; null
 * for none) and `headers`; validate the answer; return it with its JSON.
 */
async function call(opId, { params = {}, raw = false, query, body, token = TOKENS.admin, headers = {}, method, url = base } = {}, what = opId) {
  const op = ops.get(opId);
  assert.ok(op, `${opId} is an operation of the document`);
  const path = op.path.replace(/\{(\w+)\}/g, (_, name) => {
    assert.ok(name in params, `${opId}: the parameter ${name}`);
    return raw ? String(params[name]) : encodeURIComponent(params[name]);
  });
  const search = query === undefined ? "" : `?${typeof query === "string" ? query : new URLSearchParams(query)}`;
  const sent = { ...headers };
  if (token !== null) sent.authorization = `Bearer ${token}`;
  let payload;
  if (body !== undefined) {
    payload = Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
    sent["content-type"] = "application/json";
    sent["content-length"] = payload.length;
  }
  const res = await (payload?.length > 1_000_000 ? sendStreamed : send)(url, method ?? op.method, path + search, sent, payload);
  try {
    res.json = JSON.parse(res.text);
  } catch {
    res.json = undefined;
  }
  validate(opId, res, what);
  if (res.status < 300 && !method) {
    const q = typeof query === "string" ? Object.fromEntries(new URLSearchParams(query)) : query;
    validateRequest(opId, { params, query: q, headers, body }, res, what);
  }
  return res;
}

/** `call`, asserting the status (and error code). */
async function expect(status, code, opId, options = {}, what = `${opId} ${status}${code ? ` ${code}` : ""}`) {
  const res = await call(opId, options, what);
  assert.equal(res.status, status, `${what}: ${res.method} ${res.path} → ${res.status} ${res.text.slice(0, 300)}`);
  if (code) assert.equal(res.json?.error?.code, code, `${what}: ${res.text.slice(0, 300)}`);
  return res;
}

const now = () => Math.floor(Date.now() / 1000);
const key = (topic, k) => ({ params: { topic, key: k } });

test("the document's own examples match its schemas", () => {
  let checked = 0;
  const walk = (node, pointer) => {
    if (!node || typeof node !== "object") return;
    if (node.schema && "example" in node && pointer.includes("/content/")) {
      const check = validator(`${pointer}/schema`);
      assert.ok(check(node.example), `${pointer}/example: ${ajv.errorsText(check.errors)}`);
      checked++;
    }
    for (const [k, v] of Object.entries(node)) walk(v, `${pointer}/${escape(k)}`);
  };
  walk(doc.paths, "#/paths");
  walk(doc.components.responses, "#/components/responses");
  assert.ok(checked >= 20, `${checked} examples`);
});

test("health, and every path's preflight", async () => {
  const anonymous = await expect(200, null, "getHealth", { token: null });
  assert.deepEqual(anonymous.json, { ok: true });
  const admin = await expect(200, null, "getHealth");
  assert.deepEqual(admin.json.topics.sort(), ["fails", "hooks", "other", "q", "qbig"]);
  await expect(200, null, "getHealth", { token: "not-a-token-of-this-worker" });
  for (const [opId, op] of ops) {
    if (op.method !== "OPTIONS") continue;
    const params = Object.fromEntries([...op.path.matchAll(/\{(\w+)\}/g)].map(([, name]) => [name, name === "window" || name === "id" ? 1 : "k"]));
    const ok = await expect(204, null, opId, { params, token: null, headers: { origin: ORIGIN } });
    assert.equal(ok.headers["access-control-allow-origin"], ORIGIN);
    await expect(403, "origin_not_allowed", opId, { params, token: null, headers: { origin: "https://evil.example" } });
  }
});

test("every operation refuses what it must: no token, a token without the right, an unknown topic, a bad key, another method", async () => {
  const paths = new Set();
  for (const [opId, op] of ops) {
    const params = Object.fromEntries([...op.path.matchAll(/\{(\w+)\}/g)].map(([, name]) =>
      [name, { topic: op.path.includes("/queue") ? "q" : "hooks", key: "k", window: 7, id: 7 }[name]]));
    if (op.method === "OPTIONS") {
      await expect(403, "origin_not_allowed", opId, { params, token: null }, `${opId} without an Origin`);
      continue;
    }
    if (!paths.has(op.path)) {
      paths.add(op.path);
      const res = await expect(405, "method_not_allowed", opId, { params, method: "PATCH" }, `PATCH ${op.path}`);
      assert.ok(res.headers.allow.split(", ").includes(op.method), res.headers.allow);
    }
    if (opId === "getHealth") continue;
    await expect(401, "unauthorized", opId, { params, token: null }, `${opId} without a token`);
    await expect(401, "unauthorized", opId, { params, token: "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl" }, `${opId} with a client token that does not verify`);
    const schemes = op.operation.security.flatMap(Object.keys);
    if (!schemes.includes("ingestToken")) {
      await expect(403, "forbidden", opId, { params, token: TOKENS.ingest }, `${opId} with an ingest token`);
    }
    if ("topic" in params) await expect(404, "unknown_topic", opId, { params: { ...params, topic: "nope" } }, `${opId} on an unknown topic`);
    if ("key" in params) await expect(400, "invalid_key", opId, { params: { ...params, key: "k".repeat(513) } }, `${opId} with a key of 513 bytes`);
  }
});

test("one event: accepted, deduplicated, refused for each bad input", async () => {
  const hooks = (k, more = {}) => ({ ...key("hooks", k), ...more });
  const first = await expect(202, null, "postEvent", hooks("doc-1", { body: { n: 1 } }));
  await expect(202, null, "postEvent", hooks("doc-1", { body: [1, "two", null], token: TOKENS.ingest }));
  await expect(202, null, "postEvent", hooks("a/b c✓", { body: "42", token: HOOKS_TOKEN }));
  const once = await expect(202, null, "postEvent", hooks("doc-1", { body: { n: 2 }, headers: { "Idempotency-Key": "order-1" } }));
  const again = await expect(202, null, "postEvent", hooks("doc-1", { body: { n: 2 }, headers: { "Idempotency-Key": "order-1" } }));
  await expect(409, "idempotency_key_reused", "postEvent", hooks("doc-1", { body: { n: 3 }, headers: { "Idempotency-Key": "order-1" } }));
  assert.deepEqual(again.json, once.json, "a repeat gets the first answer");
  assert.equal(first.json.window, once.json.window, "one open window");

  await expect(400, "invalid_idempotency_key", "postEvent", hooks("doc-1", { body: {}, headers: { "Idempotency-Key": "has space" } }));
  await expect(400, "malformed_json", "postEvent", hooks("doc-1", { body: "{ not json" }));
  await expect(400, "malformed_json", "postEvent", hooks("doc-1", { body: "" }));
  await expect(400, "invalid_key", "postEvent", { params: { topic: "hooks", key: "" }, body: {} });
  await expect(400, "invalid_key", "postEvent", hooks("k".repeat(513), { body: {} }));
  await expect(400, "invalid_key", "postEvent", { params: { topic: "hooks", key: "%C3%28" }, raw: true, body: {} });
  await expect(400, "invalid_key", "postEvent", { params: { topic: "hooks", key: "a%00b" }, raw: true, body: {} });
  await expect(400, "invalid_key", "postEvent", { params: { topic: "hooks", key: "bad%zz" }, raw: true, body: {} });
  await expect(413, "payload_too_large", "postEvent", hooks("doc-1", { body: { pad: "x".repeat(2_000) } }));
  await expect(401, "unauthorized", "postEvent", hooks("doc-1", { body: {}, token: null }));
  await expect(401, "unauthorized", "postEvent", hooks("doc-1", { body: {}, token: "not-a-token-of-this-worker" }));
  await expect(403, "forbidden", "postEvent", { ...key("other", "doc-1"), body: {}, token: HOOKS_TOKEN });
  await expect(404, "unknown_topic", "postEvent", { ...key("nope", "doc-1"), body: {} });
  await expect(404, "unknown_topic", "postEvent", { ...key("b@d", "doc-1"), body: {} });
  await expect(405, "method_not_allowed", "postEvent", hooks("doc-1", { method: "GET" }));
});

test("a key's status, flush, cancel and timeline, by admin and client tokens", async () => {
  const status = await expect(200, null, "getKeyStatus", key("hooks", "doc-1"));
  assert.equal(status.json.state, "open");
  await expect(200, null, "getKeyStatus", key("hooks", "never-seen"));
  await expect(400, "invalid_key", "getKeyStatus", key("hooks", "k".repeat(513)));
  // The header is checked on every key route (documented as such).
  await expect(400, "invalid_idempotency_key", "getKeyStatus", { ...key("hooks", "doc-1"), headers: { "Idempotency-Key": "has space" } });
  await expect(401, "unauthorized", "getKeyStatus", { ...key("hooks", "doc-1"), token: null });
  await expect(403, "forbidden", "getKeyStatus", { ...key("hooks", "doc-1"), token: TOKENS.ingest });
  await expect(404, "unknown_topic", "getKeyStatus", key("nope", "doc-1"));
  const put = await expect(405, "method_not_allowed", "getKeyStatus", { ...key("hooks", "doc-1"), method: "PUT", body: {} });
  assert.equal(put.headers.allow, "GET, DELETE");

  await expect(200, null, "flushKey", key("hooks", "doc-1"));
  await expect(403, "forbidden", "flushKey", { ...key("hooks", "doc-1"), token: TOKENS.ingest });
  await expect(405, "method_not_allowed", "flushKey", { ...key("hooks", "doc-1"), method: "GET" });
  await expect(202, null, "postEvent", { ...key("hooks", "doc-2"), body: { n: 1 } });
  const cancelled = await expect(200, null, "cancelKey", key("hooks", "doc-2"));
  assert.equal(cancelled.json.open, null);
  await expect(403, "forbidden", "cancelKey", { ...key("hooks", "doc-2"), token: HOOKS_TOKEN });

  // A client token minted by the admin route: its key's events, and flush and cancel as granted, nothing else.
  const eventsOnly = await expect(201, null, "mintClientToken", { params: { topic: "hooks" }, body: { key: "page-1" } });
  await expect(403, "forbidden", "flushKey", { ...key("hooks", "page-1"), token: eventsOnly.json.token });
  await expect(403, "forbidden", "cancelKey", { ...key("hooks", "page-1"), token: eventsOnly.json.token });
  await expect(409, "client_tokens_off", "mintClientToken", { params: { topic: "other" }, body: { key: "page-1" } });
  const grant = { key: "page-1", events_per_minute: 2, ops: ["flush", "cancel"], sub: "page-user" };
  const minted = await expect(201, null, "mintClientToken", { params: { topic: "hooks" }, body: grant });
  const page = minted.json.token;
  await expect(202, null, "postEvent", { ...key("hooks", "page-1"), body: { n: 1 }, token: page });
  await expect(200, null, "flushKey", { ...key("hooks", "page-1"), token: page });
  await expect(202, null, "postEvent", { ...key("hooks", "page-1"), body: { n: 2 }, token: page });
  await expect(200, null, "cancelKey", { ...key("hooks", "page-1"), token: page });
  const refused = await expect(429, "too_many_events", "postEvent", { ...key("hooks", "page-1"), body: { n: 3 }, token: page });
  assert.ok(Number(refused.headers["retry-after"]) >= 1);
  await expect(403, "forbidden", "postEvent", { ...key("hooks", "page-2"), body: {}, token: page });
  await expect(403, "forbidden", "getKeyStatus", { ...key("hooks", "page-1"), token: page });
  // One signed by a backend with jose: a kid, an nbf, a prefix.
  const secret = new TextEncoder().encode(CLIENT_SECRET);
  const signed = await new SignJWT({ topic: "hooks", key_prefix: "user-7/", nbf: now() - 5, ops: ["cancel"] })
    .setProtectedHeader({ alg: "HS256", typ: "JWT", kid: decodeProtectedHeader(page).kid }).setIssuedAt().setExpirationTime(now() + 300).sign(secret);
  await expect(202, null, "postEvent", { ...key("hooks", "user-7/draft"), body: { n: 1 }, token: signed });
  await expect(200, null, "cancelKey", { ...key("hooks", "user-7/draft"), token: signed });
  const expired = await new SignJWT({ topic: "hooks", key: "page-1" })
    .setProtectedHeader({ alg: "HS256" }).setIssuedAt(now() - 700).setExpirationTime(now() - 100).sign(secret);
  const late = await expect(401, "unauthorized", "flushKey", { ...key("hooks", "page-1"), token: expired });
  assert.match(late.json.error.message, /expired/);

  const timeline = await expect(200, null, "getKeyTimeline", { ...key("hooks", "doc-1"), query: { limit: 256 } });
  assert.ok(timeline.json.timeline.length >= 3, timeline.text);
  const lines = new Set(timeline.json.timeline.map((e) => e.lull));
  assert.ok(lines.has("accept") && lines.has("fire"), [...lines].join());
  await expect(200, null, "getKeyTimeline", { ...key("hooks", "doc-1"), query: { after: 1, limit: 1 } });
  await expect(400, "bad_query", "getKeyTimeline", { ...key("hooks", "doc-1"), query: { limit: 257 } });
  await expect(400, "bad_query", "getKeyTimeline", { ...key("hooks", "doc-1"), query: { colour: "red" } });
  await expect(405, "method_not_allowed", "getKeyTimeline", { ...key("hooks", "doc-1"), method: "POST" });
});

test("a key's dead letters: listed, replayed, discarded; the pending bound refuses events", { timeout: 60_000 }, async () => {
  const dl = key("fails", "dl");
  const deadLetter = async () => until(async () => {
    const res = await call("getKeyStatus", dl, "status while waiting for a dead letter");
    until.last = res.json;
    return res.json.dead_letter_count === 1 && res.json.run === null && res.json.due.length === 0 && res.json;
  }, 20_000, "a dead letter");
  await expect(202, null, "postEvent", { ...dl, body: { n: 1 } });
  const status = await deadLetter();
  const window = status.dead_letters[0].window;
  const full = await expect(429, "too_many_pending", "postEvent", { ...dl, body: { n: 2 } });
  assert.ok(Number(full.headers["retry-after"]) >= 1);

  const listed = await expect(200, null, "listKeyDeadLetters", { ...dl, query: { limit: 500 } });
  assert.deepEqual(listed.json.dead_letters.map((d) => d.window), [window]);
  await expect(200, null, "listKeyDeadLetters", { ...dl, query: { after: window, limit: 1 } });
  await expect(400, "bad_query", "listKeyDeadLetters", { ...dl, query: { limit: 501 } });
  await expect(400, "bad_query", "listKeyDeadLetters", { ...dl, query: { after: "x" } });
  await expect(403, "forbidden", "listKeyDeadLetters", { ...dl, token: TOKENS.ingest });
  await expect(405, "method_not_allowed", "listKeyDeadLetters", { ...dl, method: "POST" });

  const replayed = await expect(200, null, "replayKeyDeadLetter", { params: { ...dl.params, window } });
  assert.equal(replayed.json.dead_letter_count, 0);
  await expect(404, "not_found", "replayKeyDeadLetter", { params: { ...dl.params, window: 999 } });
  await expect(404, "not_found", "replayKeyDeadLetter", { params: { ...dl.params, window: "x" } });
  await expect(405, "method_not_allowed", "replayKeyDeadLetter", { params: { ...dl.params, window }, method: "GET" });
  await deadLetter();
  const discarded = await expect(200, null, "discardKeyDeadLetter", { params: { ...dl.params, window } });
  assert.equal(discarded.json.dead_letter_count, 0);
  await expect(404, "not_found", "discardKeyDeadLetter", { params: { ...dl.params, window } });
  await expect(404, "not_found", "discardKeyDeadLetter", { params: { ...dl.params, window: "x" } });
  await expect(403, "forbidden", "discardKeyDeadLetter", { params: { ...dl.params, window }, token: TOKENS.ingest });
  await expect(405, "method_not_allowed", "discardKeyDeadLetter", { params: { ...dl.params, window }, method: "GET" });

  await expect(202, null, "postEvent", { ...dl, body: { n: 3 } });
  await deadLetter();
  const all = await expect(200, null, "replayAllKeyDeadLetters", dl);
  assert.equal(all.json.dead_letter_count, 0);
  await expect(404, "unknown_topic", "replayAllKeyDeadLetters", key("nope", "dl"));
  await expect(405, "method_not_allowed", "replayAllKeyDeadLetters", { ...dl, method: "GET" });
  await deadLetter();

  // A batch with an event for the full key: that key's share is refused (429) in the 207, the other accepted.
  const batch = await expect(207, null, "postBatch", { params: { topic: "fails" }, body: { events: [{ key: "dl", event: 1 }, { key: "fresh", event: 2 }] } });
  assert.deepEqual(batch.json.results.map((r) => r.status), [429, 202]);
  assert.equal(batch.json.results[0].error.code, "too_many_pending");
});

test("batches: results per event, and every refusal of a bad batch", { timeout: 60_000 }, async () => {
  const hooks = { params: { topic: "hooks" } };
  const ok = await expect(207, null, "postBatch", { ...hooks, body: { events: [
    { key: "b-1", event: { n: 1 } }, { key: "b-2", event: [2], idempotency_key: "p-1" }, { key: "b-1", event: "three" },
  ] } });
  assert.deepEqual(ok.json.results.map((r) => r.status), [202, 202, 202]);
  await expect(207, null, "postBatch", { ...hooks, body: { events: [{ key: "b-3", event: null }] }, token: HOOKS_TOKEN });
  const prefix = (await expect(201, null, "mintClientToken", { ...hooks, body: { key_prefix: "b-" } })).json.token;
  await expect(207, null, "postBatch", { ...hooks, body: { events: [{ key: "b-4", event: 1 }] }, token: prefix });
  const scoped = await expect(403, "forbidden", "postBatch", { ...hooks, body: { events: [{ key: "b-5", event: 1 }, { key: "x-1", event: 2 }] }, token: prefix });
  assert.match(scoped.json.error.message, /^events\[1\]: /);
  await expect(401, "unauthorized", "postBatch", { ...hooks, body: { events: [{ key: "b-1", event: 1 }] }, token: null });
  await expect(400, "bad_request", "postBatch", { ...hooks, body: {} });
  await expect(400, "bad_request", "postBatch", { ...hooks, body: { events: [] } });
  await expect(400, "bad_request", "postBatch", { ...hooks, body: { events: [{ key: "b-1", event: 1, topic: "other" }] } });
  await expect(400, "malformed_json", "postBatch", { ...hooks, body: "{ not json" });
  const empty = await expect(400, "invalid_key", "postBatch", { ...hooks, body: { events: [{ key: "b-1", event: 1 }, { key: "", event: 2 }] } });
  assert.match(empty.json.error.message, /^events\[1\]: /);
  for (const dots of [".", ".."]) {
    await expect(400, "invalid_key", "postBatch", { ...hooks, body: { events: [{ key: dots, event: 1 }] } });
  }
  await expect(400, "invalid_idempotency_key", "postBatch", { ...hooks, body: { events: [{ key: "b-1", event: 1, idempotency_key: "has space" }] } });
  await expect(413, "payload_too_large", "postBatch", { ...hooks, body: { events: [{ key: "b-1", event: "x".repeat(2_000) }] } });
  await expect(413, "too_many_items", "postBatch", { ...hooks, body: { events: Array.from({ length: 1_001 }, (_, n) => ({ key: "b-1", event: n })) } });
  await expect(413, "payload_too_large", "postBatch", { ...hooks, body: `{"events": [${" ".repeat(4 * 1024 * 1024)}]}` });
  await expect(404, "unknown_topic", "postBatch", { params: { topic: "nope" }, body: { events: [{ key: "b-1", event: 1 }] } });
  await expect(405, "method_not_allowed", "postBatch", { ...hooks, method: "GET" });
  assert.equal((await call("getKeyStatus", key("hooks", "b-5"))).json.stats.events, 0, "nothing of a refused batch was stored");
});

test("client tokens: minted, and every refusal", async () => {
  const topic = { params: { topic: "hooks" } };
  const one = await expect(201, null, "mintClientToken", { ...topic, body: { key: "doc-1", ttl_s: 120 } });
  assert.ok(Math.abs(one.json.expires_at - (now() + 120)) <= 5);
  await expect(201, null, "mintClientToken", { ...topic, body: { key_prefix: ".", ttl_s: 86_400, events_per_minute: 60 } });
  for (const body of [{}, { key: "a", key_prefix: "b" }, { key: "a", ttl_s: 0 }, { key: "a", ttl_s: 86_401 }, { key: "a", events_per_minute: 0 }, { key: "a", scope: "all" }]) {
    await expect(400, "bad_request", "mintClientToken", { ...topic, body }, `mint ${JSON.stringify(body)}`);
  }
  // A key is refused as a path's key is: one problem, one code.
  for (const body of [{ key: "." }, { key: ".." }, { key: "" }, { key: "a\u0000b" }, { key: "k".repeat(513) }, { key_prefix: "" }]) {
    await expect(400, "invalid_key", "mintClientToken", { ...topic, body }, `mint ${JSON.stringify(body).slice(0, 40)}`);
  }
  await expect(400, "malformed_json", "mintClientToken", { ...topic, body: "{ not json" });
  await expect(400, "malformed_json", "mintClientToken", { ...topic, body: "" });
  await expect(413, "payload_too_large", "mintClientToken", { ...topic, body: { key: "k".repeat(5_000) } });
  await expect(401, "unauthorized", "mintClientToken", { ...topic, body: { key: "a" }, token: null });
  await expect(403, "forbidden", "mintClientToken", { ...topic, body: { key: "a" }, token: TOKENS.ingest });
  await expect(404, "unknown_topic", "mintClientToken", { params: { topic: "nope" }, body: { key: "a" } });
  await expect(405, "method_not_allowed", "mintClientToken", { ...topic, method: "GET" });
});

test("a queue topic: status, dead letters listed, replayed and discarded, events refused while full", { timeout: 120_000 }, async () => {
  const q = { params: { topic: "q" } };
  for (const k of ["qa", "qb", "qc"]) await expect(202, null, "postEvent", { ...key("q", k), body: { k } });
  const full = await until(async () => {
    const res = await call("getQueueStatus", q, "queue status while waiting for two dead letters");
    until.last = res.json;
    return res.json.dead_letter_count === 2 && res.json.dead_letters_full && res.json;
  }, 60_000, "two dead letters kept");
  assert.equal(full.max_queue_dead_letters, 2);
  // The router hears of the bound within a few seconds: events are refused, one by one and in batches.
  const refused = await until(async () => {
    const res = await call("postEvent", { ...key("q", "late"), body: { late: true } }, "an event while the store fills");
    return res.status === 429 && res;
  }, 15_000, "429 dead_letters_full");
  assert.equal(refused.json.error.code, "dead_letters_full");
  await expect(429, "dead_letters_full", "postBatch", { ...q, body: { events: [{ key: "late", event: 1 }] } });

  const page = await expect(200, null, "listQueueDeadLetters", { ...q, query: { limit: 1 } });
  assert.equal(page.json.dead_letters.length, 1);
  assert.notEqual(page.json.next_after, null);
  const rest = await expect(200, null, "listQueueDeadLetters", { ...q, query: { after: page.json.next_after, limit: 500 } });
  assert.equal(rest.json.next_after, null);
  await expect(400, "bad_query", "listQueueDeadLetters", { ...q, query: { limit: 0 } });
  await expect(400, "bad_query", "listQueueDeadLetters", { ...q, query: { colour: "red" } });
  await expect(405, "method_not_allowed", "listQueueDeadLetters", { ...q, method: "POST" });
  await expect(404, "not_found", "listQueueDeadLetters", { params: { topic: "hooks" } });

  const letters = (await until(async () => {
    const res = await call("listQueueDeadLetters", q, "dead letters after the replay");
    return res.json.dead_letters.length > 0 && res;
  }, 60_000, "a dead letter kept again")).json.dead_letters;
  const id = letters[0].id;
  const discarded = await expect(200, null, "discardQueueDeadLetter", { params: { topic: "q", id } });
  assert.equal(discarded.json.discarded, id);
  await expect(404, "not_found", "discardQueueDeadLetter", { params: { topic: "q", id } });
  await expect(404, "not_found", "discardQueueDeadLetter", { params: { topic: "q", id: "x" } });
  await expect(405, "method_not_allowed", "discardQueueDeadLetter", { params: { topic: "q", id }, method: "GET" });
  await expect(404, "not_found", "replayQueueDeadLetter", { params: { topic: "q", id: 999_999 } });
  await expect(405, "method_not_allowed", "replayQueueDeadLetter", { params: { topic: "q", id }, method: "GET" });
  const again = (await until(async () => {
    const res = await call("listQueueDeadLetters", q, "dead letters before replaying all");
    return res.json.dead_letters.length > 0 && res;
  }, 60_000, "a dead letter to replay")).json.dead_letters;
  const single = await expect(200, null, "replayQueueDeadLetter", { params: { topic: "q", id: again[0].id } });
  assert.equal(single.json.replayed, 1);
  await expect(200, null, "replayAllQueueDeadLetters", q);
  await expect(404, "not_found", "replayAllQueueDeadLetters", { params: { topic: "hooks" } });
  await expect(403, "forbidden", "replayAllQueueDeadLetters", { ...q, token: TOKENS.ingest });
  await expect(405, "method_not_allowed", "replayAllQueueDeadLetters", { ...q, method: "GET" });

  await expect(404, "not_found", "getQueueStatus", { params: { topic: "hooks" } });
  await expect(404, "unknown_topic", "getQueueStatus", { params: { topic: "nope" } });
  await expect(401, "unauthorized", "getQueueStatus", { ...q, token: null });
  await expect(403, "forbidden", "getQueueStatus", { ...q, token: TOKENS.ingest });
  await expect(405, "method_not_allowed", "getQueueStatus", { ...q, method: "POST" });
  const counted = await expect(200, null, "getQueueStatus", q);
  assert.ok(counted.json.requests_total > 0 && counted.json.counters.retried > 0, counted.text);
  // Any topic's target: its state, and an operator's resume.
  const hooks = await expect(200, null, "getTopic", { params: { topic: "hooks" } });
  assert.equal(hooks.json.target.state, "active", hooks.text);
  const queued = await expect(200, null, "getTopic", q);
  assert.equal(queued.json.forward_concurrency, counted.json.forward_concurrency, queued.text);
  const resumed = await expect(200, null, "resumeTarget", { params: { topic: "hooks" } });
  assert.equal(resumed.json.target.state, "active");
  await expect(200, null, "recoverTopic", { params: { topic: "hooks" }, body: { since: "2026-12-01T00:00:00Z" } });
  await expect(400, "bad_request", "recoverTopic", { params: { topic: "hooks" }, body: { since: "yesterday" } });
  const scraped = await expect(200, null, "getMetrics", {});
  assert.match(scraped.headers["content-type"], /^text\/plain; version=0\.0\.4/);
  assert.match(scraped.text, /^lull_target_state\{topic="hooks",state="active"\} 1$/m);
});

test("a queue dead letter whose replay is being sent: 409 to its replay and its discard (a race: tried, not promised)", { timeout: 180_000 }, async () => {
  const qbig = { params: { topic: "qbig" } };
  let letters = 20;
  for (let i = 0; i < letters; i++) await expect(202, null, "postEvent", { ...key("qbig", `big-${i}`), body: { i, pad: "x".repeat(105_000) } });
  // A replay of all sends them one per send (each near 110 KB), and every one
  // of them counts as being replayed until the last is sent: meanwhile a
  // replay or a discard of any of them is refused (an answer after that is a
  // 404, or a 200 if it came first; each is validated whatever it is).
  // Whether the runtime hands the object a request while it awaits a send is
  // its own affair (often it holds them until the replay has ended), so the
  // 409 is tried for some rounds and reported, not required.
  const deadline = Date.now() + 60_000;
  for (let round = 1; ; round++) {
    // Every one kept (those a replay sent back fail again and come back; a discard that came first took one).
    const ids = (await until(async () => {
      const res = await call("listQueueDeadLetters", qbig, "dead letters before a replay of all");
      until.last = res.json;
      return res.json.count >= letters && res;
    }, 60_000, `${letters} dead letters kept`)).json.dead_letters.map((l) => l.id);
    let done = false;
    const all = call("replayAllQueueDeadLetters", qbig, "a replay of all").then((res) => ((done = true), res));
    const racing = [];
    for (let i = 0; !done && racing.length < 400; i++) {
      // The later ids: one that a racing call took first leaves the others in the replay.
      const id = ids[ids.length - 1 - (i % (ids.length - 1))];
      racing.push(call("discardQueueDeadLetter", { params: { topic: "qbig", id } }, "a discard beside a replay"));
      racing.push(call("replayQueueDeadLetter", { params: { topic: "qbig", id } }, "a replay beside a replay"));
      await sleep(1);
    }
    const answers = await Promise.all(racing);
    letters -= answers.filter((r) => r.status === 200 && r.method === "DELETE").length;
    const statuses = [(await all).status, ...answers.map((r) => r.status)];
    assert.ok(statuses.every((s) => [200, 404, 409].includes(s)), statuses.join());
    const reached = ["discardQueueDeadLetter", "replayQueueDeadLetter"].filter((opId) => seen.get(opId)?.has(409));
    if (reached.length === 2 || round === 8 || Date.now() > deadline) {
      console.log(`# 409 reached by ${reached.join(" and ") || "neither"} in ${round} round(s); the last: ${statuses.filter((s) => s === 409).length} of ${statuses.length} answers`);
      break;
    }
  }
});

test("a worker whose configuration is broken: 503 from /healthz, 500 config elsewhere", async () => {
  const broken = stateDir();
  const sick = await startEdge({ persist: broken.dir, topics: { t: { target: `${rx.url}/hook`, wait_ms: 10 } }, vars: { LULL_INGEST_TOKEN: "too-short" } });
  try {
    const url = new URL(sick.url);
    const anonymous = await expect(503, "config", "getHealth", { url, token: null });
    assert.doesNotMatch(anonymous.json.error.message, /LULL_INGEST_TOKEN/, "the reason is the admin's only");
    const admin = await expect(503, "config", "getHealth", { url });
    assert.match(admin.json.error.message, /LULL_INGEST_TOKEN/);
    await expect(500, "config", "getKeyStatus", { url, ...key("t", "k") });
    await expect(500, "config", "postEvent", { url, ...key("t", "k"), body: {}, token: TOKENS.ingest });
    await expect(500, "config", "preflightEvent", { url, ...key("t", "k"), token: null, headers: { origin: ORIGIN } });
  } finally {
    await sick.stop();
    broken.cleanup();
  }
});

test("every operation of the document was called, and each kind of refusal was seen", () => {
  const missing = [...ops.keys()].filter((opId) => !seen.has(opId));
  assert.deepEqual(missing, [], "operations the test never called");
  const statuses = new Set([...seen.values()].flatMap((s) => [...s]));
  for (const status of [200, 201, 202, 204, 207, 400, 401, 403, 404, 405, 413, 429, 500, 503]) {
    assert.ok(statuses.has(status), `no answer of status ${status}`);
  }
  const unseen = [...ops].flatMap(([opId, op]) =>
    Object.keys(op.operation.responses).filter((s) => !seen.get(opId)?.has(Number(s))).map((s) => `${opId} ${s}`));
  console.log(`# ${ops.size} operations, ${[...seen.values()].reduce((n, s) => n + s.size, 0)} (operation, status) pairs seen; documented but not reached: ${unseen.join(", ")}`);
});
