// Who may do what, over HTTP on local workerd: admin and ingest tokens in
// rotation, a topic's own ingest token, the configuration's refusals, the
// Bearer scheme in any case, and browser client tokens (HS256 JWTs minted
// with the `jose` library, as a user's backend would): which topics accept
// them and with which secret, scope, the operations granted, lifetime,
// signature, algorithm, rotation by fingerprint, events_per_minute per
// holder, the budget across keys, idempotency keys per caller, and the mint route.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { SignJWT, UnsecuredJWT, decodeProtectedHeader } from "jose";
import { startEdge, startReceiver, stateDir, client, TOKENS, ScheduleBroken, withFreshKey } from "./harness.mjs";

const SECOND_ADMIN = "second-admin-token-for-rotation";
const DOCS_TOKEN = "docs-own-ingest-token-0001";
const CLIENT_SECRETS = ["client-secret-one-0123456789abcdef", "client-secret-two-0123456789abcdef"];
const NOTES_SECRET = "notes-own-client-secret-0123456789";
/** A key_prefix token holder's events across keys per minute, small enough to reach. */
const CLIENT_RATE = 8;
let edge, rx, state;

before(async () => {
  rx = await startReceiver();
  state = stateDir();
  const topic = { target: `${rx.url}/hook`, wait_ms: 60_000, payload: "all" };
  edge = await startEdge({
    persist: state.dir,
    topics: {
      // Client tokens signed with LULL_CLIENT_TOKEN_SECRET; notes has its own secret; orders accepts none.
      docs: { ...topic, ingest_token_env: "DOCS_TOKEN", client_tokens: true },
      notes: { ...topic, client_token_secret_env: "NOTES_CLIENT_SECRET" },
      orders: topic,
    },
    vars: {
      LULL_ADMIN_TOKEN: `${TOKENS.admin} ${SECOND_ADMIN}`,
      DOCS_TOKEN,
      LULL_CLIENT_TOKEN_SECRET: CLIENT_SECRETS.join("\n"),
      NOTES_CLIENT_SECRET: NOTES_SECRET,
    },
    clientRate: CLIENT_RATE,
  });
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

const now = () => Math.floor(Date.now() / 1000);

/** A client token signed with `secret` (the first by default), as a backend would mint it with jose. */
async function jwt(claims, { secret = CLIENT_SECRETS[0], kid, iat = now(), exp = now() + 600 } = {}) {
  const signer = new SignJWT({ ...claims }).setProtectedHeader({ alg: "HS256", typ: "JWT", ...(kid ? { kid } : {}) });
  if (iat !== null) signer.setIssuedAt(iat);
  return signer.setExpirationTime(exp).sign(new TextEncoder().encode(secret));
}

/** A secret's `kid`: 8 bytes of its SHA-256, base64url (as JWKS names keys by thumbprint). */
const fingerprint = (secret) => createHash("sha256").update(secret).digest().subarray(0, 8).toString("base64url");

/** Rows SQLite wrote for the key so far (its cursors' own rowsWritten, summed): 0 for a key never written. */
const events = async (topic, key) => (await client(edge.url).status(topic, key)).json.io?.rows_written ?? 0;

test("admin tokens in rotation, and ingest tokens that may only post", async () => {
  for (const admin of [TOKENS.admin, SECOND_ADMIN]) {
    assert.equal((await client(edge.url, admin).status("orders", "rot")).status, 200, "every admin token works");
  }
  const ingest = client(edge.url, TOKENS.ingest);
  assert.equal((await ingest.event("orders", "rot", { n: 1 })).status, 202);
  assert.equal((await ingest.status("orders", "rot")).status, 403);
  const lower = await client(edge.url, TOKENS.ingest).call("POST", "/v1/topics/orders/keys/rot/events", { n: 2 }, {
    authorization: `bearer ${TOKENS.ingest}`,
  });
  assert.equal(lower.status, 202, "the scheme in any case");
});

test("a topic's own ingest token posts to that topic only", async () => {
  const own = client(edge.url, DOCS_TOKEN);
  assert.equal((await own.event("docs", "d1", { n: 1 })).status, 202);
  const other = await own.event("orders", "d1", { n: 1 });
  assert.deepEqual([other.status, other.json.error.code], [403, "forbidden"], "another topic");
  assert.equal((await own.status("docs", "d1")).status, 403, "an admin route of its own topic");
  assert.equal((await own.flush("docs", "d1")).status, 403);
  assert.equal(await events("orders", "d1"), 0, "nothing stored where it was refused");
});

test("client tokens: a key or a prefix of one topic, nothing else", async () => {
  const key = client(edge.url, await jwt({ topic: "docs", key: "doc-1", ops: ["flush"] }));
  assert.equal((await key.event("docs", "doc-1", { n: 1 })).status, 202);
  assert.equal((await key.flush("docs", "doc-1")).status, 200, "its own flush, granted");
  assert.equal((await key.event("docs", "doc-10", { n: 1 })).status, 403, "another key");
  assert.equal((await key.status("docs", "doc-1")).status, 403, "an admin route");
  assert.equal((await key.call("POST", "/v1/topics/docs/client-tokens", { key: "x" })).status, 403, "minting");
  // Another topic checks it with its own secrets: orders accepts no client token, notes only its own.
  assert.equal((await key.event("orders", "doc-1", { n: 1 })).status, 401, "a topic without client tokens");
  const notes = await key.event("notes", "doc-1", { n: 1 });
  assert.deepEqual([notes.status, notes.json.error.message], [401, "the client token's signature does not verify"]);
  const own = client(edge.url, await jwt({ topic: "notes", key: "n-1" }, { secret: NOTES_SECRET }));
  assert.equal((await own.event("notes", "n-1", { n: 1 })).status, 202, "notes' own secret signs notes' tokens");
  const global = client(edge.url, await jwt({ topic: "notes", key: "n-1" }));
  assert.equal((await global.event("notes", "n-1", { n: 1 })).status, 401, "not the global secret");

  const prefix = client(edge.url, await jwt({ topic: "docs", key_prefix: "user-7/", ops: ["cancel"] }));
  assert.equal((await prefix.event("docs", "user-7/draft", { n: 1 })).status, 202);
  assert.equal((await prefix.event("docs", "user-8/draft", { n: 1 })).status, 403);
  assert.equal((await prefix.cancel("docs", "user-7/draft")).status, 200, "its own cancel, granted");
  assert.equal(await events("docs", "user-8/draft"), 0);
});

test("a client token posts events only unless its ops grant flush or cancel", async () => {
  // A backend's event a page must not drop: the page's token may post, not cancel.
  const backend = client(edge.url, TOKENS.ingest);
  assert.equal((await backend.event("docs", "shared-1", { from: "backend" })).status, 202);
  const page = client(edge.url, await jwt({ topic: "docs", key: "shared-1" }));
  assert.equal((await page.event("docs", "shared-1", { from: "page" })).status, 202);
  const written = await events("docs", "shared-1");
  for (const [name, res] of [["cancel", await page.cancel("docs", "shared-1")], ["flush", await page.flush("docs", "shared-1")]]) {
    assert.deepEqual([res.status, res.json.error.code], [403, "forbidden"], name);
  }
  assert.equal(await events("docs", "shared-1"), written, "nothing changed");
  const status = await client(edge.url).status("docs", "shared-1");
  assert.equal(status.json.open.span.last - status.json.open.span.first + 1, 2, "both events still open");
  const granted = client(edge.url, await jwt({ topic: "docs", key: "shared-1", ops: ["flush", "cancel"] }));
  assert.equal((await granted.cancel("docs", "shared-1")).status, 200, "granted, it cancels");
});

test("idempotency keys are each caller's own, and a reused key with another body is 409", async () => {
  const page = client(edge.url, await jwt({ topic: "docs", key: "idem-1" }));
  const backend = client(edge.url, TOKENS.ingest);
  const key = { "idempotency-key": "save-1" };
  const first = await page.event("docs", "idem-1", { from: "page" }, key);
  assert.equal(first.status, 202);
  const real = await backend.event("docs", "idem-1", { from: "backend" }, key);
  assert.equal(real.status, 202);
  assert.notEqual(real.json.seq, first.json.seq, "the backend's event is its own, stored");
  assert.deepEqual((await backend.event("docs", "idem-1", { from: "backend" }, key)).json, real.json, "a repeat");
  const written = await events("docs", "idem-1");
  const reused = await backend.event("docs", "idem-1", { from: "someone else" }, key);
  assert.deepEqual([reused.status, reused.json.error.code], [409, "idempotency_key_reused"]);
  assert.equal(await events("docs", "idem-1"), written, "nothing stored");
  // Two tokens of one holder (`sub`) share their keys; another holder's are its own.
  const alice = client(edge.url, await jwt({ topic: "docs", key: "idem-1", sub: "alice" }));
  const aliceAgain = client(edge.url, await jwt({ topic: "docs", key: "idem-1", sub: "alice" }, { exp: now() + 300 }));
  const bob = client(edge.url, await jwt({ topic: "docs", key: "idem-1", sub: "bob" }));
  const hers = await alice.event("docs", "idem-1", { n: 1 }, key);
  assert.deepEqual((await aliceAgain.event("docs", "idem-1", { n: 1 }, key)).json, hers.json, "one holder");
  assert.notEqual((await bob.event("docs", "idem-1", { n: 1 }, key)).json.seq, hers.json.seq, "another holder");
});

test("a key_prefix token spends its holder's budget across keys; a flush of a key never seen stores nothing", async () => {
  await withFreshKey("spray", async (name) => {
    const holder = await jwt({ topic: "docs", key_prefix: `${name}/`, sub: name, ops: ["flush", "cancel"] });
    const spray = client(edge.url, holder);
    const answers = [];
    const began = Date.now();
    for (let n = 0; n < CLIENT_RATE + 2; n++) answers.push((await spray.event("docs", `${name}/${n}`, { n })).status);
    const refused = await spray.event("docs", `${name}/late`, { n: 0 });
    const batch = await spray.call("POST", "/v1/topics/docs/events:batch", { events: [{ key: `${name}/b1`, event: 1 }] });
    // The rate limiting binding counts the budget by the wall clock's minutes (Miniflare's
    // does): all of it was spent within one, unless the test ran across a minute's end.
    const minute = (at) => Math.floor(at / 60_000);
    if (minute(Date.now()) !== minute(began)) throw new ScheduleBroken(`the budget's minute ended during the spray (began ${began % 60_000} ms into one)`);
    assert.deepEqual(answers.slice(0, CLIENT_RATE), Array(CLIENT_RATE).fill(202), "within the budget");
    assert.deepEqual(answers.slice(CLIENT_RATE), [429, 429], "past it, across keys");
    assert.equal(refused.json.error.code, "too_many_events");
    assert.equal(await events("docs", `${name}/late`), 0, "a refused key stores nothing");
    assert.deepEqual([batch.status, batch.json.results[0].status], [207, 429], "a batch's key share spends it too");
    // A one-key token and backends are not on that budget.
    assert.equal((await client(edge.url, await jwt({ topic: "docs", key: `${name}/0` })).event("docs", `${name}/0`, {})).status, 202);
    // Flush and cancel of keys it never posted to write nothing: no key is made.
    for (const n of [1, 2, 3]) {
      assert.equal((await spray.flush("docs", `${name}/never-${n}`)).status, 200);
      assert.equal((await spray.cancel("docs", `${name}/never-${n}`)).status, 200);
      assert.equal(await events("docs", `${name}/never-${n}`), 0, "no row written");
    }
  });
});

test("client tokens that do not verify now get 401 with the reason", async () => {
  const refused = async (token, reason) => {
    const res = await client(edge.url, token).event("docs", "doc-1", { n: 1 });
    assert.equal(res.status, 401, reason.source);
    assert.equal(res.json.error.code, "unauthorized");
    assert.match(res.json.error.message, reason);
    assert.doesNotMatch(res.json.error.message, /client-secret/);
  };
  await refused(await jwt({ topic: "docs", key: "doc-1" }, { iat: now() - 700, exp: now() - 100 }), /expired/);
  await refused(await jwt({ topic: "docs", key: "doc-1", nbf: now() + 600 }), /not valid yet/);
  const skewed = await client(edge.url, await jwt({ topic: "docs", key: "doc-1", nbf: now() + 30 })).event("docs", "doc-1", {});
  assert.equal(skewed.status, 202, "an nbf 30 s ahead: within the clock leeway");
  await refused(await jwt({ topic: "docs", key: "doc-1" }, { exp: now() + 90_000 }), /longer than 86400/);
  await refused(await jwt({ topic: "docs", key: "doc-1" }, { iat: null, exp: now() + 90_000 }), /longer than 86400/);
  await refused(await jwt({ topic: "docs", key: "doc-1" }, { secret: "not-a-configured-secret-0123456789" }), /signature/);
  const pinned = { kid: fingerprint(CLIENT_SECRETS[0]), secret: CLIENT_SECRETS[1] };
  await refused(await jwt({ topic: "docs", key: "doc-1" }, pinned), /signature/);
  await refused(await jwt({ topic: "docs", key_prefix: "" }), /key_prefix must not be empty/);
  const unsigned = new UnsecuredJWT({ topic: "docs", key: "doc-1" }).setExpirationTime(now() + 600).encode();
  await refused(unsigned, /algorithm "none"/);
  await refused(await jwt({ topic: "docs", key: "doc-1", key_prefix: "doc" }), /exactly one of key and key_prefix/);
  assert.equal(await events("docs", "doc-1") > 0, true);

  // The second secret of a rotation signs too: with its fingerprint, without a kid, or with an old positional kid.
  for (const kid of [undefined, fingerprint(CLIENT_SECRETS[1]), "0", "1"]) {
    const rotated = client(edge.url, await jwt({ topic: "docs", key: "doc-2" }, { secret: CLIENT_SECRETS[1], kid }));
    assert.equal((await rotated.event("docs", "doc-2", { n: 1 })).status, 202);
  }
});

test("events_per_minute: past it 429 with Retry-After, and nothing stored", async () => {
  const limited = client(edge.url, await jwt({ topic: "docs", key: "burst", events_per_minute: 3 }));
  for (let n = 0; n < 3; n++) assert.equal((await limited.event("docs", "burst", { n })).status, 202);
  const stored = await events("docs", "burst");
  const refused = await limited.event("docs", "burst", { n: 3 });
  assert.deepEqual([refused.status, refused.json.error.code], [429, "too_many_events"]);
  const retry = Number(refused.headers.get("retry-after"));
  assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
  assert.equal(await events("docs", "burst"), stored, "the refused event was not stored");
  const ingest = client(edge.url, TOKENS.ingest);
  assert.equal((await ingest.event("docs", "burst", { n: 4 })).status, 202, "the bound is the client token's only");
  const other = client(edge.url, await jwt({ topic: "docs", key: "burst", events_per_minute: 3 }, { exp: now() + 300 }));
  assert.equal((await other.event("docs", "burst", { n: 5 })).status, 202, "another holder's minute is its own");
});

test("events_per_minute: a batch that does not fit is refused whole, and the count is not reset by it", async () => {
  const page = client(edge.url, await jwt({ topic: "docs", key: "whole", events_per_minute: 3, sub: "p" }));
  for (let n = 0; n < 2; n++) assert.equal((await page.event("docs", "whole", { n })).status, 202);
  const written = await events("docs", "whole");
  const two = { events: [{ key: "whole", event: { n: 2 } }, { key: "whole", event: { n: 3 } }] };
  const batch = await page.call("POST", "/v1/topics/docs/events:batch", two);
  assert.deepEqual(batch.json.results.map((r) => r.status), [429, 429], "the share, whole");
  assert.equal(await events("docs", "whole"), written, "nothing of it stored");
  assert.equal((await page.event("docs", "whole", { n: 2 })).status, 202, "room for one");
  const spent = await page.event("docs", "whole", { n: 3 });
  assert.equal(spent.status, 429, "and no more: the refused batch reset nothing");
});

test("the mint route gives a backend a client token that works", async () => {
  const admin = client(edge.url);
  const minted = await admin.call("POST", "/v1/topics/docs/client-tokens", { key: "minted-1", ttl_s: 120 });
  assert.equal(minted.status, 201);
  assert.ok(Math.abs(minted.json.expires_at - (now() + 120)) <= 2);
  assert.equal(decodeProtectedHeader(minted.json.token).kid, fingerprint(CLIENT_SECRETS[0]), "kid: the fingerprint");
  const page = client(edge.url, minted.json.token);
  assert.equal((await page.event("docs", "minted-1", { n: 1 })).status, 202);
  assert.equal((await page.event("docs", "minted-2", { n: 1 })).status, 403);
  assert.equal((await page.flush("docs", "minted-1")).status, 403, "events only unless asked");
  const granted = await admin.call("POST", "/v1/topics/docs/client-tokens", { key: "minted-1", ops: ["flush"] });
  assert.equal((await client(edge.url, granted.json.token).flush("docs", "minted-1")).status, 200);
  const notes = await admin.call("POST", "/v1/topics/notes/client-tokens", { key: "n-2" });
  assert.equal(decodeProtectedHeader(notes.json.token).kid, fingerprint(NOTES_SECRET), "the topic's own secret");
  assert.equal((await client(edge.url, notes.json.token).event("notes", "n-2", {})).status, 202);
  const off = await admin.call("POST", "/v1/topics/orders/client-tokens", { key: "a" });
  assert.deepEqual([off.status, off.json.error.code], [409, "client_tokens_off"]);
  for (const [body, code] of [[{}, "bad_request"], [{ key: "a", ttl_s: 86_401 }, "bad_request"],
                              [{ key: "a", key_prefix: "b" }, "bad_request"]]) {
    const res = await admin.call("POST", "/v1/topics/docs/client-tokens", body);
    assert.deepEqual([res.status, res.json.error.code], [400, code], JSON.stringify(body));
  }
  const ingest = await client(edge.url, TOKENS.ingest).call("POST", "/v1/topics/docs/client-tokens", { key: "a" });
  assert.equal(ingest.status, 403);
  const unknown = await admin.call("POST", "/v1/topics/nope/client-tokens", { key: "a" });
  assert.equal(unknown.status, 404);
});

test("the configuration refuses short tokens, a token both admin and ingest, client tokens with no secret", async () => {
  for (const [vars, reason] of [
    [{ LULL_INGEST_TOKEN: "too-short" }, /LULL_INGEST_TOKEN holds a token of 9 characters/],
    [{ LULL_INGEST_TOKEN: `${TOKENS.ingest} ${TOKENS.admin}` }, /both an admin token/],
    [{ LULL_CLIENT_TOKEN_SECRET: "short-secret" }, /LULL_CLIENT_TOKEN_SECRET holds a secret of 12 characters/],
    [{}, /topic "t" accepts client tokens, but LULL_CLIENT_TOKEN_SECRET holds no secret/],
  ]) {
    const s = stateDir();
    // The last case: a topic that accepts client tokens with no secret to check them.
    const t = { target: `${rx.url}/hook`, wait_ms: 10, client_tokens: Object.keys(vars).length === 0 };
    const broken = await startEdge({ persist: s.dir, topics: { t }, vars });
    try {
      const res = await client(broken.url).call("GET", "/healthz");
      assert.deepEqual([res.status, res.json.error.code], [503, "config"]);
      assert.match(res.json.error.message, reason, "an admin sees why");
      assert.doesNotMatch(res.json.error.message, new RegExp(TOKENS.admin), "never the token itself");
      const anonymous = await client(broken.url, "").call("GET", "/healthz");
      assert.doesNotMatch(anonymous.json.error.message, reason);
    } finally {
      await broken.stop();
      s.cleanup();
    }
  }
});
