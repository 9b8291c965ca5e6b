// A local lull-edge on workerd (Miniflare, from the worker-build output) and
// a receiver on 127.0.0.1, for the end-to-end tests and the benchmark.
import { execFileSync, spawn } from "node:child_process";
import { createServer } from "node:http";
import { createServer as createTcpServer } from "node:net";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { Log, LogLevel, Miniflare, convertV4MiniflareOptions } from "miniflare";

const root = resolve(import.meta.dirname, "../..");
/** worker-build's output with the demo (`cargo xtask edge-build --demo`): what the tests and the bench run. */
export const demoBuild = join(root, "crates/lull-edge/build");

/**
 * The worker's credentials in tests. `secret` signs deliveries (LULL_SIGNING_SECRET):
 * a Standard Webhooks secret, `whsec_` and base64 of 32 bytes.
 */
export const TOKENS = {
  ingest: "test-ingest-token",
  admin: "test-admin-token",
  secret: `whsec_${Buffer.from("lull-edge tests: signing secret!").toString("base64")}`,
};

/**
 * The bench's JavaScript Durable Objects (fixtures/): the plain one (the
 * floor) and the one that keeps lull-edge's promises (the reference).
 */
export const JS_OBJECTS = {
  plain: { file: "js-debounce.mjs", className: "JsDebounce", binding: "JS_DEBOUNCE" },
  promises: { file: "js-promises.mjs", className: "JsPromises", binding: "JS_PROMISES" },
};

/**
 * One of `JS_OBJECTS` as a Miniflare worker delivering to `target`, taking
 * the ingest token, signing with the tests' secret (the plain one does not
 * sign), with more `bindings` (WAIT_MS, MAX_WAIT_MS, …: as each fixture reads them).
 */
export function jsObjectWorker(which, target, bindings = {}) {
  const { file, className, binding } = JS_OBJECTS[which];
  return {
    compatibilityDate: "2026-11-01",
    modules: true,
    scriptPath: join(import.meta.dirname, "fixtures", file),
    durableObjects: { [binding]: { className, useSQLite: true } },
    bindings: { TARGET: target, TOKEN: TOKENS.ingest, SECRET: TOKENS.secret, ...bindings },
  };
}

/** A port on 127.0.0.1 nothing listens on (taken, then released). */
export async function freePort() {
  const probe = createTcpServer();
  await new Promise((ok) => probe.listen(0, "127.0.0.1", ok));
  const { port } = probe.address();
  await new Promise((ok) => probe.close(ok));
  return port;
}

/** A fresh directory for one runtime's persisted state; removed by `cleanup`. */
export function stateDir() {
  const dir = mkdtempSync(join(tmpdir(), "lull-edge-state-"));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** How the worker's log lines name `key` unless its topic sets `log_keys`: `k:` and 12 hex digits of its SHA-256. */
export function keyLabel(key) {
  return `k:${createHash("sha256").update(key).digest("hex").slice(0, 12)}`;
}

/**
 * `topics` for a local run: the receivers here are `http://127.0.0.1`, so each
 * topic allows `http://` targets unless it says otherwise.
 */
export function local(topics) {
  return Object.fromEntries(Object.entries(topics).map(([name, t]) => [name, { allow_http: true, ...t }]));
}

/** The LULL_CLIENT_RATE binding's limit unless a test sets one (wrangler.toml's). */
export const CLIENT_RATE = 600;

/**
 * The lull-edge worker's Miniflare options (the worker-build output, as wrangler.toml
 * binds it); `build`: another worker-build output directory; `vars`: more
 * bindings (or other values of these); `consumers`: queue consumer settings
 * to change, by queue (e.g. `{"lull-dead-letters": {maxRetries: 1}}`);
 * `clientRate`: the LULL_CLIENT_RATE binding's limit (a `key_prefix` client
 * token holder's events across keys per minute).
 */
export function lullWorker(topics, build = demoBuild, vars = {}, consumers = {}, clientRate = CLIENT_RATE) {
  return {
    compatibilityDate: "2026-11-01",
    modules: [
      // The entry (crates/lull-edge/js/entry.mjs, written there by `cargo xtask edge-build`), then worker-build's module.
      { type: "ESModule", path: join(build, "entry.mjs") },
      { type: "ESModule", path: join(build, "index.js") },
      { type: "CompiledWasm", path: join(build, "index_bg.wasm") },
    ],
    modulesRoot: build,
    durableObjects: {
      KEY_WINDOW: { className: "KeyWindow", useSQLite: true },
      TOPIC_GATE: { className: "TopicGate", useSQLite: true },
    },
    // As wrangler.toml declares them (queue delivery and its dead letters).
    queueProducers: { LULL_QUEUE: { queueName: "lull-deliveries" }, LULL_DEAD_LETTERS: { queueName: "lull-dead-letters" } },
    queueConsumers: {
      "lull-deliveries": { maxBatchSize: 10, maxBatchTimeout: 1, maxRetries: 100, retryDelay: 1, deadLetterQueue: "lull-dead-letters", ...consumers["lull-deliveries"] },
      "lull-dead-letters": { maxBatchSize: 10, maxBatchTimeout: 1, maxRetries: 100, retryDelay: 60, deadLetterQueue: "lull-parked", ...consumers["lull-dead-letters"] },
    },
    // As wrangler.toml declares it: the dataset data points go to (local workerd records nothing).
    analyticsEngineDatasets: { LULL_METRICS: { dataset: "lull" } },
    // As wrangler.toml declares it: a key_prefix client token holder's events across keys.
    ratelimits: { LULL_CLIENT_RATE: { namespace_id: "1001", simple: { limit: clientRate, period: 60 } } },
    bindings: {
      LULL_DEAD_LETTER_QUEUE: "lull-dead-letters",
      LULL_TOPICS: JSON.stringify(local(topics)),
      LULL_INGEST_TOKEN: TOKENS.ingest,
      LULL_ADMIN_TOKEN: TOKENS.admin,
      LULL_SIGNING_SECRET: TOKENS.secret,
      LULL_DEMO_SINK: "on",
      ...vars,
    },
  };
}

/**
 * `lullWorker`'s options for another lull-edge worker beside the first on one
 * runtime (the arguments as `lullWorker`'s): it takes no queue's messages (a
 * queue has one consumer, the first worker).
 */
export function anotherLullWorker(...args) {
  const { queueConsumers, ...worker } = lullWorker(...args);
  return worker;
}

/**
 * What every local runtime here starts with: 127.0.0.1 on a free port, no
 * `cf` fetched, state persisted to `persist`, log lines into `logs` (or dropped).
 */
export function runtimeOptions(persist, logs) {
  const handleStructuredLogs = logs ? ({ message }) => logs.push(message) : () => {};
  return { host: "127.0.0.1", port: 0, cf: false, resourcePersistencePath: persist, handleStructuredLogs };
}

/**
 * The runtime's own log — the local queue's lines among it ("Moving message",
 * "Dropped message"), which never reach the worker's structured logs — each
 * line with the time it came, into `lines` (Miniflare's `log` option).
 */
export function runtimeLog(lines) {
  return new (class extends Log {
    logWithLevel(level, message) {
      lines.push({ at: Date.now(), message: String(message) });
    }
  })(LogLevel.DEBUG);
}

/** The PID of the workerd this process started (Miniflare's child), or null if there is none. */
export function childWorkerd() {
  try {
    return execFileSync("pgrep", ["-P", String(process.pid), "-f", "workerd"]).toString().trim().split("\n")[0] || null;
  } catch {
    return null;
  }
}

/** A clock tick of /proc's CPU times, in µs (USER_HZ: 100 on Linux). */
export const TICK_US = 10_000;

/** Process `pid`'s CPU so far (user and system, clock ticks, its threads ended or not), or null if unreadable. */
export function cpuTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}

/** lull-edge with `topics` on a fresh state; `body(api, edge)` runs the test, then the edge stops and its state goes. */
export async function withEdge(topics, body) {
  const state = stateDir();
  const edge = await startEdge({ topics, persist: state.dir });
  try {
    return await body(client(edge.url), edge);
  } finally {
    await edge.stop();
    state.cleanup();
  }
}

/**
 * Start lull-edge with `topics` (LULL_TOPICS as an object), persisting to
 * `persist` (from `build`, `vars`, `consumers`, `clientRate`: as `lullWorker`);
 * the worker's log lines into `logs`, the runtime's own into `runtime` (`runtimeLog`).
 */
export async function startEdge({ topics, persist, logs = [], runtime = [], build, vars, consumers, clientRate }) {
  const worker = lullWorker(topics, build, vars, consumers, clientRate);
  const options = convertV4MiniflareOptions({ ...runtimeOptions(persist, logs), log: runtimeLog(runtime), ...worker });
  const mf = new Miniflare(options);
  const url = (await mf.ready).toString().replace(/\/$/, "");
  return { mf, url, logs, runtime, stop: () => mf.dispose() };
}

/**
 * What `cargo xtask dev` runs: `wrangler dev --env dev` on workerd with wrangler.toml's
 * env.dev build command (the demo), bindings, migration and static assets (the demo page), on
 * free ports, with the secrets of .dev.vars.example and `topics` as
 * LULL_TOPICS (the demo topic pointed at this run's own sink, `{base}/sink`)
 * and `vars` as more variables.
 * Stopped (by its process group) with `stop()`; `output()` is what it printed.
 */
export async function startWranglerDev(topics, vars = {}) {
  const [port, inspector] = [await freePort(), await freePort()];
  const base = `http://127.0.0.1:${port}`;
  const state = stateDir();
  const resolved = typeof topics === "function" ? topics(base) : topics;
  const wrangler = spawn(
    process.execPath,
    [
      join(root, "tests/edge/node_modules/wrangler/bin/wrangler.js"),
      "dev", "--env", "dev", "--local", "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspector),
      "--persist-to", state.dir, "--show-interactive-dev-session=false", "--log-level", "warn",
      "--env-file", ".dev.vars.example", "--var", `LULL_TOPICS:${JSON.stringify(local(resolved))}`,
      ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
    ],
    { cwd: root, detached: true, stdio: ["ignore", "pipe", "pipe"], env: process.env },
  );
  let output = "";
  wrangler.stdout.on("data", (c) => (output += c));
  wrangler.stderr.on("data", (c) => (output += c));
  const stop = async () => {
    if (wrangler.exitCode === null) {
      try {
        process.kill(-wrangler.pid, "SIGTERM");
      } catch {}
      await new Promise((ok) => (wrangler.exitCode !== null ? ok() : wrangler.on("exit", ok)));
    }
    state.cleanup();
  };
  try {
    await until(async () => (await fetch(`${base}/healthz`).catch(() => null))?.ok, 180_000, `wrangler dev: ${output}`);
  } catch (e) {
    await stop();
    throw e;
  }
  return { base, stop, output: () => output };
}

/**
 * Verify a delivery's Standard Webhooks headers (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature`) over the exact body bytes, the way a receiver should: the
 * timestamp within `toleranceSecs` of now, and the secret (`whsec_<base64>`)
 * matching any `v1,<base64>` entry. (The tests also check with the
 * `standardwebhooks` and `svix` packages.)
 */
export function verifyWebhook(secret, headers, body, toleranceSecs = 300) {
  const [id, timestamp, signature] = ["webhook-id", "webhook-timestamp", "webhook-signature"].map((h) => headers?.[h]);
  if (!id || !/^\d+$/.test(timestamp ?? "") || !signature) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > toleranceSecs) return false;
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const expected = createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest();
  return signature.split(" ").some((entry) => {
    const [version, value] = entry.split(",");
    const given = Buffer.from(value ?? "", "base64");
    return version === "v1" && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

/**
 * A target on 127.0.0.1: records every delivery (parsed body, raw body, headers,
 * time, signature check with `TOKENS.secret`, the status it was answered) and answers with
 * `respond(delivery)`: a status (default 200), `{ status, delayMs, headers }` to answer late or with headers, a promise of either (held until
 * the test settles it), or "hang" to never answer.
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
        headers: req.headers,
        signature: req.headers["webhook-signature"],
        verified: verifyWebhook(TOKENS.secret, req.headers, raw),
        /** The connection it came over (numbered from 1 as they open). */
        connection: req.socket.connection,
      };
      deliveries.push(delivery);
      const answer = respond(delivery);
      for (const w of waiters.splice(0)) w();
      Promise.resolve(answer).then((answer) => {
        if (answer === "hang") return; // the worker's delivery timeout ends it
        if (answer === "open body") return void res.writeHead(200, { "content-type": "text/plain" }).write("partial"); // never ended
        const { status, delayMs = 0, headers = {} } = typeof answer === "number" ? { status: answer } : answer;
        delivery.status = status;
        setTimeout(() => res.writeHead(status, { "content-type": "text/plain", ...headers }).end("ok"), delayMs);
      });
    });
  });
  let connections = 0;
  server.on("connection", (socket) => (socket.connection = ++connections));
  // An idle connection stays open a minute (Node's default is 5 s): on a
  // loaded machine a sender's next delivery may come later than that.
  server.keepAliveTimeout = 60_000;
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    deliveries,
    /** Deliveries for one key. */
    of: (key) => deliveries.filter((d) => d.body.key === key),
    /** Resolve once `n` deliveries (for `key`, if given) have arrived, or reject after `ms`. */
    async waitFor(n, ms = 15_000, key = undefined) {
      const deadline = Date.now() + ms;
      const count = () => (key === undefined ? deliveries : deliveries.filter((d) => d.body.key === key)).length;
      while (count() < n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`waited ${ms} ms for ${n} deliveries${key ? ` of ${key}` : ""}, got ${count()}`);
        await new Promise((ok) => {
          const t = setTimeout(ok, Math.min(left, 250));
          waiters.push(() => (clearTimeout(t), ok()));
        });
      }
      return key === undefined ? deliveries : deliveries.filter((d) => d.body.key === key);
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
    return { status: res.status, json, text, headers: res.headers };
  };
  const keyPath = (topic, key) => `/v1/topics/${topic}/keys/${encodeURIComponent(key)}`;
  return {
    call,
    event: (topic, key, body, headers = {}) => call("POST", `${keyPath(topic, key)}/events`, body, headers),
    status: async (topic, key) => {
      const res = await call("GET", keyPath(topic, key));
      until.last = res.json; // what a timed-out `until` reports
      return res;
    },
    flush: (topic, key) => call("POST", `${keyPath(topic, key)}/flush`),
    cancel: (topic, key) => call("DELETE", keyPath(topic, key)),
    deadLetters: (topic, key) => call("GET", `${keyPath(topic, key)}/dead-letters`),
    replay: (topic, key, window) => call("POST", `${keyPath(topic, key)}/dead-letters/${window}/retry`),
  };
}

export const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

/**
 * Poll `probe` until it returns a truthy value, or throw after `ms`; the
 * error shows the last status the client read.
 */
export async function until(probe, ms = 15_000, what = "condition") {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}; last seen: ${JSON.stringify(until.last)}`);
    }
    await sleep(50);
  }
}

/**
 * Real-time tests judge by what happened. A test that needs every real gap
 * between its events under some bound (so a timing branch is forced) sends
 * with `timedSend`, which keeps each request's [sent, answered] times: the
 * worker accepted the event somewhere in between. `assertGapsUnder` throws
 * `ScheduleBroken` when a gap may have reached the bound (the machine stalled
 * the sender), and `withFreshKey` runs the test again on a new key — the
 * product is never blamed for the sender's stall, and never let off either:
 * every run asserts everything it can.
 */
export class ScheduleBroken extends Error {}

/** Send one event (with more request `headers`, an Idempotency-Key say) and record when it was sent and answered. */
export async function timedSend(api, topic, key, body, log, headers = {}) {
  const sent = Date.now();
  const res = await api.event(topic, key, body, headers);
  if (res.status !== 202) throw new Error(`event not accepted: ${res.status} ${JSON.stringify(res.json)}`);
  log.push({ sent, acked: Date.now(), ...res.json });
  return res.json;
}

/** The longest any real gap between consecutive sends in `log` can have been. */
export const longestGap = (log) => Math.max(0, ...log.slice(1).map((e, i) => e.acked - log[i].sent));

/** Throw `ScheduleBroken` unless every real gap in `log` was under `bound` ms. */
export function assertGapsUnder(log, bound) {
  const most = longestGap(log);
  if (most >= bound) throw new ScheduleBroken(`the sender stalled: two events may have been ${most} ms apart (needed < ${bound} ms)`);
}

/** Run `body(key)`, and again on a fresh key (at most `tries` in all) while it throws `ScheduleBroken`. */
export async function withFreshKey(name, body, tries = 3) {
  for (let i = 1; ; i++) {
    try {
      return await body(i === 1 ? name : `${name}-${i}`);
    } catch (e) {
      if (!(e instanceof ScheduleBroken) || i === tries) throw e;
      console.log(`# ${name}: ${e.message}; again on a fresh key`);
    }
  }
}

/**
 * The `Idempotency-Key` of `window` of (topic, key): `{topic}/{key}/{incarnation}.{window}`,
 * the incarnation naming this life of the key (10 base-32 characters).
 */
export const idempotencyKeyPattern = (topic, key, window) =>
  new RegExp(`^${topic}/${encodeURIComponent(key)}/[0-9a-z]{10}\\.${window}$`);

/**
 * The life of the key an `Idempotency-Key` names: `{topic}/{key}/{incarnation}`, its window left
 * out (`{topic}/{key}` for a key from before incarnations, whose keys end `/{window}`).
 */
export const lifeOf = (idempotencyKey) => idempotencyKey.replace(/[./]\d+$/, "");
