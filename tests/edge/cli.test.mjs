// The `lull` command (crates/lull-cli, its binary named by LULL_BIN) against
// a local lull-edge: sends (one event, stdin, an NDJSON batch split into
// requests) accepted and delivered; refusals print the API's message, exit
// non-zero and store nothing; a 429 is waited out by its Retry-After; status,
// dead letters (a key's and a queue topic's) and client tokens end to end.
// Judged by what the receiver got, what the API lists, and when things happened.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  client, sleep, startEdge, startReceiver, stateDir, until, TOKENS, assertGapsUnder, ScheduleBroken, withFreshKey,
} from "./harness.mjs";

const BIN = process.env.LULL_BIN;
if (!BIN) throw new Error("LULL_BIN must name the lull binary (cargo build -p lull-cli; cargo xtask test edge sets it)");

let edge, rx, api, state, files;
/** Keys the receiver refuses (500) while they are in here. */
const failing = new Set();

before(async () => {
  rx = await startReceiver((d) => (failing.has(d.body.key) ? 500 : 200));
  state = stateDir();
  files = mkdtempSync(join(tmpdir(), "lull-cli-test-"));
  edge = await startEdge({
    persist: state.dir,
    vars: { LULL_CLIENT_TOKEN_SECRET: "a-client-token-secret-for-the-cli-tests-0123456789" },
    topics: {
      t: { target: `${rx.url}/t`, wait_ms: 300, payload: "all", client_tokens: true },
      // One attempt: a refused delivery is a dead letter at once.
      dl: { target: `${rx.url}/dl`, wait_ms: 50, payload: "all", retry: { max_attempts: 1 } },
      // A queue topic keeping one dead letter at most: one refused forward fills it.
      q: { target: `${rx.url}/q`, wait_ms: 50, delivery: "queue", forward_max_attempts: 1, max_queue_dead_letters: 1, retry: { max_attempts: 1 } },
    },
  });
  api = client(edge.url);
});

after(async () => {
  await edge?.stop();
  await rx?.close();
  state?.cleanup();
  if (files) rmSync(files, { recursive: true, force: true });
});

/**
 * Run `lull args…` against the test worker (LULL_URL, LULL_TOKEN: `token`,
 * the admin's unless given), `stdin` piped in. Resolves to
 * `{code, stdout, stderr, json, started, ended}`; `.stderrShows(re)` resolves
 * once stderr matches, with the time it did.
 */
function lull(args, { token = TOKENS.admin, stdin = "", env = {} } = {}) {
  const started = Date.now();
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LULL_") && !k.startsWith("CLOUDFLARE_")));
  const child = spawn(BIN, args, { env: { ...clean, LULL_URL: edge.url, LULL_TOKEN: token, ...env }, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  const watchers = [];
  child.stdout.on("data", (c) => (stdout += c));
  child.stderr.on("data", (c) => {
    stderr += c;
    for (const w of watchers.filter((w) => w.re.test(stderr))) {
      watchers.splice(watchers.indexOf(w), 1);
      w.ok(Date.now());
    }
  });
  child.stdin.on("error", () => {}); // a command that exits before reading its stdin
  child.stdin.end(stdin);
  const done = new Promise((ok, fail) => {
    child.on("error", fail);
    child.on("close", (code) => {
      let json;
      try {
        json = JSON.parse(stdout);
      } catch {}
      ok({ code, stdout, stderr, json, started, ended: Date.now() });
    });
  });
  done.stderrShows = (re) => new Promise((ok) => (re.test(stderr) ? ok(Date.now()) : watchers.push({ re, ok })));
  return done;
}

/** `run`'s outcome, its exit code asserted. */
async function expectCode(run, code) {
  const result = await run;
  assert.equal(result.code, code, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  return result;
}

/** Events the key has stored since it was created (0 for a key never seen). */
async function eventsOf(topic, key) {
  const res = await api.status(topic, key);
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return res.json.stats?.events ?? 0;
}

test("one event (as an argument, from stdin) and a batch are accepted and delivered", async () => {
  const key = await withFreshKey("one", async (key) => {
    const first = await expectCode(lull(["send", "t", key, '{"n":1}']), 0);
    assert.deepEqual(Object.keys(first.json).sort(), ["seq", "window"]);
    assert.equal(first.json.seq, 1);
    const second = await expectCode(lull(["--compact", "send", "t", key], { stdin: '{"n":2}\n' }), 0);
    // One window: the second command ended within the quiet period of the first's start, unless the machine stalled them.
    assertGapsUnder([first, second].map((run) => ({ sent: run.started, acked: run.ended })), 300);
    assert.equal(second.stdout.trim(), JSON.stringify({ window: first.json.window, seq: 2 }), "compact: one line");
    return key;
  });
  const batch = join(files, "batch.ndjson");
  writeFileSync(batch, ['{"key":"b1","event":{"n":1}}', '{"key":"b2","event":{"n":2}}', "", '{"key":"b1","event":{"n":3},"idempotency_key":"mine-3"}'].join("\n"));
  const sent = await expectCode(lull(["send", "t", "--batch", batch]), 0);
  assert.deepEqual(sent.json.results.map((r) => [r.status, r.seq]), [[202, 1], [202, 1], [202, 2]]);
  const [one] = await rx.waitFor(1, 15_000, key);
  assert.deepEqual(one.body.events.map((e) => e.n), [1, 2]);
  const [b1] = await rx.waitFor(1, 15_000, "b1");
  assert.deepEqual(b1.body.events.map((e) => e.n), [1, 3]);
  assert.deepEqual((await rx.waitFor(1, 15_000, "b2"))[0].body.events, [{ n: 2 }]);
  assert.ok([one, b1].every((d) => d.verified));
});

test("a batch over 1,000 events goes as several requests from stdin, every event stored once", async () => {
  const lines = Array.from({ length: 1_500 }, (_, i) => JSON.stringify({ key: `many-${i % 3}`, event: { i } }));
  const sent = await expectCode(lull(["--compact", "send", "t", "--batch", "-"], { stdin: lines.join("\n") }), 0);
  assert.equal(sent.json.results.length, 1_500);
  assert.ok(sent.json.results.every((r) => r.status === 202));
  for (let k = 0; k < 3; k++) {
    const status = (await api.status("t", `many-${k}`)).json;
    assert.equal(status.stats.events, 500, `many-${k}: each event once`);
  }
});

test("bad input exits non-zero with the API's message, and stores nothing", async () => {
  const malformed = await expectCode(lull(["send", "t", "bad-json", '{"n":']), 1);
  assert.match(malformed.stderr, /400 malformed_json: the body is not valid JSON/);
  assert.equal(malformed.stdout, "");
  assert.equal(await eventsOf("t", "bad-json"), 0);

  const unknown = await expectCode(lull(["send", "nope", "k", "{}"]), 1);
  assert.match(unknown.stderr, /404 unknown_topic: topic "nope" is not configured/);

  const wrongToken = await expectCode(lull(["send", "t", "wrong-token", "{}"], { token: "not-a-token-of-this-worker" }), 1);
  assert.match(wrongToken.stderr, /401 unauthorized: /);
  assert.equal(await eventsOf("t", "wrong-token"), 0);

  const long = "k".repeat(513);
  const tooLong = await expectCode(lull(["send", "t", long, "{}"]), 1);
  assert.match(tooLong.stderr, /400 invalid_key: /);
  assert.equal(await eventsOf("t", long.slice(0, 512)), 0);

  // A batch is checked whole: its bad event is named by its place and its good one is not stored.
  const badBatch = ['{"key":"batch-good","event":1}', '{"key":"","event":2}'].join("\n");
  const refused = await expectCode(lull(["send", "t", "--batch", "-"], { stdin: badBatch }), 1);
  assert.match(refused.stderr, /400 invalid_key: events\[1\]: /);
  assert.equal(await eventsOf("t", "batch-good"), 0);

  // A line that is not an event is refused before anything is sent.
  const notEvent = await expectCode(lull(["send", "t", "--batch", "-"], { stdin: '{"key":"batch-good","event":1}\n{"key":"x"}\n' }), 2);
  assert.match(notEvent.stderr, /batch line 2: /);
  assert.equal(await eventsOf("t", "batch-good"), 0);

  // Settings: named when missing or wrong, exit 2.
  const noUrl = await expectCode(lull(["status", "t", "k"], { env: { LULL_URL: "" } }), 2);
  assert.match(noUrl.stderr, /LULL_URL \(or --url\) is empty/);
  const badDuration = await expectCode(lull(["--max-time", "5", "status", "t", "k"]), 2);
  assert.match(badDuration.stderr, /"5" has no unit/);

  await sleep(1_000); // past wait_ms: anything stored would have been delivered by now
  assert.ok(!rx.deliveries.some((d) => ["bad-json", "wrong-token", "batch-good", long].includes(d.body.key)), "nothing delivered");
});

test("status, a key's dead letters listed, replayed (one, all) and discarded", async () => {
  const idle = await expectCode(lull(["status", "dl", "dead"]), 0);
  assert.equal(idle.json.state, "idle");
  assert.equal(idle.json.topic, "dl");

  /** Send an event the receiver refuses; resolves to the window it became, once it is a dead letter. */
  const deadLetter = async (n) => {
    failing.add("dead");
    const sent = await expectCode(lull(["send", "dl", "dead", JSON.stringify({ n })]), 0);
    await until(async () => (await lull(["status", "dl", "dead"])).json?.dead_letters?.some((d) => d.window === sent.json.window), 15_000, `window ${sent.json.window} dead-lettered`);
    return sent.json.window;
  };
  const first = await deadLetter(1);
  const listed = await expectCode(lull(["dead-letters", "dl", "dead", "list"]), 0);
  assert.equal(listed.json.count, 1);
  assert.deepEqual(listed.json.dead_letters.map((d) => [d.window, d.attempts]), [[first, 1]]);

  failing.delete("dead");
  const before = rx.of("dead").length;
  const replayed = await expectCode(lull(["dead-letters", "dl", "dead", "replay", "--window", String(first)]), 0);
  assert.equal(replayed.json.dead_letter_count, 0, "the key's status after it");
  const again = (await rx.waitFor(before + 1, 15_000, "dead")).at(-1);
  assert.deepEqual([again.body.window, again.body.reason, again.body.events], [first, "replay", [{ n: 1 }]]);

  const second = await deadLetter(2);
  const third = await deadLetter(3);
  failing.delete("dead");
  const count = rx.of("dead").length;
  const all = await expectCode(lull(["dead-letters", "dl", "dead", "replay"]), 0);
  assert.equal(all.json.topic, "dl");
  const both = (await rx.waitFor(count + 2, 15_000, "dead")).slice(count);
  assert.deepEqual(both.map((d) => [d.body.window, d.body.reason]), [[second, "replay"], [third, "replay"]]);

  const fourth = await deadLetter(4);
  failing.delete("dead");
  const seen = rx.of("dead").length;
  const discarded = await expectCode(lull(["dead-letters", "dl", "dead", "discard", "--window", String(fourth)]), 0);
  assert.equal(discarded.json.dead_letter_count, 0);
  const gone = await expectCode(lull(["dead-letters", "dl", "dead", "discard", "--window", String(fourth)]), 1);
  assert.match(gone.stderr, /404 not_found: /);
  const noWindow = await expectCode(lull(["dead-letters", "dl", "dead", "discard"]), 2);
  assert.match(noWindow.stderr, /discard needs --window/);
  await sleep(500);
  assert.equal(rx.of("dead").length, seen, "a discarded dead letter is never delivered");
  assert.equal((await api.status("dl", "dead")).json.stored_events, 0, "its events are gone");
});

test("a client token minted by `lull token` posts to its key only", async () => {
  const minted = await expectCode(lull(["token", "t", "--key", "tk", "--ttl", "10m", "--ops", "events,flush", "--sub", "u7", "--json"]), 0);
  const now = Date.now() / 1000;
  assert.ok(Math.abs(minted.json.expires_at - (now + 600)) < 30, JSON.stringify(minted.json));
  const claims = JSON.parse(Buffer.from(minted.json.token.split(".")[1], "base64url"));
  assert.deepEqual([claims.topic, claims.key, claims.sub, claims.ops], ["t", "tk", "u7", ["events", "flush"]]);
  const plain = await expectCode(lull(["token", "t", "--key", "tk"]), 0);
  assert.match(plain.stdout, /^[\w-]+\.[\w-]+\.[\w-]+\n$/, "the token alone");
  await expectCode(lull(["send", "t", "tk", '{"from":"page"}'], { token: minted.json.token }), 0);
  const other = await expectCode(lull(["send", "t", "other", "{}"], { token: minted.json.token }), 1);
  assert.match(other.stderr, /403 forbidden: /);
  assert.equal(await eventsOf("t", "tk"), 1);
  assert.equal(await eventsOf("t", "other"), 0);
  const badOps = await expectCode(lull(["token", "t", "--key", "tk", "--ops", "events,delete"]), 2);
  assert.match(badOps.stderr, /"delete" is not one of events, flush, cancel/);
  const off = await expectCode(lull(["token", "dl", "--key", "k"]), 1);
  assert.match(off.stderr, /409 client_tokens_off: /);
});

test("a 429 is waited out by its Retry-After: a token's events_per_minute, a queue topic's full dead letters", { timeout: 240_000 }, async () => {
  const perMinute = () => withFreshKey("rate", async (key) => {
    const token = (await expectCode(lull(["token", "t", "--key", key, "--events-per-minute", "1"]), 0)).stdout.trim();
    const first = await expectCode(lull(["send", "t", key, '{"n":1}'], { token }), 0);
    // Late in the first event's minute, so the Retry-After is a few seconds. The
    // count lives in the key's object: asking its status keeps it from being
    // evicted while idle (a restarted object starts a new minute).
    while (Date.now() < first.started + 55_000) {
      assert.equal(await eventsOf("t", key), 1);
      await sleep(Math.min(2_000, Math.max(0, first.started + 55_000 - Date.now())));
    }
    const second = await expectCode(lull(["--max-time", "30s", "send", "t", key, '{"n":2}'], { token }), 0);
    const wait = second.stderr.match(/429 too_many_events: .*; waiting ([\d.]+)s \(Retry-After\) before attempt 2 of 5/);
    // Refused inside the first event's minute, unless the machine stalled the send past its end.
    if (!second.stderr.includes("429") && second.ended >= first.started + 60_000) {
      throw new ScheduleBroken(`the second send ran ${second.started - first.started}..${second.ended - first.started} ms after the first began`);
    }
    assert.ok(wait, second.stderr);
    // What was left of the first event's minute (it began by the first send's end) when the second began.
    const left = Math.ceil((first.ended + 60_000 - second.started) / 1000);
    assert.ok(Number(wait[1]) >= 1 && Number(wait[1]) <= left, `asked to wait ${wait[1]} s; at most ${left} s of the minute were left`);
    assert.ok(second.ended >= first.started + 60_000, "stored once the first event's minute was over");
    assert.ok(second.ended - second.started >= Number(wait[1]) * 1000, "the wait was waited");
    assert.equal(second.json.seq, 2);
    assert.equal(await eventsOf("t", key), 2);
  });

  const deadLettersFull = async () => {
    failing.add("poison");
    assert.equal((await client(edge.url, TOKENS.ingest).event("q", "poison", { p: 1 })).status, 202);
    await until(async () => (await lull(["status", "q"])).json?.dead_letters_full === true, 60_000, "q's dead letters full");
    const listed = await expectCode(lull(["dead-letters", "q", "list"]), 0);
    assert.equal(listed.json.count, 1);
    const [letter] = listed.json.dead_letters;
    assert.deepEqual([letter.topic, letter.body.key, letter.body.event], ["q", "poison", { p: 1 }]);
    // The router may answer from a view up to 5 s old: the refusal comes once it sees the bound.
    await until(async () => (await api.event("q", "probe", { probe: true })).status === 429, 15_000, "q refuses events");
    const late = lull(["--max-time", "100s", "send", "q", "late", '{"late":true}'], { token: TOKENS.ingest });
    const refusal = late.stderrShows(/429 dead_letters_full: .*waiting 60\.0s \(Retry-After\)/);
    const refusedAt = await Promise.race([refusal, sleep(20_000).then(() => Promise.reject(new Error("no 429 within 20 s")))]);
    const discarded = await expectCode(lull(["dead-letters", "q", "discard", "--window", String(letter.id)]), 0);
    assert.deepEqual(discarded.json, { discarded: letter.id });
    const sent = await expectCode(late, 0);
    assert.ok(sent.ended - refusedAt >= 59_000, `accepted ${sent.ended - refusedAt} ms after the refusal`);
    const [delivered] = await rx.waitFor(1, 30_000, "late");
    assert.deepEqual(delivered.body.event, { late: true });
    const after = await expectCode(lull(["status", "q"]), 0);
    assert.equal(after.json.dead_letter_count, 0);
    const nothing = await expectCode(lull(["dead-letters", "q", "replay"]), 0);
    assert.deepEqual(nothing.json, { replayed: 0, remaining: 0 });
    const unknown = await expectCode(lull(["dead-letters", "q", "replay", "--window", "999"]), 1);
    assert.match(unknown.stderr, /404 not_found: /);
  };

  await Promise.all([perMinute(), deadLettersFull()]);
});
