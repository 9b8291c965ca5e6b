// Deliveries never follow redirects. A target answering 302, 307 or 308 with a
// Location (a second receiver): nothing ever reaches the second receiver (a
// 302 followed would turn the POST into a GET and count as delivered; a 307 or
// 308 followed would carry the signed body to another host); each attempt is
// a failed one whose outcome names the status and the Location (status,
// timeline, log), retried and dead-lettered after max_attempts.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { startEdge, stateDir, client, until } from "./harness.mjs";

const RETRY = { max_attempts: 3, base_ms: 100, cap_ms: 200, jitter: "none" };
const CODES = [302, 307, 308];

/** A server on 127.0.0.1 recording every request; `answer(req)` gives `[status, headers]`. */
async function server(answer) {
  const requests = [];
  const srv = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      requests.push({ method: req.method, path: req.url, body: Buffer.concat(chunks).toString("utf8"), headers: req.headers });
      const [status, headers] = answer(req);
      res.writeHead(status, { "content-type": "text/plain", ...headers }).end("moved");
    });
  });
  await new Promise((ok) => srv.listen(0, "127.0.0.1", ok));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    requests,
    close: () => new Promise((ok) => (srv.closeAllConnections(), srv.close(ok))),
  };
}

let second, redirector, state, edge, api;
const logs = [];

before(async () => {
  // Where every redirect points: must never be called.
  second = await server(() => [200, {}]);
  // `/302/…` answers 302 to the second receiver, and so on.
  redirector = await server((req) => {
    const code = Number(req.url.split("/")[1]);
    return [code, { location: `${second.url}/landed${req.url}` }];
  });
  state = stateDir();
  const topics = Object.fromEntries(
    CODES.map((code) => [`r${code}`, { target: `${redirector.url}/${code}/hook`, wait_ms: 50, retry: RETRY, log_keys: true }]),
  );
  edge = await startEdge({ topics, persist: state.dir, logs });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await redirector?.close();
  await second?.close();
  state?.cleanup();
});

for (const code of CODES) {
  test(`a ${code} is a failed attempt naming its Location; never followed; dead-lettered after max_attempts`, async () => {
    const topic = `r${code}`;
    const location = `${second.url}/landed/${code}/hook`;
    assert.equal((await api.event(topic, "k", { n: code })).status, 202);
    // Until the dead letter (or a delivery counted as done: the redirect followed).
    const status = await until(async () => {
      const s = (await api.status(topic, "k")).json;
      return (s.dead_letters?.length === 1 || s.last_delivery?.ok) && s;
    }, 20_000, "the dead letter");
    const followed = second.requests.filter((r) => r.path.startsWith(`/landed/${code}/`)).map((r) => `${r.method} ${r.path}`);
    assert.deepEqual(followed, [], "nothing reaches the Location");
    assert.equal(status.dead_letters.length, 1);
    const tries = redirector.requests.filter((r) => r.path === `/${code}/hook`);
    assert.deepEqual(tries.map((r) => [r.method, Number(r.headers["lull-attempt"])]), [["POST", 1], ["POST", 2], ["POST", 3]]);
    assert.deepEqual(JSON.parse(tries[0].body).event, { n: code });
    const outcome = `${code} redirect to ${location}`;
    assert.equal(status.last_delivery.ok, false);
    assert.equal(status.last_delivery.outcome, outcome);
    assert.equal(status.stats.failures, RETRY.max_attempts);
    assert.equal(status.dead_letters[0].attempts, RETRY.max_attempts);
    const timeline = (await api.call("GET", `/v1/topics/${topic}/keys/k/timeline`)).json.timeline;
    const delivered = timeline.filter((e) => e.lull === "deliver");
    assert.deepEqual(delivered.map((e) => [e.attempt, e.ok, e.outcome]), [1, 2, 3].map((a) => [a, false, outcome]));
    const lines = logs.flatMap((m) => {
      try {
        const l = JSON.parse(m);
        return l.lull === "deliver" && l.topic === topic ? [l] : [];
      } catch {
        return [];
      }
    });
    assert.deepEqual(lines.map((l) => l.outcome), [outcome, outcome, outcome], "the log names it too");
  });
}
