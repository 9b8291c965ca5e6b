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
      return { page, context, problems, aborted };
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
