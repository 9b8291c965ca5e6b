// A framework adapter's useSearch in a real page: the adapter's page/ (a
// search box with its useSearch, waiting WAIT_MS) built by Vite (production,
// no configuration) against the built package (node_modules/lull-web, put
// there by the suite), served on 127.0.0.1 with a search endpoint that counts
// what reaches it, and typed into by playwright in Debian's Chromium with
// real keystrokes and timers. Judged by what happened: the keys' real times
// (recorded in the page), the requests the server saw, which of them the
// browser aborted, and what the page showed. The page keeps in `window.page`
// `ready`, `keys` ([key, time]), `shown` ({ query, results }) and `errors`,
// and shows `idle` in `#state` when no search waits or runs.
import { join, resolve } from 'node:path';
import { build } from 'vite';
import { launch } from './chromium.mjs';
import { serve } from './serve.mjs';

export const WAIT_MS = 150; // each page/main.js's wait

/** Build `<here>/page` into `<scratch>/<name>-page`, type into it, print the checks and exit (1 if any failed). */
export async function searchPage(name, here, scratch) {
  const out = join(resolve(scratch ?? join(here, '../../../target')), `${name}-page`);
  await build({ root: join(here, 'page'), configFile: false, logLevel: 'warn', build: { outDir: out, emptyOutDir: true } });

  // The search endpoint: answers `q` after `latency(q)` ms with three made-up
  // results; each request is logged with whether the browser went away first.
  const requests = [];
  let latency = () => 40;
  const handle = (req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname !== '/search') return false;
    const q = url.searchParams.get('q');
    const entry = { q, aborted: false, answered: false };
    requests.push(entry);
    const timer = setTimeout(() => {
      entry.answered = true;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify([1, 2, 3].map((n) => `${q} ${n}`)));
    }, latency(q));
    res.on('close', () => {
      if (!entry.answered) {
        entry.aborted = true;
        clearTimeout(timer);
      }
    });
    return true;
  };

  const server = await serve(out, handle);
  const browser = await launch();
  let failures = 0;
  let checks = 0;
  const check = (name, ok, detail) => {
    checks++;
    console.log(`${ok ? 'ok' : 'FAILED'} - ${name}${ok ? '' : `: ${JSON.stringify(detail)}`}`);
    if (!ok) failures++;
  };
  const settled = (page) => page.waitForFunction(() => document.querySelector('#state')?.textContent === 'idle', null, { timeout: 10_000 });

  /**
   * The queries lull may have searched while `typed` was typed: a prefix whose
   * next key came at least `wait` (less a little slack) after it, where the
   * quiet period could really end; the whole text always (it ends quiet).
   */
  function allowed(typed, keys) {
    const may = new Set([typed]);
    for (let k = 0; k + 1 < keys.length; k++) {
      if (keys[k + 1][1] - keys[k][1] >= WAIT_MS - 5) may.add(typed.slice(0, k + 1));
    }
    return may;
  }

  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    await page.goto(server.url, { timeout: 30_000 });
    await page.waitForFunction(() => window.page?.ready, null, { timeout: 15_000 });
    const input = page.locator('#q');

    // 1. Typing a word: one request for it, unless the machine really paused between two keys.
    await input.pressSequentially('lisbon', { delay: 30 });
    await page.waitForFunction(() => window.page.shown.some((s) => s.query === 'lisbon'), null, { timeout: 10_000 });
    await settled(page);
    let seen = await page.evaluate(() => window.page);
    const may = allowed('lisbon', seen.keys);
    const first = requests.map((r) => r.q);
    check(
      'typing "lisbon": one request for the word, intermediate ones only where a key really came a whole wait later',
      first.at(-1) === 'lisbon' && first.filter((q) => q === 'lisbon').length === 1 && first.every((q) => may.has(q) && q.length >= 2),
      { requests: first, keys: seen.keys, may: [...may] },
    );
    check('its results are shown', JSON.stringify(seen.shown.at(-1)) === JSON.stringify({ query: 'lisbon', results: ['lisbon 1', 'lisbon 2', 'lisbon 3'] }), seen.shown);

    // 2. A stale request: "po" answered slowly, "porto" typed while it runs: "po" is aborted, never shown.
    latency = (q) => (q === 'po' ? 3_000 : 40);
    await input.fill('');
    const before = requests.length;
    await input.pressSequentially('po', { delay: 20 });
    const poSent = Date.now();
    while (!requests.slice(before).some((r) => r.q === 'po') && Date.now() - poSent < 5_000) await new Promise((r) => setTimeout(r, 10));
    await input.pressSequentially('rto', { delay: 20 });
    await page.waitForFunction(() => window.page.shown.some((s) => s.query === 'porto'), null, { timeout: 10_000 });
    await settled(page);
    await new Promise((r) => setTimeout(r, 200)); // let the server see the closed connection
    seen = await page.evaluate(() => window.page);
    const second = requests.slice(before);
    const po = second.find((r) => r.q === 'po');
    check('"po" was requested, then aborted by the browser when "porto" was searched', po !== undefined && po.aborted && !po.answered, second);
    check('"porto" was answered and shown; "po" was never shown', second.at(-1)?.q === 'porto' && second.at(-1).answered && !seen.shown.some((s) => s.query === 'po'), {
      requests: second,
      shown: seen.shown,
    });

    // 3. Enter searches now (no quiet period); Escape drops the pending query.
    latency = () => 40;
    await input.fill('');
    const beforeEnter = requests.length;
    await input.pressSequentially('faro', { delay: 20 });
    await input.press('Enter');
    await page.waitForFunction(() => window.page.shown.some((s) => s.query === 'faro'), null, { timeout: 10_000 });
    await input.pressSequentially('s', { delay: 0 });
    await input.press('Escape');
    await new Promise((r) => setTimeout(r, WAIT_MS * 3));
    const third = requests.slice(beforeEnter).map((r) => r.q);
    check('Enter searched "faro" at once; Escape dropped "faros"', third.includes('faro') && !third.includes('faros'), third);
    check('no page errors', errors.length === 0 && seen.errors.length === 0, { errors, shownErrors: seen.errors });
  } finally {
    await browser.close();
    await server.close();
  }
  console.log(`${name} page: ${checks - failures} passed, ${failures} failed`);
  process.exit(failures === 0 ? 0 : 1);
}
