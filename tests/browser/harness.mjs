// The demo page under test: `wrangler dev` serving the page and the API (as
// `cargo xtask dev` does, on free ports), Debian's Chromium driven by
// playwright-core, and what a page did wrong (console errors, page errors,
// failed requests) collected per page.
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { basename, join, resolve } from "node:path";
import { launch } from "../web/chromium.mjs";
import { client, startWranglerDev } from "../edge/harness.mjs";

export { ScheduleBroken, until, withFreshKey } from "../edge/harness.mjs";

const root = resolve(import.meta.dirname, "../..");
/** Where the screenshots go. */
export const SHOTS = join(root, "target/demo");
export const ADMIN = "dev-admin-token-local";
/** The tokens of .dev.vars.example that only the tests (never the page) may hold. */
export const SERVER_TOKENS = [ADMIN, "dev-ingest-token"];
/** How long the page's client tokens live (s): `GET /demo/token` mints them for 600 s. */
export const CLIENT_TOKEN_TTL_S = 600;

/** A JWT's claims (its middle part), or undefined if it is none. */
export function jwtClaims(token) {
  const parts = token.split(".");
  if (parts.length !== 3) return undefined;
  try {
    return JSON.parse(Buffer.from(parts[1], "base64url").toString());
  } catch {
    return undefined;
  }
}

/**
 * What is wrong with a credential in a request of the demo page (undefined if
 * nothing): it carries no token of .dev.vars.example anywhere (URL, headers,
 * body); a bearer token is a client token (a JWT) of topic `demo` for exactly
 * the key the request is about (no prefix), minted for 600 s, on a route a
 * client token may use (send, flush, cancel); nothing else is sent with one.
 */
export function credentialProblem({ url, method, headers, body }) {
  const seen = SERVER_TOKENS.find((t) => `${url} ${JSON.stringify(headers)} ${body ?? ""}`.includes(t));
  if (seen) return `${method} ${url} carries the server-side token ${seen}`;
  const authorization = Object.entries(headers).find(([name]) => name.toLowerCase() === "authorization")?.[1];
  if (authorization === undefined) return undefined;
  const bad = (why) => `${method} ${url}: ${why} (authorization ${authorization})`;
  const [scheme, token = ""] = authorization.split(" ");
  const claims = jwtClaims(token);
  if (scheme !== "Bearer" || !claims) return bad("the bearer token is not a JWT");
  const route = /^\/v1\/topics\/([^/]+)\/keys\/([^/]+)(\/events|\/flush)?$/.exec(new URL(url).pathname);
  if (!route || (route[3] === undefined && method !== "DELETE") || (route[3] !== undefined && method !== "POST")) {
    return bad("a client token is sent only to send, flush or cancel");
  }
  const [topic, key] = [decodeURIComponent(route[1]), decodeURIComponent(route[2])];
  if (claims.topic !== "demo" || topic !== "demo") return bad(`the token's topic is ${claims.topic}, the request's ${topic}`);
  if (claims.key !== key || "key_prefix" in claims) return bad(`the token's key is ${claims.key ?? `prefix ${claims.key_prefix}`}, the request's ${key}`);
  if (claims.exp - claims.iat !== CLIENT_TOKEN_TTL_S) return bad(`the token lives ${claims.exp - claims.iat} s`);
  return undefined;
}

/**
 * The demo topic as the tests run it: the page's topic with a shorter quiet
 * period and fast retries (3 attempts), delivering to this run's own sink.
 */
export const TOPICS = (base) => ({
  demo: {
    target: `${base}/sink`,
    wait_ms: 1000,
    max_wait_ms: 6000,
    payload: "all",
    retry: { max_attempts: 3, base_ms: 200, cap_ms: 600 },
    // The page holds a client token for its document (as wrangler.toml's [env.dev] demo topic).
    client_tokens: true,
  },
});

/** wrangler dev (with `vars`) and a browser; `page()` opens the demo in a fresh context. */
export async function startDemo(vars = {}) {
  mkdirSync(SHOTS, { recursive: true });
  const dev = await startWranglerDev(TOPICS, vars);
  let browser;
  try {
    browser = await launch();
  } catch (e) {
    await dev.stop();
    throw e;
  }
  const pages = [];
  return {
    base: dev.base,
    browser,
    /**
     * The demo page, loaded; `problems` collects what went wrong in it. With
     * `recordFetches`, each `fetch` the page makes is noted (url, method,
     * keepalive) in its origin's localStorage (`lull-test-fetches`), which
     * outlives the document: a test can read what a page did as it went.
     * Every request the page makes is kept in `requests` (url, method,
     * headers, body); one that carries a server-side token, or a bearer token
     * other than a client token for the key it is about, is a problem
     * ([`credentialProblem`]): the page holds only its minted client token.
     */
    async page({ path = "/", viewport = { width: 1400, height: 1400 }, colorScheme = "light", expectAborts = false, recordFetches = false } = {}) {
      const context = await browser.newContext({ viewport, colorScheme });
      const page = await context.newPage();
      if (recordFetches) {
        await page.addInitScript(() => {
          const fetch = window.fetch;
          window.fetch = (input, init) => {
            const noted = JSON.parse(localStorage.getItem("lull-test-fetches") ?? "[]");
            noted.push({ url: String(input), method: init?.method ?? "GET", keepalive: init?.keepalive === true });
            localStorage.setItem("lull-test-fetches", JSON.stringify(noted));
            return fetch(input, init);
          };
        });
      }
      const problems = [];
      const aborted = [];
      const requests = [];
      page.on("request", (r) => {
        const request = { url: r.url(), method: r.method(), headers: r.headers(), body: r.postData() ?? "" };
        requests.push(request);
        const problem = credentialProblem(request);
        if (problem) problems.push(problem);
      });
      page.on("console", (m) => m.type() === "error" && problems.push(`console: ${m.text()}`));
      page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
      page.on("requestfailed", (r) => {
        const why = r.failure()?.errorText ?? "";
        if (expectAborts && why === "net::ERR_ABORTED" && r.url().includes("/demo/search?")) aborted.push(r.url());
        else problems.push(`request failed: ${r.method()} ${r.url()} ${why}`);
      });
      page.on("response", (r) => r.status() >= 400 && problems.push(`HTTP ${r.status()}: ${r.url()}`));
      await page.goto(dev.base + path);
      await page.waitForFunction(() => window.lullDemo !== undefined);
      pages.push(context);
      return { page, context, problems, aborted, requests };
    },
    /** The API, with the admin token. */
    api: client(dev.base, ADMIN).call,
    /** Close every page opened so far (they poll the edge while open). */
    async closePages() {
      for (const c of pages.splice(0)) await c.close().catch(() => {});
    },
    async stop() {
      for (const c of pages.splice(0)) await c.close().catch(() => {});
      await browser.close().catch(() => {});
      await dev.stop();
    },
    output: dev.output,
  };
}

/**
 * A site of its own on 127.0.0.1 (another origin than the worker's) serving
 * `html` at `/` and the built lull-web package under `/lull-web/`.
 */
export async function startOtherSite(html) {
  const pkg = join(root, "target/www/lull-web");
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    if (url.pathname === "/") return res.writeHead(200, { "content-type": "text/html" }).end(html);
    const file = join(pkg, basename(url.pathname));
    if (url.pathname.startsWith("/lull-web/") && existsSync(file)) {
      return res.writeHead(200, { "content-type": "text/javascript" }).end(readFileSync(file));
    }
    res.writeHead(404).end();
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  return {
    origin: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((ok) => (server.closeAllConnections(), server.close(ok))),
  };
}

/** Type `text` into the focused element, one key at a time, waiting `delays[i]` ms after key i. */
export async function typeWith(page, text, delays) {
  let i = 0;
  for (const ch of text) {
    await page.keyboard.press(ch === " " ? "Space" : ch);
    await page.waitForTimeout(delays[i++] ?? 0);
  }
}

/** Realistic per-key delays: `n` of them, from `min` to `max` ms. */
export const typingDelays = (n, min = 60, max = 160) => Array.from({ length: n }, () => min + Math.random() * (max - min));
