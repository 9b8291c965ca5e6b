// The queue consumer when what it is configured with fails: messages in flight
// while the worker's configuration does not load are retried later each time
// (never acked, never moved to the dead-letter queue) and delivered once it is
// fixed; a dead letter is kept by what it carries even where the consumer does
// not know the dead-letter queue's name. Judged by the receiver's log, the
// times the queue redelivered (the consumer's log line for each delivery) and
// the queue's own log (a message moved or dropped).
//
// Local queues keep their messages in the runtime's memory: a restart empties
// them. So the configuration breaks and heals inside one runtime: the worker
// is run behind a small entry that hands the real one its environment, less
// the topic's token variable while the test says "broken" — what a deploy
// naming a secret before `wrangler secret put` gives every isolate.
import { test } from "node:test";
import assert from "node:assert/strict";
import { dirname, join, resolve } from "node:path";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { unstable_readConfig } from "wrangler";
import { client, lullWorker, runtimeLog, runtimeOptions, sleep, startEdge, startReceiver, stateDir, until } from "./harness.mjs";

/** The topic's own ingest token's variable: unset while "broken". */
const TOKEN_VAR = "T_INGEST_TOKEN";

/** lull-edge's entry behind a switch: `GET /__test/config?broken=1|0`. */
const SWITCH = `
import Lull from "./entry.mjs";
export { KeyWindow, TopicGate } from "./entry.mjs";
let broken = false;
const run = (self, method, arg) => {
  const env = broken ? { ...self.env, ${TOKEN_VAR}: undefined } : self.env;
  return Lull.prototype[method].call({ env, ctx: self.ctx }, arg);
};
export default {
  fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname === "/__test/config") {
      broken = url.searchParams.get("broken") === "1";
      return new Response(String(broken));
    }
    return run({ env, ctx }, "fetch", request);
  },
  queue(batch, env, ctx) {
    return run({ env, ctx }, "queue", batch);
  },
};`;

/** A line the local queue logs when it moves a message on or gives it up. */
const LEFT_ITS_QUEUE = /Moving message|Dropped message/;

test("a configuration that fails while messages are in flight: each is retried later each time, none dead-lettered, all delivered once it is fixed", { timeout: 180_000 }, async () => {
  const state = stateDir();
  // Each log line with the time it arrived.
  const lines = [];
  const logs = { push: (message) => lines.push({ at: Date.now(), message }) };
  let fixed = false;
  let flip;
  const receiver = await startReceiver(async () => {
    if (fixed) return 200;
    // The target is down, and while the first forward is out the configuration breaks.
    flip ??= fetch(`${url}/__test/config?broken=1`).then((r) => r.text());
    assert.equal(await flip, "true");
    return 500;
  });
  const topics = {
    t: { target: `${receiver.url}/t`, wait_ms: 50, delivery: "queue", forward_concurrency: 4, ingest_token_env: TOKEN_VAR },
  };
  const worker = lullWorker(topics, undefined, { [TOKEN_VAR]: "t-own-ingest-token-0123" });
  const build = dirname(worker.modules[0].path);
  worker.modules = [{ type: "ESModule", path: join(build, "config-switch.mjs"), contents: SWITCH }, ...worker.modules];
  const mf = new Miniflare(convertV4MiniflareOptions({ ...runtimeOptions(state.dir, logs), log: runtimeLog(lines), ...worker }));
  const url = (await mf.ready).toString().replace(/\/$/, "");
  try {
    const api = client(url);
    for (const k of ["a", "b", "c"]) {
      const res = await api.event("t", k, { k });
      assert.equal(res.status, 202, `${res.text} ${lines.map((l) => l.message).join("\n")}`);
    }
    await receiver.waitFor(3, 30_000);
    const keys = new Set(receiver.deliveries.map((d) => d.idempotencyKey));
    assert.equal(keys.size, 3, "one message per window");

    // The queue's deliveries while broken: (message id, the queue's attempt, delay asked, when).
    const broken = () => {
      const left = lines.find((l) => LEFT_ITS_QUEUE.test(l.message));
      assert.equal(left, undefined, `a message left its queue while the configuration was broken: ${left?.message}`);
      return lines.flatMap(({ at, message }) => {
        if (!message.includes('"lull":"queue_config_error"')) return [];
        const line = JSON.parse(message.slice(message.indexOf("{")));
        return line.ids.map((id, i) => ({ id, attempts: line.attempts[i], delay: line.settle[i]?.retry?.delay_s, at }));
      });
    };
    // Each of the three retried twice while broken (its 2nd and 3rd deliveries).
    await until(() => new Set(broken().filter((d) => d.attempts >= 3).map((d) => d.id)).size === 3, 90_000, "three messages redelivered twice while broken");
    fixed = true;
    assert.equal(await (await fetch(`${url}/__test/config?broken=0`)).text(), "false");
    const fixedAt = Date.now();
    const seen = broken();
    const ids = [...new Set(seen.map((d) => d.id))];
    assert.equal(ids.length, 3, JSON.stringify(seen));
    for (const id of ids) {
      const [second, third] = [2, 3].map((n) => seen.find((d) => d.id === id && d.attempts === n));
      assert.ok(second && third, `${id}: its 2nd and 3rd deliveries: ${JSON.stringify(seen)}`);
      assert.deepEqual([second.delay, third.delay], [10, 20], `${id}: 5 s doubling per delivery`);
      // The queue held it as long as asked (log lines may arrive up to a moment apart).
      assert.ok(third.at - second.at >= 9_500, `${id}: redelivered ${third.at - second.at} ms after a 10 s retry`);
    }

    // Fixed: each window is delivered at its next delivery (the 4th, after the 20 s retry), once.
    await until(() => receiver.deliveries.filter((d) => d.at >= fixedAt).length >= 3, 60_000, "the deliveries once fixed");
    await sleep(1_500);
    const after = receiver.deliveries.filter((d) => d.at >= fixedAt);
    assert.deepEqual(after.map((d) => d.idempotencyKey).sort(), [...keys].sort(), "each window once");
    assert.deepEqual(after.map((d) => d.attempt), [4, 4, 4], "Lull-Attempt: the queue's 4th delivery");
    for (const d of after) {
      const third = seen.find((s) => s.attempts === 3 && d.at - s.at >= 19_500);
      assert.ok(third, `delivered ${d.idempotencyKey} 20 s after a broken delivery: ${JSON.stringify(seen)} at ${d.at}`);
    }
    const status = await api.call("GET", "/v1/topics/t/queue");
    assert.equal(status.json.dead_letter_count, 0, JSON.stringify(status.json));
    assert.equal(status.json.counters.dead_lettered ?? 0, 0);
    assert.equal(lines.find((l) => LEFT_ITS_QUEUE.test(l.message)), undefined, "no message left its queue");
  } finally {
    await mf.dispose();
    await receiver.close();
    state.cleanup();
  }
});

test("a renamed LULL_DEAD_LETTER_QUEUE: the consumer's dead letter is kept by what it carries, never forwarded again", { timeout: 120_000 }, async () => {
  const state = stateDir();
  const receiver = await startReceiver(() => 500);
  const topics = { r: { target: `${receiver.url}/r`, wait_ms: 50, delivery: "queue", forward_max_attempts: 2 } };
  // The variable no longer names the queue its dead letters arrive on.
  const edge = await startEdge({ topics, persist: state.dir, vars: { LULL_DEAD_LETTER_QUEUE: "lull-dead-letters-renamed" } });
  try {
    const api = client(edge.url);
    assert.equal((await api.event("r", "k", { n: 1 })).status, 202);
    // Kept, or forwarded a third time (a loop: forward, dead letter, forward…).
    const status = await until(async () => {
      const res = await api.call("GET", "/v1/topics/r/queue");
      return (res.json?.dead_letter_count === 1 || receiver.deliveries.length > 2) && res.json;
    }, 60_000, "the dead letter kept");
    await sleep(3_000);
    assert.equal(receiver.deliveries.length, 2, "two failed forwards (forward_max_attempts), then never again");
    assert.equal(status.dead_letter_count, 1);
    assert.equal(status.counters.dead_lettered, 1, "sent to the dead-letter queue once");
    const [letter] = status.dead_letters;
    assert.equal(letter.idempotency_key, receiver.deliveries[0].idempotencyKey);
  } finally {
    await edge.stop();
    await receiver.close();
    state.cleanup();
  }
});

test("the queues these tests run are wrangler.toml's: retries, delays and where a message goes past them", () => {
  const root = resolve(import.meta.dirname, "../..");
  const declared = (env) =>
    Object.fromEntries(
      unstable_readConfig({ config: join(root, "wrangler.toml"), env }, { hideWarnings: true }).queues.consumers.map((c) => [
        c.queue,
        { maxRetries: c.max_retries, retryDelay: c.retry_delay, deadLetterQueue: c.dead_letter_queue },
      ]),
    );
  const harness = Object.fromEntries(
    Object.entries(lullWorker({}).queueConsumers).map(([queue, c]) => [
      queue,
      { maxRetries: c.maxRetries, retryDelay: c.retryDelay, deadLetterQueue: c.deadLetterQueue },
    ]),
  );
  assert.deepEqual(harness, declared(undefined));
  assert.deepEqual(declared("dev"), declared(undefined), "the dev environment's queues are the same");
  assert.equal(harness["lull-dead-letters"].deadLetterQueue, "lull-parked");
});
