// The example pull consumer (examples/pull-consumer) against a local fake of
// Cloudflare's HTTP pull API (its request and response shapes): messages are
// leased on pull, acked ones leave, retried ones come back after their delay,
// and a message not settled within its visibility timeout comes back too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { pullOnce } from "../../examples/pull-consumer/puller.mjs";

/** The pull API for one queue holding `bodies` (JSON text, as the API returns a JSON message). */
async function fakePullApi(bodies, token) {
  const messages = bodies.map((body, i) => ({ id: `m${i}`, body, attempts: 0, visibleAt: 0, lease: null }));
  let leases = 0;
  const log = [];
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      const reply = (status, json) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(json));
      if (req.headers.authorization !== `Bearer ${token}`) return reply(401, { success: false, errors: [{ code: 10000, message: "Authentication error" }] });
      const body = JSON.parse(raw || "{}");
      const now = Date.now();
      if (req.url === "/accounts/acc/queues/q1/messages/pull") {
        const ready = messages.filter((m) => m.visibleAt <= now).slice(0, body.batch_size ?? 5);
        for (const m of ready) {
          m.attempts += 1;
          m.lease = `lease-${++leases}`;
          m.visibleAt = now + (body.visibility_timeout_ms ?? 30_000);
        }
        log.push({ op: "pull", ids: ready.map((m) => m.id) });
        return reply(200, {
          success: true,
          errors: [],
          result: {
            messages: ready.map((m) => ({ id: m.id, body: m.body, timestamp_ms: now, attempts: m.attempts, lease_id: m.lease })),
            message_backlog_count: messages.length - ready.length,
          },
        });
      }
      if (req.url === "/accounts/acc/queues/q1/messages/ack") {
        for (const { lease_id } of body.acks ?? []) {
          const i = messages.findIndex((m) => m.lease === lease_id);
          if (i >= 0) messages.splice(i, 1);
        }
        for (const { lease_id, delay_seconds } of body.retries ?? []) {
          const m = messages.find((x) => x.lease === lease_id);
          if (m) Object.assign(m, { lease: null, visibleAt: now + (delay_seconds ?? 0) * 1000 });
        }
        log.push({ op: "ack", acks: body.acks?.length ?? 0, retries: body.retries?.length ?? 0 });
        return reply(200, { success: true, errors: [], result: { ackCount: body.acks?.length ?? 0, retryCount: body.retries?.length ?? 0, warnings: [] } });
      }
      reply(404, { success: false, errors: [{ code: 7003, message: "No route" }] });
    });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  return { api: `http://127.0.0.1:${server.address().port}`, messages, log, close: () => new Promise((ok) => server.close(ok)) };
}

const window = (i) => JSON.stringify({ topic: "orders", idempotency_key: `orders/c${i}/k.1`, attempt: 1, body: { window: 1, count: 1, events: [{ i }] } });

test("pull, process, ack or retry: what fails comes back after its delay, and every window is processed once in the end", async () => {
  const fake = await fakePullApi([window(1), window(2), window(3)], "t0k");
  try {
    const done = [];
    let failOnce = true;
    const process = async (m) => {
      if (m.body.events[0].i === 2 && failOnce) {
        failOnce = false;
        throw new Error("downstream busy");
      }
      done.push(m.idempotency_key);
    };
    const options = { api: fake.api, accountId: "acc", queueId: "q1", token: "t0k", process, retryDelaySeconds: 1 };
    assert.deepEqual(await pullOnce(options), { pulled: 3, acked: 2, retried: 1, backlog: 0 });
    assert.deepEqual((await pullOnce(options)).pulled, 0, "the retried one waits out its delay");
    await new Promise((ok) => setTimeout(ok, 1100));
    assert.deepEqual(await pullOnce(options), { pulled: 1, acked: 1, retried: 0, backlog: 0 });
    assert.deepEqual(done.sort(), ["orders/c1/k.1", "orders/c2/k.1", "orders/c3/k.1"]);
    assert.equal(fake.messages.length, 0, "nothing left");
  } finally {
    await fake.close();
  }
});

test("a message not settled within its visibility timeout comes back; a wrong token is refused", async () => {
  const fake = await fakePullApi([window(1)], "t0k");
  try {
    const never = () => new Promise(() => {}); // a consumer that died mid-batch: no ack is sent
    const crashed = pullOnce({ api: fake.api, accountId: "acc", queueId: "q1", token: "t0k", process: never, visibilityTimeoutMs: 200 });
    void crashed;
    await new Promise((ok) => setTimeout(ok, 300));
    const again = await pullOnce({ api: fake.api, accountId: "acc", queueId: "q1", token: "t0k", process: async () => {} });
    assert.deepEqual(again, { pulled: 1, acked: 1, retried: 0, backlog: 0 });
    await assert.rejects(pullOnce({ api: fake.api, accountId: "acc", queueId: "q1", token: "wrong", process: async () => {} }), /Authentication error/);
  } finally {
    await fake.close();
  }
});
