// The front door: what `cargo xtask dev` runs (wrangler dev on workerd, with
// wrangler.toml's build command, bindings and migration) serves the API, and
// the README's curl lands in the demo sink. On free ports, with the demo
// topic pointed at this run's own sink and the secrets of .dev.vars.example.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { client, freePort, stateDir, until } from "./harness.mjs";

const root = resolve(import.meta.dirname, "../..");

test("wrangler dev serves the API and delivers the README's event to the demo sink", { timeout: 240_000 }, async () => {
  const [port, inspector] = [await freePort(), await freePort()];
  const state = stateDir();
  const topics = { demo: { target: `http://127.0.0.1:${port}/sink`, wait_ms: 300, payload: "all" } };
  const wrangler = spawn(
    process.execPath,
    [
      resolve(import.meta.dirname, "node_modules/wrangler/bin/wrangler.js"),
      "dev", "--local", "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspector),
      "--persist-to", state.dir, "--show-interactive-dev-session=false", "--log-level", "warn",
      "--env-file", ".dev.vars.example", "--var", `LULL_TOPICS:${JSON.stringify(topics)}`,
    ],
    { cwd: root, detached: true, stdio: ["ignore", "pipe", "pipe"], env: process.env },
  );
  let output = "";
  wrangler.stdout.on("data", (c) => (output += c));
  wrangler.stderr.on("data", (c) => (output += c));
  try {
    const base = `http://127.0.0.1:${port}`;
    await until(async () => (await fetch(`${base}/healthz`).catch(() => null))?.ok, 180_000, `wrangler dev: ${output}`);
    const ingest = client(base, "dev-ingest-token");
    const accepted = await ingest.event("demo", "doc-1", { edit: 1 });
    assert.equal(accepted.status, 202);
    assert.deepEqual(accepted.json, { seq: 1, window: 1 });
    const admin = client(base, "dev-admin-token");
    const sink = await until(async () => {
      const res = await admin.call("GET", "/sink");
      return res.json.received?.length === 1 && res.json.received;
    }, 10_000, "the delivery in the sink");
    assert.match(sink[0].idempotency_key, /^demo\/doc-1\/[0-9a-z]{10}\.1$/);
    assert.deepEqual(sink[0].delivery.events, [{ edit: 1 }]);
    assert.equal(sink[0].delivery.reason, "quiet");
    assert.equal((await client(base, "dev-ingest-token").call("GET", "/sink")).status, 403);
  } finally {
    process.kill(-wrangler.pid, "SIGTERM");
    await new Promise((ok) => (wrangler.exitCode !== null ? ok() : wrangler.on("exit", ok)));
    state.cleanup();
  }
});
