// A deploy rolling out: for a while, routers and objects of two releases meet
// (a new version of the Worker may call an object still running the previous
// code, and the other way round). The previous release called its objects with
// `fetch`, and its objects' classes were not `DurableObject`s; this one calls
// them over RPC. So:
// - a router of this release that reaches an object of the previous one sends
//   the same call as a POST (the object's answer, `Retry-After` too, passed on);
// - a router of the previous release that reaches an object of this one is
//   answered over `fetch`, as its own objects answered.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { TOKENS, anotherLullWorker, lullWorker, runtimeOptions, stateDir } from "./harness.mjs";

// The previous release's key object as the runtime saw it: a plain class with
// `fetch` (no RPC), taking the call as a POST body. It answers as the object
// did (`202 {"seq", "window"}`; the key "full" refused `429` with
// `Retry-After`) and shows what it was sent.
const PREVIOUS_OBJECT = `
export default { fetch: () => new Response("the previous release's objects") };
export class KeyWindow {
  constructor() { this.seq = 0; }
  async fetch(request) {
    const wire = await request.text();
    const line = wire.indexOf("\\n");
    const call = JSON.parse(wire.slice(0, line));
    if (call.key === "full") {
      const error = { error: { code: "too_many_pending", message: "the key holds too many windows" } };
      return new Response(JSON.stringify(error), { status: 429, headers: { "retry-after": "7" } });
    }
    this.seq += 1;
    const seen = { method: request.method, url: request.url, call, body: wire.slice(line + 1) };
    return new Response(JSON.stringify({ seq: this.seq, window: 1, seen }), { status: 202 });
  }
}`;

// The previous release's router, as it called an object: the call's text as a POST body.
const PREVIOUS_ROUTER = `
export default {
  async fetch(request, env) {
    const { name, wire } = await request.json();
    const stub = env.KEY_WINDOW.get(env.KEY_WINDOW.idFromName(name));
    const answer = await stub.fetch("https://key-window/", { method: "POST", body: wire });
    const retryAfter = answer.headers.get("retry-after");
    return Response.json({ status: answer.status, retryAfter, text: await answer.text() });
  },
};`;

// Nothing fires during the test: the window stays open a minute.
const TOPICS = { t: { target: "http://127.0.0.1:9/never", wait_ms: 60_000, payload: "all" } };

let mf, state;
const logs = [];
/** The `rpc_fallback` lines logged: an isolate logs its first call that fell back to a POST. */
const fallbacks = () => logs.filter((m) => m.includes('"lull":"rpc_fallback"'));
before(async () => {
  state = stateDir();
  const lull = lullWorker(TOPICS);
  // A second router of this release, its key objects the previous release's.
  const router = anotherLullWorker(TOPICS);
  mf = new Miniflare(
    convertV4MiniflareOptions({
      ...runtimeOptions(state.dir, logs),
      workers: [
        { name: "lull", ...lull },
        {
          name: "router-meeting-previous-objects",
          ...router,
          durableObjects: { ...router.durableObjects, KEY_WINDOW: { className: "KeyWindow", scriptName: "previous-objects" } },
        },
        { name: "previous-objects", modules: true, script: PREVIOUS_OBJECT, compatibilityDate: "2026-11-01", durableObjects: { KEY_WINDOW: "KeyWindow" } },
        {
          name: "previous-router",
          modules: true,
          script: PREVIOUS_ROUTER,
          compatibilityDate: "2026-11-01",
          durableObjects: { KEY_WINDOW: { className: "KeyWindow", scriptName: "lull", useSQLite: true } },
        },
      ],
    }),
  );
  await mf.ready;
});

after(async () => {
  await mf?.dispose();
  state?.cleanup();
});

const post = async (worker, key, body) =>
  (await mf.getWorker(worker)).fetch(`http://localhost/v1/topics/t/keys/${key}/events`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKENS.ingest}`, "content-type": "application/json" },
    body,
  });

test("a router of this release reaching an object of the previous one sends the call as a POST, and passes its answer on", async () => {
  const router = "router-meeting-previous-objects";
  for (const seq of [1, 2]) {
    const res = await post(router, "k", `{"n":${seq}}`);
    const answer = await res.json();
    assert.equal(res.status, 202, JSON.stringify(answer));
    assert.equal(answer.seq, seq);
    assert.deepEqual(answer.seen, {
      method: "POST",
      url: "https://key-window/",
      call: { topic: "t", key: "k", request: { op: "event" } },
      body: `{"n":${seq}}`,
    });
  }
  const refused = await post(router, "full", "{}");
  assert.equal(refused.status, 429);
  assert.equal(refused.headers.get("retry-after"), "7", "the refusal's Retry-After is passed on");
  assert.equal((await refused.json()).error.code, "too_many_pending");
  // That router's isolate logged its first fallback, once.
  assert.equal(fallbacks().length, 1, fallbacks().join("\n"));
  assert.match(fallbacks()[0], /does not support RPC/);
});

test("a router of the previous release reaching an object of this one is answered over fetch, as its objects answered", async () => {
  const previous = await mf.getWorker("previous-router");
  const ask = async (name, line, body = "") =>
    (await previous.fetch("http://localhost/", { method: "POST", body: JSON.stringify({ name, wire: `${JSON.stringify(line)}\n${body}` }) })).json();
  // A client token's budget of one event a minute: the second event is refused, with Retry-After.
  const call = { topic: "t", key: "k", request: { op: "event", events_per_minute: 1 } };
  const first = await ask("t/k", call, '{"n":1}');
  assert.deepEqual([first.status, JSON.parse(first.text), first.retryAfter], [202, { seq: 1, window: 1 }, null]);
  const second = await ask("t/k", call, '{"n":2}');
  assert.equal(second.status, 429, second.text);
  assert.equal(JSON.parse(second.text).error.code, "too_many_events");
  assert.ok(Number(second.retryAfter) >= 1, `Retry-After: ${second.retryAfter}`);
  // An error the object answers (a topic it does not know) comes as the Worker's error shape.
  const unknown = await ask("nope/k", { topic: "nope", key: "k", request: { op: "event" } }, "{}");
  assert.equal(unknown.status, 404);
  assert.equal(JSON.parse(unknown.text).error.code, "unknown_topic");
  // The event stored through fetch is the key's, as a router of this release sees it.
  const status = await (await mf.getWorker("lull")).fetch("http://localhost/v1/topics/t/keys/k", {
    headers: { authorization: `Bearer ${TOKENS.admin}` },
  });
  const state = await status.json();
  assert.equal(status.status, 200, JSON.stringify(state));
  assert.equal(state.stats.events, 1);
  // A router of this release calling this release's objects never falls back: only the other router's line is there.
  assert.equal(fallbacks().length, 1, fallbacks().join("\n"));
});
