// The front door: what `cargo xtask dev` runs (wrangler dev --env dev on
// workerd, with wrangler.toml's env.dev: the demo build, its bindings and
// migration; the top level is the production worker) serves the API, and
// the README's curl lands in the demo sink. On free ports, with the demo
// topic pointed at this run's own sink and the secrets of .dev.vars.example.
import { test } from "node:test";
import assert from "node:assert/strict";
import { client, startWranglerDev, until } from "./harness.mjs";

test("wrangler dev serves the API and delivers the README's event to the demo sink", { timeout: 240_000 }, async () => {
  const dev = await startWranglerDev((base) => ({ demo: { target: `${base}/sink`, wait_ms: 300, payload: "all" } }));
  try {
    const base = dev.base;
    const ingest = client(base, "dev-ingest-token");
    const accepted = await ingest.event("demo", "doc-1", { edit: 1 });
    assert.equal(accepted.status, 202);
    assert.deepEqual(accepted.json, { seq: 1, window: 1 });
    const admin = client(base, "dev-admin-token-local");
    const sink = await until(async () => {
      const res = await admin.call("GET", "/sink");
      return res.json.received?.length === 1 && res.json.received;
    }, 10_000, "the delivery in the sink");
    assert.match(sink[0].idempotency_key, /^demo\/doc-1\/[0-9a-z]{10}\.1$/);
    assert.deepEqual(sink[0].delivery.events, [{ edit: 1 }]);
    assert.equal(sink[0].delivery.reason, "quiet");
    assert.equal((await client(base, "dev-ingest-token").call("GET", "/sink")).status, 403);
    // The demo page is served from the static assets, the API by the worker.
    const page = await fetch(`${base}/`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<title>lull/);
  } finally {
    await dev.stop();
  }
});
