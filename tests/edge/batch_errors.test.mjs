// A batch's key whose object fails (not a refusal the object answers: its
// call throws) is answered, every event of it, `500 internal` under a request
// id of its own, and the detail is logged under that id, as a single
// request's internal error is. The router here is lull's; its key objects are
// a stand-in bound in their place (the test runtime's binding, as
// rollout.test.mjs binds the previous release's): they accept every key's
// events but those of keys named `broken…`, whose call throws.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { TOKENS, anotherLullWorker, runtimeOptions, stateDir } from "./harness.mjs";

const OBJECTS = `
import { DurableObject } from "cloudflare:workers";
export default { fetch: () => new Response("stand-in key objects") };
export class KeyWindow extends DurableObject {
  call(wire) {
    const line = wire.indexOf("\\n");
    const call = JSON.parse(wire.slice(0, line));
    if (call.key.startsWith("broken")) throw new Error("the key's storage is on fire");
    const events = JSON.parse(wire.slice(line + 1));
    const accepted = events.map((_, i) => ({ window: 1, seq: i + 1 }));
    return [202, JSON.stringify({ accepted }), undefined];
  }
}`;

// Nothing fires: the stand-in objects keep nothing.
const target = "http://127.0.0.1:9/never";
const TOPICS = { t: { target, wait_ms: 60_000 }, solo: { target, wait_ms: 60_000, coalesce: false } };

let mf, state;
const logs = [];
before(async () => {
  state = stateDir();
  const router = anotherLullWorker(TOPICS);
  mf = new Miniflare(
    convertV4MiniflareOptions({
      ...runtimeOptions(state.dir, logs),
      workers: [
        {
          name: "lull",
          ...router,
          durableObjects: { ...router.durableObjects, KEY_WINDOW: { className: "KeyWindow", scriptName: "objects" } },
        },
        { name: "objects", modules: true, script: OBJECTS, compatibilityDate: "2026-11-01", durableObjects: { KEY_WINDOW: "KeyWindow" } },
      ],
    }),
  );
  await mf.ready;
});

after(async () => {
  await mf?.dispose();
  state?.cleanup();
});

const batch = async (topic, events, token = TOKENS.ingest) => {
  const res = await (await mf.getWorker("lull")).fetch(`http://localhost/v1/topics/${topic}/events:batch`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ events }),
  });
  return { status: res.status, json: await res.json() };
};

/** The `error` lines logged under `id`. */
const logged = (id) =>
  logs.filter((m) => m.includes('"lull":"error"')).map((m) => JSON.parse(m.slice(m.indexOf("{")))).filter((l) => l.request_id === id);

for (const topic of ["t", "solo"]) {
  test(`a failed key's share of a batch is answered under a request id that its log line names (${topic}: coalesce ${topic === "t"})`, async () => {
    const res = await batch(topic, [
      { key: "broken-a", event: { n: 1 } },
      { key: "fine", event: { n: 2 } },
      { key: "broken-a", event: { n: 3 } },
      { key: "broken-b", event: { n: 4 } },
    ]);
    assert.equal(res.status, 207, JSON.stringify(res.json));
    const [a1, fine, a2, b] = res.json.results;
    assert.equal(fine.status, 202, JSON.stringify(fine));
    for (const failed of [a1, a2, b]) {
      assert.deepEqual([failed.status, failed.error.code], [500, "internal"], JSON.stringify(failed));
      assert.match(failed.error.request_id, /^[0-9a-f]{16}$/, `a real request id: ${JSON.stringify(failed)}`);
      assert.doesNotMatch(JSON.stringify(failed), /on fire/, "the detail is the log's only");
    }
    assert.equal(a2.error.request_id, a1.error.request_id, "one id per failed share: its events share it");
    assert.notEqual(b.error.request_id, a1.error.request_id, "another key's share, another id");
    for (const id of [a1.error.request_id, b.error.request_id]) {
      const lines = logged(id);
      assert.equal(lines.length, 1, `one log line under ${id}: ${logs.join("\n")}`);
      assert.equal(lines[0].code, "internal");
      assert.match(lines[0].error, /the key's storage is on fire/, "the detail, in the log");
    }
  });
}
