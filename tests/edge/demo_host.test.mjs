// The demo (its sink, its token mint, its panel and search) answers a
// loopback host only: `127.0.0.1`, `localhost` or `[::1]`, on any port. Asked
// under any other name — a deployed worker's, or a page of another site whose
// name was rebound to 127.0.0.1 (DNS rebinding) — its routes are not found,
// as if it were not built; the API answers every host as ever.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import { TOKENS, startEdge, stateDir } from "./harness.mjs";

const topics = { demo: { target: "http://127.0.0.1:9/never", wait_ms: 60_000, payload: "all" } };

let edge, state, port;
before(async () => {
  state = stateDir();
  edge = await startEdge({ topics, persist: state.dir });
  port = new URL(edge.url).port;
});
after(async () => {
  await edge?.stop();
  state?.cleanup();
});

/** `method path` to the worker's port on 127.0.0.1, its `Host` header `host`: status and error code. */
function ask(host, method, path, token) {
  return new Promise((ok, fail) => {
    const headers = { host, ...(token ? { authorization: `Bearer ${token}` } : {}) };
    const req = request({ host: "127.0.0.1", port, method, path, headers }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => {
        let code = null;
        try {
          code = JSON.parse(text).error?.code ?? null;
        } catch {}
        ok({ status: res.statusCode, code });
      });
    });
    req.on("error", fail);
    req.end();
  });
}

const DEMO = [
  ["GET", "/demo/token?key=k"],
  ["GET", "/demo/search?q=a"],
  ["GET", "/sink", TOKENS.admin],
  ["PUT", "/sink/failing/k", TOKENS.admin],
  ["DELETE", "/sink/answer", TOKENS.admin],
  ["GET", "/demo/sink"],
  ["GET", "/demo/target"],
];

test("the demo answers a loopback host, on any port", async () => {
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, "localhost", `[::1]:${port}`]) {
    for (const [method, path, token] of DEMO) {
      const answer = await ask(host, method, path, token);
      assert.notEqual(answer.code, "not_found", `${method} ${path} at ${host}: ${JSON.stringify(answer)}`);
    }
  }
});

test("under any other host the demo's routes are not found; the API answers as ever", async () => {
  for (const host of ["lull.example.com", `rebound.example:${port}`, `127.0.0.1.nip.io:${port}`, `0.0.0.0:${port}`]) {
    for (const [method, path, token] of DEMO) {
      const answer = await ask(host, method, path, token);
      assert.deepEqual(answer, { status: 404, code: "not_found" }, `${method} ${path} at ${host}`);
    }
    assert.equal((await ask(host, "GET", "/healthz")).status, 200, `GET /healthz at ${host}`);
    const status = await ask(host, "GET", "/v1/topics/demo/keys/k", TOKENS.admin);
    assert.equal(status.status, 200, `the API at ${host}: ${JSON.stringify(status)}`);
  }
});
