// The demo page end to end: wrangler dev serving the page (static assets) and
// the API, Chromium typing into it with real per-key delays. Counts come from
// the system: the search endpoint's own log of queries, the browser's failed
// (aborted) requests, the sink's received deliveries, the key's timeline.
import { after, afterEach, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import {
  CLIENT_TOKEN_TTL_S,
  SERVER_TOKENS,
  SHOTS,
  ScheduleBroken,
  jwtClaims,
  startDemo,
  startOtherSite,
  typeWith,
  typingDelays,
  until,
  withFreshKey,
} from "./harness.mjs";

// Pages of two other sites calling the edge with lull-web/edge: one in LULL_CORS_ORIGINS, one not.
// Each is given a client token for its key, minted by the test (its backend) with the admin route.
const OTHER_SITE = `<!doctype html><meta charset="utf-8"><title>another site</title>
<script type="module">
  import { edge } from "/lull-web/edge.js";
  const q = new URLSearchParams(location.search);
  const client = edge({ url: q.get("edge"), token: q.get("token"), retries: 0 });
  window.outcome = client.send("demo", q.get("key"), { from: location.origin }).then(
    (sent) => ({ ok: true, sent }),
    (e) => ({ ok: false, name: e.name }),
  );
</script>`;

let demo;
let allowedSite;
let otherSite;
before(async () => {
  allowedSite = await startOtherSite(OTHER_SITE);
  otherSite = await startOtherSite(OTHER_SITE);
  demo = await startDemo({ LULL_CORS_ORIGINS: allowedSite.origin });
}, { timeout: 240_000 });
afterEach(async () => {
  await demo?.closePages();
});
after(async () => {
  await demo?.stop();
  await allowedSite?.close();
  await otherSite?.close();
});

const searchesAfter = async (n) => (await demo.api("GET", "/demo/searches")).json.searches.filter((s) => s.n > n);
const lastSearch = async () => (await demo.api("GET", "/demo/searches")).json.searches.at(-1)?.n ?? 0;
const text = (page, id) => page.locator(`#${id}`).textContent();

/** The page's search state once the box is settled on `query`. */
async function settled(page, query) {
  await page.waitForFunction(
    (q) => !window.lullDemo.search.binding.pending() && window.lullDemo.search.shown.at(-1)?.query === q,
    query,
    { timeout: 20_000 },
  );
  return page.evaluate(() => {
    const s = window.lullDemo.search;
    return { keystrokes: s.keystrokes, requests: s.requests, shown: s.shown };
  });
}

/**
 * Every request but the last was either answered before the next one was
 * sent (and its results shown), or still in flight then and aborted.
 */
function assertStaleAborted(requests) {
  requests.forEach((r, i) => {
    const next = requests[i + 1];
    if (!next) return assert.equal(r.outcome, "done", `the last request (${r.query}) is answered`);
    if (r.outcome === "aborted") assert.ok(r.until >= next.at, `${r.query} was aborted by ${next.query}, not before`);
    else assert.ok(r.outcome === "done" && r.until <= next.at, `${r.query} answered before ${next.query} was sent: ${JSON.stringify(r)}`);
  });
}

/** The results the page shows are the endpoint's for `query`. */
async function assertShows(page, query) {
  const expected = (await (await fetch(`${demo.base}/demo/search?q=${encodeURIComponent(query)}&latency_ms=0`)).json());
  assert.match(await text(page, "results-summary"), new RegExp(`^${expected.total.toLocaleString("en")} places? starts? with “${query}”$`));
  const shown = await page.locator("#results li").allTextContents();
  assert.equal(shown.length, expected.results.length);
  expected.results.forEach((p, i) => assert.ok(shown[i].startsWith(p.name), `${shown[i]} is ${p.name}`));
  assert.ok(expected.results.length > 0 && expected.results.every((p) => p.name.toLowerCase().startsWith(query.toLowerCase())));
}

describe("search panel", () => {
  test("on load: no console errors, no failed requests, every control labelled, Tab reaches the box first", async () => {
    const { page, problems } = await demo.page();
    await page.waitForFunction(() => /\d/.test(document.getElementById("places-count").textContent));
    assert.match(await text(page, "places-count"), /^the 171,075$/);
    const unlabelled = await page.evaluate(() =>
      [...document.querySelectorAll("input, select, textarea, button")]
        .filter((c) => !(c.labels?.length || c.getAttribute("aria-label") || (c.tagName === "BUTTON" && c.textContent.trim())))
        .map((c) => c.outerHTML),
    );
    assert.deepEqual(unlabelled, []);
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.id), "q");
    await page.waitForTimeout(1500); // the edge panel's first polls
    assert.deepEqual(problems, []);
  });

  test("typing with real per-key delays: one search per pause, none more, the final query's results shown, counters agree", { timeout: 120_000 }, async () => {
    // Well apart from typing gaps (60–160 ms) and pauses (1,600 ms), so a busy machine's stalls rarely blur them.
    const WAIT = 600;
    const bursts = ["Spr", "ing", "field"];
    await withFreshKey("typing", async () => {
      const { page, problems, aborted } = await demo.page({ expectAborts: true });
      await page.fill("#wait-ms", String(WAIT));
      await page.dispatchEvent("#wait-ms", "change");
      const since = await lastSearch();
      await page.locator("#q").click();
      for (const [i, burst] of bursts.entries()) {
        const delays = typingDelays(burst.length);
        if (i < bursts.length - 1) delays[delays.length - 1] = 1600; // a pause: the search should fire
        await typeWith(page, burst, delays);
      }
      const query = bursts.join("");
      const s = await settled(page, query);
      // Judge by the gaps that happened: none may sit near `wait`, where either outcome is right.
      const gaps = s.keystrokes.slice(1).map((t, i) => t - s.keystrokes[i]);
      const near = gaps.find((g) => g > WAIT - 150 && g < WAIT + 300);
      if (near !== undefined) throw new ScheduleBroken(`a gap of ${near.toFixed(0)} ms between keys, too near wait`);
      const ends = gaps.flatMap((g, i) => (g > WAIT ? [i] : [])).concat(query.length - 1);
      const expected = ends.map((i) => query.slice(0, i + 1));
      const reached = await searchesAfter(since);
      assert.deepEqual(reached.map((r) => r.q), expected, "the endpoint got one search per pause, for the text typed by then");
      assert.deepEqual(s.requests.map((r) => r.query), expected);
      assertStaleAborted(s.requests);
      const abortedHere = s.requests.filter((r) => r.outcome === "aborted").length;
      assert.equal(aborted.length, abortedHere, "the browser aborted the requests the page counts as aborted");
      assert.equal(s.shown.length, s.requests.length - abortedHere, "every answered request was shown, no aborted one");
      await assertShows(page, query);
      assert.equal(await text(page, "c-keys"), String(query.length));
      assert.equal(s.keystrokes.length, query.length);
      assert.equal(await text(page, "c-sent"), String(reached.length));
      assert.equal(await text(page, "c-aborted"), String(aborted.length));
      assert.equal(await text(page, "c-shown"), String(s.shown.length));
      const saved = query.length - reached.length;
      assert.equal(await text(page, "c-saved"), `${saved} (${Math.round((100 * saved) / query.length)}%)`);
      assert.equal(await text(page, "c-wait"), `${WAIT} ms`);
      assert.deepEqual(problems, []);
      await page.locator("#search").screenshot({ path: join(SHOTS, "search-panel.png") });
    }, 5);
  });

  test("a slow server and maxWait: searches fire while typing, each stale one is aborted, only the final one is shown", { timeout: 120_000 }, async () => {
    await withFreshKey("slow server", async () => {
      const { page, problems, aborted } = await demo.page({ expectAborts: true });
      await page.selectOption("#latency", "1500");
      await page.fill("#max-wait", "400");
      await page.dispatchEvent("#max-wait", "change");
      const since = await lastSearch();
      await page.locator("#q").click();
      const query = "Bucharest";
      await typeWith(page, query, typingDelays(query.length, 130, 200));
      const s = await settled(page, query);
      // Each search takes 1,500 ms; judged by when they were sent, each was still running when the next was.
      const apart = s.requests.slice(1).map((r, i) => r.at - s.requests[i].at);
      if (Math.max(...apart) > 1400) throw new ScheduleBroken(`two searches were ${Math.max(...apart).toFixed(0)} ms apart`);
      // Typing lasted over 2 × maxWait: maxWait fired searches mid-burst.
      const typing = s.keystrokes.at(-1) - s.keystrokes[0];
      assert.ok(typing > 800 && s.requests.length >= 2, `searches fired mid-burst: ${JSON.stringify(s.requests)}`);
      assert.equal((await searchesAfter(since)).length, s.requests.length);
      assertStaleAborted(s.requests);
      const abortedHere = s.requests.filter((r) => r.outcome === "aborted").length;
      assert.equal(abortedHere, s.requests.length - 1, "every search but the last was in flight when the next fired");
      assert.equal(aborted.length, abortedHere);
      assert.equal(s.shown.length, 1);
      await assertShows(page, query);
      assert.deepEqual(problems, []);
    }, 5);
  });

  test('wait "auto" shows the quiet period it learned; an IME composition searches only when committed', { timeout: 90_000 }, async () => {
    await withFreshKey("auto wait", async () => {
    const { page, problems } = await demo.page();
    await page.check('input[name="wait-mode"][value="auto"]');
    await page.locator("#q").click();
    await typeWith(page, "London", typingDelays(6, 90, 110));
    const s = await settled(page, "London");
    // Five gaps (lull learns from four on, skipping pauses over 1 s): 2.5 × their median,
    // within 100..=1000 ms, as the page measured them.
    const gaps = s.keystrokes.slice(1).map((t, i) => t - s.keystrokes[i]).sort((x, y) => x - y);
    if (gaps.at(-1) > 1000) throw new ScheduleBroken(`a gap of ${gaps.at(-1).toFixed(0)} ms while typing`);
    const learned = await page.evaluate(() => window.lullDemo.search.binding.wait());
    const expected = Math.min(1000, Math.max(100, 2.5 * gaps[2]));
    assert.ok(Math.abs(learned - expected) <= 15, `learned ${learned} ms from gaps ${gaps.map(Math.round)}`);
    if (Math.abs(expected - 300) > 15) assert.notEqual(learned, 300, "not the starting value");
    assert.equal(await text(page, "c-wait"), `${Math.round(learned)} ms (learned)`);
    // A composition (what a CJK input method sends): no search until compositionend.
    await page.fill("#q", "");
    const since = await lastSearch();
    await page.evaluate(async () => {
      const q = document.getElementById("q");
      q.dispatchEvent(new CompositionEvent("compositionstart", { data: "" }));
      for (const v of ["b", "be", "bei", "beij", "beijing"]) {
        q.value = v;
        q.dispatchEvent(new InputEvent("input", { data: v, isComposing: true, inputType: "insertCompositionText" }));
        await new Promise((ok) => setTimeout(ok, 120));
      }
    });
    assert.match(await text(page, "composing"), /Composing/);
    await page.waitForTimeout(1500); // longer than any wait it may have learned
    assert.deepEqual(await searchesAfter(since), [], "no search mid-composition");
    await page.evaluate(() => {
      const q = document.getElementById("q");
      q.value = "北京";
      q.dispatchEvent(new CompositionEvent("compositionend", { data: "北京" }));
    });
    await until(async () => (await searchesAfter(since)).length === 1, 10_000, "the committed search");
    assert.deepEqual((await searchesAfter(since)).map((r) => r.q), ["北京"]);
    assert.equal(await text(page, "composing"), "");
    assert.deepEqual(problems, []);
    }, 5);
  });
});

/** A client token for `key` of the `demo` topic, minted with the admin route (as another site's backend would). */
const mintFor = async (key) => (await demo.api("POST", "/v1/topics/demo/client-tokens", { key, ttl_s: 120 })).json.token;

/** The client token secret of .dev.vars.example, which the worker signs the page's tokens with. */
const CLIENT_SECRET = /^LULL_CLIENT_TOKEN_SECRET=(.+)$/m.exec(readFileSync(resolve(import.meta.dirname, "../../.dev.vars.example"), "utf8"))[1].trim();
/** Whether `token` is an HS256 JWT signed with `CLIENT_SECRET`. */
const signedByWorker = (token) => {
  const [header, claims, signature] = token.split(".");
  const expected = createHmac("sha256", CLIENT_SECRET).update(`${header}.${claims}`).digest("base64url");
  return JSON.parse(Buffer.from(header, "base64url").toString()).alg === "HS256" && signature === expected;
};

/** The sink's deliveries of `key`. */
const sinkOf = async (key) => (await demo.api("GET", "/sink")).json.received.filter((r) => r.delivery.key === key);
const timelineOf = async (key) => (await demo.api("GET", `/v1/topics/demo/keys/${key}/timeline?limit=256`)).json.timeline;

describe("edge panel", () => {
  test("the page holds only a minted client token: each for its document's key, fetched from the demo's server side; every admin view goes through it", { timeout: 120_000 }, async () => {
    const keys = [`doc-token-a-${Date.now()}`, `doc-token-b ${Date.now()}/x`];
    const { page, problems, requests } = await demo.page({ path: `/#doc=${encodeURIComponent(keys[0])}` });
    const deliveredOnce = (key) => until(async () => (await sinkOf(key)).some((r) => r.status === 200), 15_000, `${key} in the sink`);
    // Everything the panel does, on the first document: send, flush, the sink switch, replay, cancel.
    await page.locator("#editor").click();
    await typeWith(page, "abc", typingDelays(3));
    await page.click("#flush");
    await deliveredOnce(keys[0]);
    await page.click("#fail");
    await page.waitForFunction(() => document.getElementById("fail").getAttribute("aria-pressed") === "true");
    assert.ok((await demo.api("GET", "/sink")).json.failing.includes(keys[0]), "the switch reached the sink");
    await page.click("#fail");
    await page.waitForFunction(() => document.getElementById("fail").getAttribute("aria-pressed") === "false");
    await page.click("#replay");
    await page.waitForFunction(() => /replayed/.test(document.getElementById("edge-message").textContent));
    await page.locator("#editor").click();
    await typeWith(page, "d", [0]);
    await page.click("#cancel");
    await page.waitForFunction(() => /Cancelled/.test(document.getElementById("edge-message").textContent));
    // Another document: a new client, with that key's token.
    await page.fill("#doc", keys[1]);
    await page.dispatchEvent("#doc", "change");
    await page.locator("#editor").click();
    await typeWith(page, "xyz", typingDelays(3));
    await page.click("#flush");
    await deliveredOnce(keys[1]);
    // The panel showed both keys' status and timeline, read through the demo's server side.
    await page.waitForFunction(() => document.getElementById("s-succeeded").textContent === "1" && /fire window 1/.test(document.getElementById("edge-log").textContent), null, { timeout: 10_000 });
    await page.waitForTimeout(600); // a poll more

    // Each request the page made with a bearer token carried a client token for the key it was about
    // (checked request by request as a problem: see credentialProblem), and no server-side token went anywhere.
    assert.deepEqual(problems, []);
    const bearers = requests.filter((r) => r.headers.authorization !== undefined);
    const sent = (key, method, tail) => bearers.filter((r) => r.method === method && new URL(r.url).pathname === `/v1/topics/demo/keys/${encodeURIComponent(key)}${tail}`);
    for (const [key, method, tail] of [[keys[0], "POST", "/events"], [keys[0], "POST", "/flush"], [keys[0], "DELETE", ""], [keys[1], "POST", "/events"], [keys[1], "POST", "/flush"]]) {
      assert.ok(sent(key, method, tail).length > 0, `${method} …/${key}${tail} with a client token`);
    }
    const tokens = [...new Set(bearers.map((r) => r.headers.authorization.slice("Bearer ".length)))];
    const claims = tokens.map(jwtClaims);
    assert.deepEqual(claims.map((c) => [c.topic, c.key]).sort(), keys.map((k) => ["demo", k]).sort(), "one token per document, topic demo, that key");
    claims.forEach((c) => assert.equal(c.exp - c.iat, CLIENT_TOKEN_TTL_S));
    assert.ok(tokens.every(signedByWorker), "signed HS256 with the worker's LULL_CLIENT_TOKEN_SECRET");
    // Where the page got them: the demo's server side, asked without a credential.
    const paths = requests.map((r) => new URL(r.url)).filter((u) => u.origin === demo.base).map((u) => u.pathname + u.search);
    for (const key of keys) assert.ok(paths.includes(`/demo/token?key=${encodeURIComponent(key)}`), `a token fetched for ${key}`);
    const unauthenticated = requests.filter((r) => r.headers.authorization === undefined).map((r) => new URL(r.url).pathname);
    assert.ok(unauthenticated.every((p) => !p.startsWith("/v1/") && !p.startsWith("/sink")), `no API call without a client token: ${unauthenticated}`);
    // Every admin view went through the demo's server side, for the `demo` topic.
    const k0 = encodeURIComponent(keys[0]);
    for (const expected of [`/demo/keys/${k0}`, `/demo/keys/${k0}/timeline`, `/demo/keys/${k0}/dead-letters/retry`, "/demo/sink", `/demo/sink/failing/${k0}`, `/demo/keys/${encodeURIComponent(keys[1])}/timeline`]) {
      assert.ok(unauthenticated.includes(expected), `the page asked ${expected}`);
    }
    // Neither server-side token is anywhere in what the page loaded, nor in what it keeps.
    const loaded = await page.evaluate(() => [location.href, ...performance.getEntriesByType("resource").map((e) => e.name)]);
    const scripts = [loaded[0], ...loaded.slice(1).filter((u) => u.startsWith(demo.base) && u.endsWith(".js"))];
    assert.ok(["/edge-panel.js", "/app.js", "/lull-web/edge.js"].every((s) => scripts.includes(demo.base + s)), scripts.join(" "));
    for (const url of scripts) {
      const body = await (await fetch(url)).text();
      for (const t of SERVER_TOKENS) assert.ok(!body.includes(t), `${url} holds ${t}`);
    }
    const kept = await page.evaluate(() => [document.documentElement.outerHTML, JSON.stringify({ ...localStorage }), JSON.stringify({ ...sessionStorage }), document.cookie].join("\n"));
    for (const t of SERVER_TOKENS) assert.ok(!kept.includes(t), `the page keeps ${t}`);
    // The token endpoint itself: `{token, expires_at}`, a bad key refused; what it gives may not read the key.
    const minted = await (await fetch(`${demo.base}/demo/token?key=${encodeURIComponent(keys[0])}`)).json();
    assert.deepEqual(Object.keys(minted).sort(), ["expires_at", "token"]);
    assert.equal(minted.expires_at, jwtClaims(minted.token).exp);
    const bad = await fetch(`${demo.base}/demo/token?key=%2E%2E`);
    assert.deepEqual([bad.status, (await bad.json()).error.code], [400, "invalid_key"]);
    const read = await fetch(`${demo.base}/v1/topics/demo/keys/${encodeURIComponent(keys[0])}`, { headers: { authorization: `Bearer ${minted.token}` } });
    assert.equal(read.status, 403, "a client token may not read the key's status");
    // A change without the page's `lull-demo: 1` header (what another site's page could send) is refused.
    for (const [method, path] of [["PUT", "/demo/sink/failing/x"], ["POST", `/demo/keys/${encodeURIComponent(keys[0])}/dead-letters/retry`]]) {
      const forged = await fetch(`${demo.base}${path}`, { method });
      assert.equal(forged.status, 403, `${method} ${path} without lull-demo: 1`);
    }
  });

  test("two pages autosave one document: one delivery per window with both pages' edits, shown in the timeline", { timeout: 150_000 }, async () => {
    await withFreshKey(`doc-two-${Date.now()}`, async (key) => {
      const [a, b] = [await demo.page({ path: `/#doc=${key}` }), await demo.page({ path: `/#doc=${key}` })];
      const keys = [];
      for (const p of [a, b]) {
        p.page.on("request", (r) => r.url().endsWith("/events") && keys.push(r.headers()["idempotency-key"]));
      }
      const tabs = await Promise.all([a, b].map((p) => p.page.evaluate(() => window.lullDemo.edge.producer)));
      const round = async (words, window) => {
        await a.page.locator("#editor").click();
        await b.page.locator("#editor").click();
        // Interleaved keystrokes: both pages type at once.
        for (let j = 0; j < words[0].length; j++) {
          await a.page.keyboard.press(words[0][j]);
          await b.page.keyboard.press(words[1][j]);
          await a.page.waitForTimeout(60 + Math.random() * 80);
        }
        const delivered = await until(async () => {
          const got = (await sinkOf(key)).filter((r) => r.status === 200 && r.delivery.window === window);
          return got.length > 0 && got;
        }, 20_000, `window ${window} in the sink`);
        // Judged by what happened: each page handed its burst over as one event, both in this window.
        const accepts = (await timelineOf(key)).filter((e) => e.lull === "accept");
        const here = accepts.filter((e) => e.window === window).length;
        if (here !== 2 || accepts.length !== 2 * window) {
          throw new ScheduleBroken(`window ${window} got ${here} of ${accepts.length} events (a page or the edge split a burst)`);
        }
        return delivered;
      };
      const [first] = await round(["hello", "world"], 1);
      assert.equal(first.delivery.reason, "quiet");
      assert.equal(first.delivery.count, 2, "each page coalesced its five keystrokes into one event");
      assert.deepEqual(first.delivery.events.map((e) => e.tab).sort(), [...tabs].sort());
      const byTab = Object.fromEntries(first.delivery.events.map((e) => [e.tab, e.text]));
      assert.deepEqual(byTab, { [tabs[0]]: "hello", [tabs[1]]: "world" });
      const [second] = await round(["!!", "??"], 2);
      assert.equal(second.delivery.count, 2);
      await a.page.waitForTimeout(1500);
      const all = (await sinkOf(key)).filter((r) => r.status === 200);
      assert.deepEqual(all.map((r) => r.delivery.window), [1, 2], "one delivery per window");
      assert.equal(new Set(keys).size, 4, "each send carried its own Idempotency-Key");
      keys.forEach((k) => assert.match(k, /^[0-9a-z]+\.\d+$/));
      // The timeline (API and panel) tells the same story.
      const timeline = await timelineOf(key);
      const kinds = timeline.map((e) => `${e.lull}:${e.window}`);
      for (const w of [1, 2]) {
        assert.equal(kinds.filter((k) => k === `accept:${w}`).length, 2);
        assert.ok(kinds.includes(`fire:${w}`) && kinds.includes(`deliver:${w}`), kinds.join(" "));
      }
      await a.page.waitForFunction(() => document.querySelectorAll("#sink-log li.good").length === 2, null, { timeout: 10_000 });
      const sinkLines = await a.page.locator("#sink-log li").allTextContents();
      assert.match(sinkLines.at(-1), new RegExp(`window 1, attempt 1: 2 event\\(s\\) from (${tabs[0]} \\+ ${tabs[1]}|${tabs[1]} \\+ ${tabs[0]}), quiet → 200`));
      await a.page.waitForFunction(() => /fire window 2/.test(document.getElementById("edge-log").textContent), null, { timeout: 10_000 });
      await a.page.waitForFunction(
        () => document.getElementById("s-succeeded").textContent === "2" && document.getElementById("s-events").textContent === "4",
        null,
        { timeout: 10_000 },
      );
      assert.deepEqual([...a.problems, ...b.problems], []);
      await a.page.locator("#edge").screenshot({ path: join(SHOTS, "edge-panel.png") });
    }, 5);
  });

  test("a failing sink: retries and a dead letter in the panel; replay delivers it", { timeout: 120_000 }, async () => {
    const key = `doc-fail-${Date.now()}`;
    const { page, problems } = await demo.page({ path: `/#doc=${key}` });
    await page.click("#fail");
    await page.waitForFunction(() => document.getElementById("fail").getAttribute("aria-pressed") === "true");
    assert.deepEqual((await demo.api("GET", "/sink")).json.failing.includes(key), true);
    await page.locator("#editor").click();
    await typeWith(page, "draft", typingDelays(5));
    await page.click("#flush"); // hand it over now and fire the edge's window
    await page.waitForFunction(() => document.getElementById("s-dead").textContent === "1", null, { timeout: 30_000 });
    const refused = (await sinkOf(key)).filter((r) => r.status === 500);
    assert.deepEqual(refused.map((r) => Number(r.attempt)), [1, 2, 3], "three attempts, each refused");
    const timeline = await timelineOf(key);
    assert.equal(timeline.filter((e) => e.lull === "deliver" && !e.ok).length, 3);
    assert.equal(timeline.filter((e) => e.lull === "retry").length, 2);
    assert.equal(timeline.filter((e) => e.lull === "dead_letter").length, 1);
    await page.waitForFunction(() => /dead letter: window 1 after 3 attempts/.test(document.getElementById("edge-log").textContent), null, { timeout: 10_000 });
    assert.equal(await text(page, "s-failures"), "3");
    await page.locator("#edge").screenshot({ path: join(SHOTS, "edge-dead-letter.png") });
    await page.click("#fail");
    await page.waitForFunction(() => document.getElementById("fail").getAttribute("aria-pressed") === "false");
    await page.click("#replay");
    const replayed = await until(async () => (await sinkOf(key)).find((r) => r.status === 200), 15_000, "the replay in the sink");
    assert.equal(replayed.delivery.reason, "replay");
    assert.equal(replayed.delivery.window, 1);
    assert.deepEqual(replayed.delivery.events.map((e) => e.text), ["draft"]);
    // The panel follows: no dead letter, one window delivered (one poll may show the first without the second).
    await page.waitForFunction(
      () => document.getElementById("s-dead").textContent === "0" && document.getElementById("s-succeeded").textContent === "1",
      null,
      { timeout: 10_000 },
    );
    // The refusals were the sink's answers to the worker, not the page's requests.
    assert.deepEqual(problems, []);
  });

  test("a throttled, then a disabled target: the panel shows the topic paused, then disabled; a resume delivers the held window", { timeout: 180_000 }, async () => {
    const key = `doc-target-${Date.now()}`;
    const { page, problems } = await demo.page({ path: `/#doc=${key}` });
    try {
      await page.click("#answer-throttle");
      await page.waitForFunction(() => document.getElementById("answer-throttle").getAttribute("aria-pressed") === "true");
      assert.equal((await demo.api("GET", "/sink")).json.answer, "throttle", "the switch reached the sink");
      await page.locator("#editor").click();
      await typeWith(page, "held", typingDelays(4));
      await page.click("#flush");
      await page.waitForFunction(() => /^paused until .*last answer 429/.test(document.getElementById("s-target").textContent), null, { timeout: 30_000 });
      const topic = (await demo.api("GET", "/v1/topics/demo")).json;
      assert.equal(topic.target.state, "paused", JSON.stringify(topic));
      assert.ok(topic.target.until > topic.target.since, JSON.stringify(topic.target));
      await page.locator("#edge").screenshot({ path: join(SHOTS, "edge-target-paused.png") });
      // The receiver now says 410: the probe after the pause gets it, and the target is disabled.
      await page.click("#answer-gone");
      await page.waitForFunction(() => /^disabled, last answer 410/.test(document.getElementById("s-target").textContent), null, { timeout: 30_000 });
      assert.equal(await text(page, "s-failures"), "0", "throttles and a 410 spend no attempt");
      await page.locator("#edge").screenshot({ path: join(SHOTS, "edge-target-disabled.png") });
      await page.click("#answer-ok");
      await page.click("#resume");
      await page.waitForFunction(() => /^active/.test(document.getElementById("s-target").textContent), null, { timeout: 10_000 });
      const delivered = await until(async () => (await sinkOf(key)).find((r) => r.status === 200), 90_000, "the held window delivered after the resume");
      assert.deepEqual(delivered.delivery.events.map((e) => e.text), ["held"]);
      const tries = await sinkOf(key);
      assert.ok(tries.some((r) => r.status === 429) && tries.some((r) => r.status === 410), JSON.stringify(tries.map((r) => r.status)));
      assert.ok(tries.every((r) => Number(r.attempt) === 1), `every try was attempt 1: ${tries.map((r) => r.attempt)}`);
      assert.deepEqual(problems, []);
    } finally {
      await demo.api("DELETE", "/sink/answer");
      await demo.api("POST", "/v1/topics/demo/target:resume");
    }
  });

  test("leaving the page hands over the edits it still held (fetch keepalive)", { timeout: 60_000 }, async () => {
    await withFreshKey(`doc-hide-${Date.now()}`, async (key) => {
      const { page } = await demo.page({ path: `/#doc=${key}`, recordFetches: true });
      // The page's client token (fetched as it loads): a page going away cannot wait for one.
      await page.evaluate(() => window.lullDemo.edge.tokenReady);
      await page.locator("#editor").click();
      await typeWith(page, "bye", [40, 40, 0]);
      const held = await page.evaluate(() => {
        // Leave in the next task (pagehide: the client hands over what it holds).
        setTimeout(() => (location.href = "about:blank"));
        return window.lullDemo.edge.pending();
      });
      if (!held) throw new ScheduleBroken("the page debounce had already handed the edits over");
      const delivered = await until(async () => (await sinkOf(key)).find((r) => r.status === 200), 15_000, "the edit in the sink");
      assert.deepEqual(delivered.delivery.events.map((e) => e.text), ["bye"]);
      // What the page's fetches were, read back from its origin's storage.
      await page.goto(`${demo.base}/healthz`);
      const noted = await page.evaluate(() => JSON.parse(localStorage.getItem("lull-test-fetches")));
      const sends = noted.filter((f) => f.method === "POST" && f.url.endsWith("/events"));
      assert.deepEqual(sends.map((f) => f.keepalive), [true], "one send, made with keepalive as the page went");
    }, 5);
  });

  test("screenshots: the whole page, in the dark scheme, and on a narrow screen with nothing cut off", { timeout: 60_000 }, async () => {
    // Both halves at work: a search shown, an autosave delivered.
    const key = `doc-shot-${Date.now()}`;
    const light = await demo.page({ path: `/#doc=${key}` });
    await light.page.locator("#q").click();
    await typeWith(light.page, "Spri", typingDelays(4));
    await light.page.waitForTimeout(700);
    await typeWith(light.page, "ng", typingDelays(2));
    await settled(light.page, "Spring");
    await light.page.locator("#editor").click();
    await typeWith(light.page, "Meeting notes", typingDelays(13));
    await until(async () => (await sinkOf(key)).some((r) => r.status === 200), 15_000, "the autosave in the sink");
    await light.page.waitForFunction(() => document.querySelectorAll("#sink-log li").length > 0);
    await light.page.screenshot({ path: join(SHOTS, "page.png"), fullPage: true });
    const dark = await demo.page({ colorScheme: "dark" });
    const bg = await dark.page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(bg, "rgb(21, 23, 26)", "the dark scheme's background");
    await dark.page.screenshot({ path: join(SHOTS, "page-dark.png"), fullPage: true });
    const narrow = await demo.page({ viewport: { width: 390, height: 900 } });
    await narrow.page.waitForTimeout(500);
    const overflow = await narrow.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow} px wider than a 390 px screen`);
    await narrow.page.screenshot({ path: join(SHOTS, "page-narrow.png"), fullPage: true });
    assert.deepEqual([...light.problems, ...dark.problems, ...narrow.problems], []);
  });
});

describe("lull-web/edge from another site", () => {
  test("a page on an origin LULL_CORS_ORIGINS lists sends to the edge; one on another origin is stopped by the browser, and nothing is stored", { timeout: 60_000 }, async () => {
    const context = await demo.browser.newContext();
    try {
      const page = await context.newPage();
      const key = `doc-cors-${Date.now()}`;
      await page.goto(`${allowedSite.origin}/?edge=${encodeURIComponent(demo.base)}&key=${key}&token=${await mintFor(key)}`);
      const outcome = await page.waitForFunction(() => window.outcome, null, { timeout: 15_000 }).then((h) => h.jsonValue());
      assert.equal(outcome.ok, true, JSON.stringify(outcome));
      assert.deepEqual([outcome.sent.window, outcome.sent.seq], [1, 1]);
      assert.equal((await demo.api("GET", `/v1/topics/demo/keys/${key}`)).json.stats.events, 1);

      const refusedKey = `doc-cors-refused-${Date.now()}`;
      await page.goto(`${otherSite.origin}/?edge=${encodeURIComponent(demo.base)}&key=${refusedKey}&token=${await mintFor(refusedKey)}`);
      const refused = await page.waitForFunction(() => window.outcome, null, { timeout: 15_000 }).then((h) => h.jsonValue());
      assert.deepEqual(refused, { ok: false, name: "TypeError" }, "the browser refused the call (CORS)");
      assert.equal((await demo.api("GET", `/v1/topics/demo/keys/${refusedKey}`)).json.stats.events, 0, "nothing stored");
      const preflight = await fetch(`${demo.base}/v1/topics/demo/keys/k/events`, {
        method: "OPTIONS",
        headers: { origin: otherSite.origin, "access-control-request-method": "POST" },
      });
      assert.equal(preflight.status, 403);
      assert.equal((await preflight.json()).error.code, "origin_not_allowed");
      const allowed = await fetch(`${demo.base}/healthz`, { headers: { origin: allowedSite.origin } });
      assert.equal(allowed.headers.get("access-control-allow-origin"), allowedSite.origin);
      assert.equal(allowed.headers.get("access-control-expose-headers"), "retry-after");
      assert.equal(allowed.headers.get("vary"), "Origin");
      const other = await fetch(`${demo.base}/healthz`, { headers: { origin: otherSite.origin } });
      assert.equal(other.headers.get("access-control-allow-origin"), null);
    } finally {
      await context.close();
    }
  });
});
