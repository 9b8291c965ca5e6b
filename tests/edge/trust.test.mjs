// Who may do what, over HTTP on local workerd: admin and ingest tokens in
// rotation, a topic's own ingest token, the configuration's refusals, the
// Bearer scheme in any case, and browser client tokens (HS256 JWTs minted
// with the `jose` library, as a user's backend would): scope, lifetime,
// signature, algorithm, rotation, events_per_minute, and the mint route.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { SignJWT, UnsecuredJWT } from "jose";
import { startEdge, startReceiver, stateDir, client, TOKENS } from "./harness.mjs";

const SECOND_ADMIN = "second-admin-token-for-rotation";
const DOCS_TOKEN = "docs-own-ingest-token-0001";
const CLIENT_SECRETS = ["client-secret-one-0123456789abcdef", "client-secret-two-0123456789abcdef"];
let edge, rx, state;

before(async () => {
  rx = await startReceiver();
  state = stateDir();
  const topic = { target: `${rx.url}/hook`, wait_ms: 60_000, payload: "all" };
  edge = await startEdge({
    persist: state.dir,
    topics: { docs: { ...topic, ingest_token_env: "DOCS_TOKEN" }, orders: topic },
    vars: {
      LULL_ADMIN_TOKEN: `${TOKENS.admin} ${SECOND_ADMIN}`,
      DOCS_TOKEN,
      LULL_CLIENT_TOKEN_SECRET: CLIENT_SECRETS.join("\n"),
    },
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
  const key = client(edge.url, await jwt({ topic: "docs", key: "doc-1" }));
  assert.equal((await key.event("docs", "doc-1", { n: 1 })).status, 202);
  assert.equal((await key.flush("docs", "doc-1")).status, 200, "its own flush");
  assert.equal((await key.event("docs", "doc-10", { n: 1 })).status, 403, "another key");
  assert.equal((await key.event("orders", "doc-1", { n: 1 })).status, 403, "another topic");
  assert.equal((await key.status("docs", "doc-1")).status, 403, "an admin route");
  assert.equal((await key.call("POST", "/v1/topics/docs/client-tokens", { key: "x" })).status, 403, "minting");

  const prefix = client(edge.url, await jwt({ topic: "docs", key_prefix: "user-7/" }));
  assert.equal((await prefix.event("docs", "user-7/draft", { n: 1 })).status, 202);
  assert.equal((await prefix.event("docs", "user-8/draft", { n: 1 })).status, 403);
  assert.equal((await prefix.cancel("docs", "user-7/draft")).status, 200, "its own cancel");
  assert.equal(await events("docs", "user-8/draft"), 0);
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
  await refused(await jwt({ topic: "docs", key: "doc-1" }, { exp: now() + 90_000 }), /longer than 86400/);
  await refused(await jwt({ topic: "docs", key: "doc-1" }, { iat: null, exp: now() + 90_000 }), /longer than 86400/);
  await refused(await jwt({ topic: "docs", key: "doc-1" }, { secret: "not-a-configured-secret-0123456789" }), /signature/);
  await refused(await jwt({ topic: "docs", key: "doc-1" }, { kid: "0", secret: CLIENT_SECRETS[1] }), /signature/);
  const unsigned = new UnsecuredJWT({ topic: "docs", key: "doc-1" }).setExpirationTime(now() + 600).encode();
  await refused(unsigned, /algorithm "none"/);
  await refused(await jwt({ topic: "docs", key: "doc-1", key_prefix: "doc" }), /exactly one of key and key_prefix/);
  assert.equal(await events("docs", "doc-1") > 0, true);

  // The second secret of a rotation signs too (with or without its kid).
  for (const kid of [undefined, "1"]) {
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
});

test("the mint route gives a backend a client token that works", async () => {
  const admin = client(edge.url);
  const minted = await admin.call("POST", "/v1/topics/docs/client-tokens", { key: "minted-1", ttl_s: 120 });
  assert.equal(minted.status, 201);
  assert.ok(Math.abs(minted.json.expires_at - (now() + 120)) <= 2);
  const page = client(edge.url, minted.json.token);
  assert.equal((await page.event("docs", "minted-1", { n: 1 })).status, 202);
  assert.equal((await page.event("docs", "minted-2", { n: 1 })).status, 403);
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

test("the configuration refuses short tokens and a token both admin and ingest", async () => {
  for (const [vars, reason] of [
    [{ LULL_INGEST_TOKEN: "too-short" }, /LULL_INGEST_TOKEN holds a token of 9 characters/],
    [{ LULL_INGEST_TOKEN: `${TOKENS.ingest} ${TOKENS.admin}` }, /both an admin token/],
    [{ LULL_CLIENT_TOKEN_SECRET: "short-secret" }, /LULL_CLIENT_TOKEN_SECRET holds a secret of 12 characters/],
  ]) {
    const s = stateDir();
    const broken = await startEdge({ persist: s.dir, topics: { t: { target: `${rx.url}/hook`, wait_ms: 10 } }, vars });
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
