// A local lull-edge on workerd (Miniflare, from the worker-build output) and
// a receiver on 127.0.0.1, for the end-to-end tests and the benchmark.
import { createServer } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createHmac, timingSafeEqual } from "node:crypto";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";

const root = resolve(import.meta.dirname, "../..");
const build = join(root, "crates/lull-edge/build");

export const TOKENS = { ingest: "test-ingest-token", admin: "test-admin-token", secret: "test-signing-secret" };

/** A fresh directory for one runtime's persisted state; removed by `cleanup`. */
export function stateDir() {
  const dir = mkdtempSync(join(tmpdir(), "lull-edge-state-"));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Start lull-edge with `topics` (LULL_TOPICS as an object), persisting to `persist`. */
export async function startEdge({ topics, persist, logs = [] }) {
  const options = convertV4MiniflareOptions({
    host: "127.0.0.1",
    port: 0,
    cf: false,
    resourcePersistencePath: persist,
    handleStructuredLogs: ({ message }) => logs.push(message),
    compatibilityDate: "2026-11-01",
    modules: [
      { type: "ESModule", path: join(build, "index.js") },
      { type: "CompiledWasm", path: join(build, "index_bg.wasm") },
    ],
    modulesRoot: build,
    durableObjects: { KEY_WINDOW: { className: "KeyWindow", useSQLite: true } },
    bindings: {
      LULL_TOPICS: JSON.stringify(topics),
      LULL_INGEST_TOKEN: TOKENS.ingest,
      LULL_ADMIN_TOKEN: TOKENS.admin,
      LULL_SIGNING_SECRET: TOKENS.secret,
      LULL_DEMO_SINK: "on",
    },
  });
  const mf = new Miniflare(options);
  const url = (await mf.ready).toString().replace(/\/$/, "");
  return { mf, url, logs, stop: () => mf.dispose() };
}

/** Verify a `Lull-Signature` header the way a receiver should. */
export function verifySignature(secret, header, body, toleranceSecs = 300) {
  const parts = Object.fromEntries((header ?? "").split(",").map((p) => p.split("=")));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || !parts.v1) return false;
  if (Math.abs(Date.now() / 1000 - t) > toleranceSecs) return false;
  const expected = createHmac("sha256", secret).update(`${t}.`).update(body).digest();
  const given = Buffer.from(parts.v1, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * A target on 127.0.0.1: records every delivery (parsed body, headers, time,
 * signature check) and answers with `respond(delivery)` → status (default 200),
 * or hangs when it returns "hang".
 */
export async function startReceiver(respond = () => 200) {
  const deliveries = [];
  const waiters = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const delivery = {
        at: Date.now(),
        path: req.url,
        body: JSON.parse(raw.toString("utf8")),
        raw: raw.toString("utf8"),
        idempotencyKey: req.headers["idempotency-key"],
        attempt: Number(req.headers["lull-attempt"]),
        signature: req.headers["lull-signature"],
        verified: verifySignature(TOKENS.secret, req.headers["lull-signature"], raw),
      };
      deliveries.push(delivery);
      const status = respond(delivery);
      for (const w of waiters.splice(0)) w();
      if (status === "hang") return; // the worker's delivery timeout ends it
      res.writeHead(status, { "content-type": "text/plain" }).end("ok");
    });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    deliveries,
    /** Resolve once `n` deliveries have arrived (or reject after `ms`). */
    async waitFor(n, ms = 15_000) {
      const deadline = Date.now() + ms;
      while (deliveries.length < n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`waited ${ms} ms for ${n} deliveries, got ${deliveries.length}`);
        await new Promise((ok) => {
          const t = setTimeout(ok, Math.min(left, 250));
          waiters.push(() => (clearTimeout(t), ok()));
        });
      }
      return deliveries;
    },
    close: () => new Promise((ok) => (server.closeAllConnections(), server.close(ok))),
  };
}

/** A small client for the API. */
export function client(base, token = TOKENS.admin) {
  const call = async (method, path, body, headers = {}) => {
    const init = { method, headers: { authorization: `Bearer ${token}`, ...headers } };
    if (body !== undefined) {
      init.body = typeof body === "string" ? body : JSON.stringify(body);
      init.headers["content-type"] = "application/json";
    }
    const res = await fetch(base + path, init);
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      json = text;
    }
    return { status: res.status, json, headers: res.headers };
  };
  const keyPath = (topic, key) => `/v1/topics/${topic}/keys/${encodeURIComponent(key)}`;
  return {
    call,
    event: (topic, key, body) => call("POST", `${keyPath(topic, key)}/events`, body),
    status: (topic, key) => call("GET", keyPath(topic, key)),
    flush: (topic, key) => call("POST", `${keyPath(topic, key)}/flush`),
    cancel: (topic, key) => call("DELETE", keyPath(topic, key)),
    deadLetters: (topic, key) => call("GET", `${keyPath(topic, key)}/dead-letters`),
    replay: (topic, key, window) => call("POST", `${keyPath(topic, key)}/dead-letters/${window}/retry`),
  };
}

export const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
