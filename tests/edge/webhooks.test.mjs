// Standard Webhooks signatures on real deliveries, checked by the off-the-shelf
// verifiers (the `standardwebhooks` package and `svix`'s): two global secrets in
// rotation (each alone verifies), a topic with its own secret (the global ones
// do not verify it), a queue topic's forward, a changed `webhook-id`; the demo
// sink's own check; and the configuration check refusing bad secrets.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";
import { startEdge, startReceiver, stateDir, client } from "./harness.mjs";

/** A `whsec_` secret of 32 bytes, all `byte`. */
const secret = (byte) => `whsec_${Buffer.alloc(32, byte).toString("base64")}`;
const [OLD, NEW, OWN] = [secret(1), secret(2), secret(3)];

// Each throws unless the delivery verifies; `standardwebhooks` returns the parsed payload.
const VERIFIERS = [
  ["standardwebhooks", (s, raw, headers) => assert.deepEqual(new StandardWebhook(s).verify(raw, headers), JSON.parse(raw))],
  ["svix", (s, raw, headers) => new SvixWebhook(s).verify(raw, headers)],
];

/** Whether `s` verifies delivery `d` (its raw body and headers) with both packages; they must agree. */
function verifies(s, d, headers = d.headers, raw = d.raw) {
  const verdicts = VERIFIERS.map(([, check]) => {
    try {
      check(s, raw, headers);
      return true;
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      return false;
    }
  });
  assert.equal(verdicts[0], verdicts[1], "the two verifiers agree");
  return verdicts[0];
}

let rx, state, edge, api;

before(async () => {
  rx = await startReceiver();
  state = stateDir();
  const topics = {
    hooks: { target: `${rx.url}/hooks`, wait_ms: 50, payload: "all" },
    own: { target: `${rx.url}/own`, wait_ms: 50, signing_secret_env: "OWN_SIGNING_SECRET" },
    q: { target: `${rx.url}/q`, wait_ms: 50, delivery: "queue" },
    qown: { target: `${rx.url}/qown`, wait_ms: 50, delivery: "queue", signing_secret_env: "OWN_SIGNING_SECRET" },
  };
  // Two secrets during a rotation, separated by any whitespace.
  const vars = { LULL_SIGNING_SECRET: `${OLD}\n ${NEW}`, OWN_SIGNING_SECRET: OWN };
  edge = await startEdge({ topics, persist: state.dir, vars });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
});

/** The first delivery to `path`, after posting one event to `topic`/`key`. */
async function deliveryVia(topic, key, path) {
  assert.equal((await api.event(topic, key, { n: 1, text: "héllo" })).status, 202);
  const [d] = await rx.waitFor(1, 20_000, key);
  assert.equal(d.path, path);
  return d;
}

test("a webhook delivery verifies with standardwebhooks and svix under each of two rotating secrets", async () => {
  const d = await deliveryVia("hooks", "rotating", "/hooks");
  assert.equal(d.headers["webhook-id"], d.idempotencyKey, "webhook-id is the window's idempotency key");
  assert.match(d.headers["webhook-timestamp"], /^\d+$/);
  assert.ok(Math.abs(Number(d.headers["webhook-timestamp"]) - d.at / 1000) < 60, "unix seconds, now");
  const entries = d.headers["webhook-signature"].split(" ");
  assert.equal(entries.length, 2, "one entry per secret of the rotation");
  for (const entry of entries) assert.match(entry, /^v1,[A-Za-z0-9+/]{43}=$/);
  assert.equal(d.headers["lull-signature"], undefined, "Lull-Signature is gone");
  assert.equal(d.headers["lull-attempt"], "1");
  assert.ok(verifies(OLD, d), "the old secret alone verifies");
  assert.ok(verifies(NEW, d), "the new secret alone verifies");
  assert.ok(!verifies(OWN, d), "another topic's secret does not");
  assert.ok(!verifies(secret(9), d), "a wrong secret does not");
});

test("a delivery whose webhook-id, timestamp or body changed fails verification", async () => {
  const d = rx.of("rotating")[0] ?? (await deliveryVia("hooks", "rotating", "/hooks"));
  assert.ok(verifies(NEW, d));
  // Replayed under a fresh idempotency key: the id is signed, so it no longer verifies.
  const otherId = { ...d.headers, "webhook-id": d.headers["webhook-id"].replace(/\.(\d+)$/, (_, w) => `.${Number(w) + 1}`) };
  assert.notEqual(otherId["webhook-id"], d.headers["webhook-id"]);
  assert.ok(!verifies(NEW, d, otherId) && !verifies(OLD, d, otherId), "a changed webhook-id fails");
  const otherTime = { ...d.headers, "webhook-timestamp": String(Number(d.headers["webhook-timestamp"]) - 1) };
  assert.ok(!verifies(NEW, d, otherTime), "a changed webhook-timestamp fails");
  assert.ok(!verifies(NEW, d, d.headers, d.raw.replace('"n":1', '"n":2')), "a changed body fails");
});

test("a topic with its own signing_secret_env is signed with that secret alone, not the global ones", async () => {
  const d = await deliveryVia("own", "own-secret", "/own");
  assert.equal(d.headers["webhook-signature"].split(" ").length, 1);
  assert.ok(verifies(OWN, d), "the topic's secret verifies");
  assert.ok(!verifies(OLD, d), "the global secret does not");
  assert.ok(!verifies(NEW, d), "nor the other global secret");
  assert.ok(!d.verified, "nor the harness's default secret");
});

test("a queue topic's forwarded delivery is signed the same way, with the topic's own secret if it has one", { timeout: 60_000 }, async () => {
  const d = await deliveryVia("q", "queued", "/q");
  assert.equal(d.headers["webhook-id"], d.idempotencyKey);
  assert.equal(d.headers["webhook-signature"].split(" ").length, 2);
  assert.ok(verifies(OLD, d) && verifies(NEW, d), "each secret of the rotation verifies the forward");
  assert.ok(!verifies(OWN, d));
  const own = await deliveryVia("qown", "queued-own", "/qown");
  assert.equal(own.headers["webhook-id"], own.idempotencyKey);
  assert.ok(verifies(OWN, own), "the queue topic's own secret verifies its forward");
  assert.ok(!verifies(OLD, own) && !verifies(NEW, own), "the global ones do not");
});

test("the demo sink verifies Standard Webhooks signatures with the topic's secrets", async () => {
  const sink = async (topic, s, id = `${topic}/k/1`) => {
    const body = JSON.stringify({ topic, key: "k", window: 1, reason: "quiet", count: 0, first_at: 0, last_at: 0, events: [] });
    const at = new Date();
    const headers = {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(at / 1000)),
      "webhook-signature": s ? new StandardWebhook(s).sign(id, at, body) : "",
      "idempotency-key": id,
    };
    const res = await fetch(`${edge.url}/sink`, { method: "POST", headers, body });
    return { status: res.status, json: await res.json() };
  };
  assert.equal((await sink("hooks", NEW)).status, 200, "a global secret of the rotation");
  assert.equal((await sink("hooks", OLD, "hooks/k/2")).status, 200);
  assert.equal((await sink("own", OWN)).status, 200, "the topic's own secret");
  const refused = [await sink("own", NEW), await sink("hooks", OWN), await sink("hooks", secret(9)), await sink("hooks", null)];
  for (const r of refused) assert.deepEqual([r.status, r.json.error.code], [401, "bad_signature"]);
});

test("the configuration check refuses a secret that is not whsec_ + base64 of 24 bytes, or a missing variable", async () => {
  const short = `whsec_${Buffer.alloc(16, 5).toString("base64")}`;
  const cases = [
    [{ LULL_SIGNING_SECRET: "dev-signing-secret", OWN_SIGNING_SECRET: OWN }, /LULL_SIGNING_SECRET: the secret does not start with `whsec_`/],
    [{ LULL_SIGNING_SECRET: `${NEW} ${short}`, OWN_SIGNING_SECRET: OWN }, /LULL_SIGNING_SECRET: secret 2 of 2 decodes to 16 bytes; .* at least 24/],
    [{ LULL_SIGNING_SECRET: "whsec_not*base64!", OWN_SIGNING_SECRET: OWN }, /LULL_SIGNING_SECRET: the secret is not whsec_ followed by standard base64/],
    [{ OWN_SIGNING_SECRET: "plain-text-secret" }, /OWN_SIGNING_SECRET: the secret does not start with `whsec_`/],
    [{}, /OWN_SIGNING_SECRET is not set/],
  ];
  for (const [vars, reason] of cases) {
    const state = stateDir();
    const topics = { own: { target: "https://example.com/own", wait_ms: 50, signing_secret_env: "OWN_SIGNING_SECRET" } };
    const edge = await startEdge({ topics, persist: state.dir, vars });
    try {
      const res = await client(edge.url).status("own", "k");
      assert.equal(res.status, 500, JSON.stringify(vars));
      assert.equal(res.json.error.code, "config");
      assert.match(res.json.error.message, reason);
      for (const value of Object.values(vars).flatMap((v) => v.split(/\s+/))) {
        assert.ok(!res.json.error.message.includes(value), `never the secret: ${res.json.error.message}`);
      }
    } finally {
      await edge.stop();
      state.cleanup();
    }
  }
});
