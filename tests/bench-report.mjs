// BENCH.md: the project's one current benchmark document, written by
// `cargo xtask bench` from the JSON its three benches write (tests/web/bench.mjs,
// tests/edge/bench.mjs, tests/edge/bench-queues.mjs), so no figure lives in
// prose elsewhere. Every figure comes from that JSON; the goals the JSON does
// not carry are in GOALS below; the findings are tests/bench-findings.md,
// included as written. Plain Node (20 or later), no dependencies.
// usage: node tests/bench-report.mjs <web.json> <edge.json> <queues.json> <budget.json> <out.md>
import { execFileSync } from "node:child_process";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { machine } from "./bench-run.mjs";

/**
 * The goals the JSON does not state (the web bench's `goals` do: per call,
 * bytes an app pays). As the benches print them, or as the project set them;
 * each judged on the row that names it.
 */
const GOALS = {
  // Single events, accepted per second: lull-edge at least this times the same-promises JS object, on 1 hot key, 1,000 new keys and 1,000 known keys.
  single_events_vs_promises: 1.0,
  // Single events, workerd's CPU per event (accepting and delivering): lull-edge at most this times the same-promises JS object's.
  cpu_per_event_vs_promises: 1.0,
  // The paced hot key: lull-edge's accept p99 at most the same-promises JS object's in at least this many rounds (of 4).
  paced_p99_rounds_vs_promises: 3,
  // The paced hot key: lull-edge's full collections per 1,000 events (V8's trace) at most this times the same-promises JS object's.
  paced_full_gc_vs_promises: 1.0,
  // Fire lateness p99 (delivered − due), one event per key every few ms on an unsaturated runtime: at most this many ms.
  lateness_p99_ms: 50,
  // One hot key in events:batch requests: at least this times the no-op object's single-request rate (bench.mjs prints it).
  batch_vs_noop: 5,
  // The paced hot key at the most producers (open loop): accept p99 at most this many ms (bench.mjs prints it).
  paced_p99_ms: 50,
  // Accepted events not found in exactly one delivered window, in any hot-key load.
  lost: 0,
  // Storage rows written per event, one hot key in batches: at most this.
  batch_rows_per_event: 0.5,
  // Rows written per event, single events on one hot key (steady state, the worst of its loads): at most this.
  single_rows_per_event: 1.2,
  // Cost per million events, one hot key in batches, at Cloudflare's published prices: at most this many dollars.
  batch_cost_per_million: 0.5,
  // Requests the topic's gate object serves per forward: at most this (bench-queues.mjs prints it).
  gate_requests_per_forward: 3,
  // A webhook topic with a healthy target and no bound: requests its topic's object serves per delivery, at most this.
  topic_requests_per_delivery: 0.05,
  // A throttling receiver: requests it sees while it throttles, lull-edge / the plain JS object, at most this.
  throttled_requests_ratio: 0.75,
};

const [webPath, edgePath, queuesPath, budgetPath, outPath] = process.argv.slice(2).map((p) => resolve(p));
if (!outPath) {
  console.error("usage: node tests/bench-report.mjs <web.json> <edge.json> <queues.json> <budget.json> <out.md>");
  process.exit(2);
}
const read = (path) => ({ path, json: JSON.parse(readFileSync(path, "utf8")), mtime: statSync(path).mtime });
const web = read(webPath);
const edge = read(edgePath);
const queues = read(queuesPath);
const budget = read(budgetPath);
const W = web.json;
const E = edge.json;
const Q = queues.json;

// ---- figures: anything absent is named (stderr) and shown as "n/a", never "undefined" or "NaN" ----

const missing = [];
/** The value at `keys` under `root` (named `label` if it is absent), or null. */
function at(label, root, ...keys) {
  let v = root;
  for (const k of keys) v = v == null ? undefined : v[k];
  if (v === undefined || v === null || (typeof v === "number" && !Number.isFinite(v))) {
    missing.push(`${label}.${keys.join(".")}`);
    return null;
  }
  return v;
}
const NA = "n/a";
const num = (x, digits = 0) =>
  typeof x === "number" && Number.isFinite(x) ? x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }) : NA;
const times = (x, digits = 2) => (x === null ? NA : x !== 0 && Math.abs(x) < 0.1 ? `${Number(x.toPrecision(2))}×` : `${num(x, digits)}×`);
const ms = (x, digits = 1) => (x === null ? NA : `${num(x, digits)} ms`);
const bytes = (x) => (x === null ? NA : `${num(x)} B`);
const kb = (x) => (x === null ? NA : `${num(x / 1024, 1)} KB`);
const seconds = (x) => (x === null ? NA : `${num(x / 1000, 1)} s`);
const dollars = (x) => (x === null ? NA : `$${num(x, 2)}`);
const perSec = (x) => (x === null ? NA : `${num(x)} ev/s`);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
/** a / b, or null if either is absent or b is 0. */
const ratio = (a, b) => (a === null || b === null || b === 0 ? null : a / b);

// ---- goals: each judged once, counted for the summary line ----

const judged = [];
/** A goal's cell and its verdict: `ok` true, false, or null (no figure to judge). */
function goal(text, ok, what) {
  judged.push({ what, ok });
  return { text, verdict: ok === null ? NA : ok ? "met" : "**missed**" };
}
const NO_GOAL = { text: "–", verdict: "–" };
/** Several goals on one row: their texts and verdicts joined. */
const goals = (...gs) => ({ text: gs.map((g) => g.text).join("; "), verdict: gs.map((g) => g.verdict).join("; ") });
const atMost = (x, limit) => (x === null || limit === null ? null : x <= limit);
const atLeast = (x, limit) => (x === null || limit === null ? null : x >= limit);

// ---- Markdown ----

const cell = (s) => String(s).replaceAll("|", "\\|").replaceAll("\n", " ");
const table = (head, rows) =>
  [`| ${head.map(cell).join(" | ")} |`, `|${head.map(() => "---").join("|")}|`, ...rows.map((r) => `| ${r.map(cell).join(" | ")} |`)].join("\n");
/** A row of a half's table: measure, goal, figure, peers, ratio, verdict. */
const row = (measure, g, figure, peers, r) => [measure, g.text, figure, peers || "–", r || "–", g.verdict];
/** A heading row inside a table (a group of rows). */
const group = (name) => [`**${name}**`, "", "", "", "", ""];

// ---- the run: when, which commit, which machine ----

function git(...args) {
  try {
    return execFileSync("git", args, { cwd: new URL("..", import.meta.url).pathname, stdio: ["ignore", "pipe", "ignore"] }).toString().trim();
  } catch {
    return null;
  }
}
/** Each bench's `run` object, or one made now from the file's mtime and the checkout (older JSON has none). */
const runs = Object.fromEntries(
  [
    ["lull-web", web],
    ["lull-edge", edge],
    ["load levelling", queues],
    ["lull pull's budget", budget],
  ].map(([name, { json, mtime }]) => {
    if (json.run) return [name, { ...json.run, from_json: true }];
    const status = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)BENCH.md");
    return [name, { date: mtime.toISOString(), commit: git("rev-parse", "--short", "HEAD"), uncommitted_changes: status === null ? null : status !== "", machine: machine(), from_json: false }];
  }),
);
const when = (iso) => `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
const commitText = (r) => (r.commit ? `\`${r.commit}\`${r.uncommitted_changes ? " + uncommitted changes" : ""}` : NA);
const commits = [...new Set(Object.values(runs).map(commitText))];
const webRun = runs["lull-web"];
const edgeRun = runs["lull-edge"];
const m = edgeRun.machine ?? webRun.machine ?? machine();
const gib = (b) => `${num(b / 1024 ** 3, 1)} GiB`;
const chromium = webRun.machine?.chromium ?? at("web", W, "browser")?.match(/Chrom\S+/)?.[0] ?? NA;
const header = [
  "# Benchmarks",
  "",
  "BENCH.md — written by `cargo xtask bench`; do not edit by hand.",
  "",
  table(
    ["", ""],
    [
      ["commit", commits.length === 1 ? commits[0] : Object.entries(runs).map(([name, r]) => `${name} ${commitText(r)}`).join("; ")],
      [
        "run",
        Object.entries(runs)
          .map(([name, r]) => {
            const rounds = name === "lull-edge" && E.config?.ROUNDS !== undefined ? `, ${num(E.config.ROUNDS)} round${E.config.ROUNDS === 1 ? "" : "s"}` : "";
            return `${name} ${when(r.date)}${r.seconds !== undefined ? ` (${num(r.seconds)} s${rounds})` : ""}${r.from_json ? "" : " (the JSON file's time)"}`;
          })
          .join("; "),
      ],
      ["machine", `${m.cpu ?? NA}, ${num(m.cores)} cores, ${gib(m.memory_bytes)} memory; ${m.os ?? NA}`],
      [
        "runtimes",
        [
          `Node ${edgeRun.machine?.node ?? m.node}` + (webRun.machine?.node && webRun.machine.node !== edgeRun.machine?.node ? ` (lull-web's bench: ${webRun.machine.node})` : ""),
          `Chromium ${chromium.replace(/^Chrome\//, "")} (headless)`,
          edgeRun.machine?.workerd ? `workerd ${edgeRun.machine.workerd} (Miniflare ${edgeRun.machine.miniflare ?? NA}, wrangler ${edgeRun.machine.wrangler ?? NA})` : null,
        ]
          .filter(Boolean)
          .join("; "),
      ],
    ],
  ),
];

// ---- lull-web ----

const webRows = [];
{
  const pc = (name) => at("web", W, "per_call_ns", name, "median");
  const lull = pc("lull-web");
  const lodash = pc("lodash.debounce");
  const es = pc("es-toolkit");
  const g = W.goals ?? {};
  const perCallGoal = g.per_call_at_most_lodash;
  const vsLodash = W.ratios?.per_call_vs_lodash ?? ratio(lull, lodash);
  webRows.push(group("per call (the same Chromium page)"));
  webRows.push(
    row(
      "per debounced call, vs lodash.debounce",
      perCallGoal ? goal(`≤ ${times(perCallGoal.goal)} lodash.debounce`, perCallGoal.met, "lull-web per call vs lodash") : NO_GOAL,
      `${num(lull, 1)} ns`,
      `lodash.debounce ${num(lodash, 1)} ns`,
      `${times(vsLodash)} lodash.debounce`,
    ),
  );
  webRows.push(
    row("per debounced call, vs es-toolkit", NO_GOAL, `${num(lull, 1)} ns`, `es-toolkit ${num(es, 1)} ns`, `${times(W.ratios?.per_call_vs_es_toolkit ?? ratio(lull, es), 3)} es-toolkit`),
  );
  const floors = at("web", W, "floors_ns") ?? {};
  webRows.push(row("the floors under a call", NO_GOAL, Object.entries(floors).map(([k, v]) => `${k} ${num(v, 1)} ns`).join("; ") || NA, "", ""));

  // What an app pays: each app lull-web was built in, its peers' builds of the same app after it.
  const sizes = at("web", W, "consumer_sizes") ?? {};
  const results = sizes.results ?? {};
  const BASELINE = "no library (stubs)";
  const added = (library, app, bundler) => at("web", results, library, app, bundler, "added_gzip");
  const bundled = (library, app) => ["vite", "webpack", "esbuild"].map((b) => `${b === "vite" ? "Vite" : b} ${bytes(added(library, app, b))}`).join(", ");
  const appGoals = {
    "debounce + throttle": () => [
      g.consumer_debounce_throttle_vite_gzip_at_most_4kb &&
        goal(`≤ ${bytes(g.consumer_debounce_throttle_vite_gzip_at_most_4kb.goal)} added (Vite)`, g.consumer_debounce_throttle_vite_gzip_at_most_4kb.met, "debounce + throttle added bytes"),
      g.consumer_debounce_throttle_vite_gzip_under_tanstack_pacer_stretch &&
        goal(
          `stretch: < @tanstack/pacer's ${bytes(g.consumer_debounce_throttle_vite_gzip_under_tanstack_pacer_stretch.goal)}`,
          g.consumer_debounce_throttle_vite_gzip_under_tanstack_pacer_stretch.met,
          "debounce + throttle under @tanstack/pacer (stretch)",
        ),
    ],
    everything: () => [
      g.consumer_everything_vite_gzip_at_most_20kb &&
        goal(`≤ ${bytes(g.consumer_everything_vite_gzip_at_most_20kb.goal)} added (Vite)`, g.consumer_everything_vite_gzip_at_most_20kb.met, "everything added bytes"),
      g.all_of_lull_web_in_an_app_gzip_at_most_25kb &&
        goal(`≤ ${bytes(g.all_of_lull_web_in_an_app_gzip_at_most_25kb.goal)} (the earlier wasm + glue budget)`, g.all_of_lull_web_in_an_app_gzip_at_most_25kb.met, "all of lull-web in an app"),
    ],
  };
  const apps = Object.keys(results["lull-web"] ?? {});
  webRows.push(group("what an app pays: gzip bytes added to a production build (Vite, webpack, esbuild)"));
  for (const app of apps) {
    const peers = Object.keys(results).filter((lib) => lib !== "lull-web" && lib !== BASELINE && results[lib][app]);
    const ours = added("lull-web", app, "vite");
    const gs = (appGoals[app]?.() ?? []).filter(Boolean);
    webRows.push(
      row(
        `lull-web: ${app}`,
        gs.length ? goals(...gs) : NO_GOAL,
        bundled("lull-web", app),
        peers.map((p) => `${p} ${bytes(added(p, app, "vite"))}`).join("; "),
        peers.map((p) => `${times(ratio(ours, added(p, app, "vite")), 1)} ${p}`).join("; ") + (peers.length ? " (Vite)" : ""),
      ),
    );
    for (const p of peers) webRows.push(row(`  ${p}: ${app}`, NO_GOAL, bundled(p, app), "", ""));
  }
  const pkg = at("web", W, "bytes") ?? {};
  webRows.push(group("the package and its engines"));
  webRows.push(
    row(
      "the package, every file (what npm installs; an app bundles only what it imports)",
      NO_GOAL,
      `${kb(at("web", pkg, "lull-web", "gzip"))} gzip`,
      `lodash.debounce ${kb(at("web", pkg, "lodash.debounce", "gzip"))}; es-toolkit's debounce ${kb(at("web", pkg, "es-toolkit", "gzip"))}`,
      `${times(W.ratios?.gzip_vs_lodash ?? ratio(pkg["lull-web"]?.gzip ?? null, pkg["lodash.debounce"]?.gzip ?? null), 1)} lodash.debounce`,
    ),
  );
  for (const [engine, label] of [
    ["lite", "lite engine (debounce, throttle)"],
    ["full", "full engine (the rest)"],
  ]) {
    webRows.push(
      row(
        `${label}: wasm gzip; instantiate (first use)`,
        NO_GOAL,
        `${bytes(at("web", pkg, `${engine} engine wasm`, "gzip"))}; ${ms(at("web", W, "instantiate_ms", engine, "median"))}`,
        "",
        "",
      ),
    );
  }
}
const webMethod = (() => {
  const loads = W.loads ?? W.instantiate_ms?.lite?.loads?.length ?? null;
  const v = W.consumer_sizes?.versions ?? {};
  const peerVersions = Object.entries(v)
    .filter(([k]) => !["vite", "webpack", "esbuild", "lull-web"].includes(k))
    .map(([k, ver]) => `${k} ${ver}`)
    .join(", ");
  return (
    `**Method.** One headless Chromium page (${chromium}), lull-web, lodash.debounce and es-toolkit's debounce side by side in one run. ` +
    `Per call: ${num(at("web", W, "calls_per_round"))} calls a round, ` +
    (W.wait_ms !== undefined ? `a wait of ${num(W.wait_ms)} ms (every call lands in an open window), ` : "every call in an open window, ") +
    `${num(at("web", W, "rounds"))} interleaved rounds after a warm-up, the median. ` +
    `Instantiate: each engine's first use, the median of ${num(loads)} page loads. ` +
    `What an app pays: ${at("web", W, "consumer_sizes", "method") ?? NA}; ` +
    `Vite ${v.vite ?? NA}, webpack ${v.webpack ?? NA}, esbuild ${v.esbuild ?? NA}; ${peerVersions}. ` +
    `Bytes are gzip -9.`
  );
})();

// ---- lull-edge ----

const edgeRows = [];
const S = at("edge", E, "summary") ?? {};
const R = E.ratios ?? {};
const C = E.config ?? {};
/** A setting of the edge bench (its JSON's `config`), or null. */
const cfg = (key) => at("edge.config", C, key);
const LULL = "lull-edge";
const CLIENT = "lull-edge, client token";
const JS = "plain JS DO";
const PROMISES = "same-promises JS DO";
const JS_PUSH = "plain JS DO, alarm pushed per event";
const NOOP = "no-op DO";
const PEER_NAMES = { [PROMISES]: "same-promises JS object", [JS]: "plain JS object", [JS_PUSH]: "plain JS, alarm pushed per event", [NOOP]: "no-op object" };
const s = (target, ...keys) => at("edge", S, target, ...keys);
/** The peers' figures for `keys` of the summary, formatted by `fmt`, those that have one. */
const peers = (targets, fmt, ...keys) => targets.map((t) => `${PEER_NAMES[t]} ${fmt(s(t, ...keys))}`).join("; ");
/** Collections per 1,000 events (V8's trace in workerd): young / full, the pauses' ms, the longest pause. */
const gcFigure = (g) => `${num(g.gc_minor_per_1k ?? null, 1)} young / ${num(g.gc_full_per_1k ?? null, 2)} full (${ms(g.gc_ms_per_1k ?? null)} paused; longest ${ms(g.gc_longest_ms ?? null)})`;
{
  edgeRows.push(group(`single events, ${num(cfg("CONCURRENCY"))} clients: against the same-promises JS object (the goals; the plain one is the floor, no goal)`));
  for (const [phase, label] of [
    ["hot", "1 hot key"],
    ["spread", "1,000 new keys"],
    ["known", "the same 1,000 keys again, known"],
  ]) {
    const vs = (peer, field) => ratio(s(LULL, phase, field), s(peer, phase, field));
    // The same ratio taken in each round (lull-edge and the object run one after the other): its spread.
    const perRound = (field) => {
      const x = R.per_round_vs_promises?.[phase]?.[field];
      return x ? `; round by round ${times(x.median)} (${times(x.min)} to ${times(x.max)})` : "";
    };
    const client = phase === "known" ? "" : `; client token ${num(s(CLIENT, phase, "per_sec"))}`;
    edgeRows.push(
      row(
        `events/s, ${label} (accept p50 / p99)`,
        goal(`≥ ${times(GOALS.single_events_vs_promises)} the same-promises JS object`, atLeast(vs(PROMISES, "per_sec"), GOALS.single_events_vs_promises), `${label}: events/s vs the same-promises JS object`),
        `${num(s(LULL, phase, "per_sec"))} (${num(s(LULL, phase, "p50_ms"), 1)} / ${ms(s(LULL, phase, "p99_ms"))})${client}`,
        peers([PROMISES, JS, JS_PUSH, NOOP], (x) => num(x), phase, "per_sec"),
        `${times(vs(PROMISES, "per_sec"))} same-promises${perRound("per_sec")}; ${times(vs(JS, "per_sec"))} plain; ${times(vs(NOOP, "per_sec"))} no-op`,
      ),
    );
    edgeRows.push(
      row(
        `workerd CPU µs / event, ${label} (accepting and delivering)`,
        goal(`≤ ${times(GOALS.cpu_per_event_vs_promises)} the same-promises JS object`, atMost(vs(PROMISES, "cpu_us_per_event"), GOALS.cpu_per_event_vs_promises), `${label}: CPU per event vs the same-promises JS object`),
        num(s(LULL, phase, "cpu_us_per_event")),
        peers([PROMISES, JS, NOOP], (x) => num(x), phase, "cpu_us_per_event"),
        `${times(vs(PROMISES, "cpu_us_per_event"))} same-promises${perRound("cpu_us_per_event")}; ${times(vs(JS, "cpu_us_per_event"))} plain`,
      ),
    );
    edgeRows.push(
      row(
        `collections / 1,000 events, ${label} (V8's trace in workerd)`,
        NO_GOAL,
        gcFigure(s(LULL, phase) ?? {}),
        [PROMISES, JS].map((t) => `${PEER_NAMES[t]} ${gcFigure(s(t, phase) ?? {})}`).join("; "),
        `${times(vs(PROMISES, "gc_ms_per_1k"))} same-promises' pause time; ${times(vs(JS, "gc_ms_per_1k"))} plain's`,
      ),
    );
  }
  edgeRows.push(
    row(
      "rows written / event, accept / all-in (1 hot key and 1,000 keys)",
      NO_GOAL,
      `${num(s(LULL, "accept_rows_per_event"), 2)} / ${num(s(LULL, "rows_per_event"), 2)}`,
      [PROMISES, JS, JS_PUSH].map((t) => `${PEER_NAMES[t]} – / ${num(s(t, "rows_per_event"), 2)}`).join("; "),
      `${times(ratio(s(LULL, "rows_per_event"), s(PROMISES, "rows_per_event")))} same-promises (all-in); ${times(ratio(s(LULL, "rows_per_event"), s(JS, "rows_per_event")))} plain`,
    ),
  );
  for (const [label, field] of [
    ["alarms / event", "alarms_per_event"],
    ["object requests / event", "object_requests_per_event"],
  ]) {
    edgeRows.push(
      row(
        label,
        NO_GOAL,
        num(s(LULL, field), 2),
        peers([PROMISES, JS, JS_PUSH], (x) => num(x, 2), field),
        `${times(ratio(s(LULL, field), s(PROMISES, field)))} same-promises; ${times(ratio(s(LULL, field), s(JS, field)))} plain`,
      ),
    );
  }
  /** A target's events / rows / alarms per window delivered in the 1,000-key phase. */
  const perWindow = (t) =>
    ["spread_events_per_window", "spread_rows_per_window", "spread_alarms_per_window"].map((k) => num(s(t, k), 2)).join(" / ");
  edgeRows.push(
    row(
      "1,000 new keys, per window delivered: events / rows / alarms",
      NO_GOAL,
      perWindow(LULL),
      [PROMISES, JS, JS_PUSH].map((t) => `${PEER_NAMES[t]} ${perWindow(t)}`).join("; "),
      `${times(ratio(s(LULL, "spread_rows_per_window"), s(JS, "spread_rows_per_window")))} JS object (rows)`,
    ),
  );
  const lateP99 = s(LULL, "lateness", "p99_ms");
  edgeRows.push(
    row(
      `fire lateness p50 / p99 (${num(s(LULL, "lateness", "windows"))} windows, one event per key every ${num(cfg("PACE_MS"))} ms)`,
      goal(`p99 ≤ ${ms(GOALS.lateness_p99_ms, 0)}`, atMost(lateP99, GOALS.lateness_p99_ms), "fire lateness p99"),
      `${num(s(LULL, "lateness", "p50_ms"))} / ${ms(lateP99, 0)}; client token ${num(s(CLIENT, "lateness", "p50_ms"))} / ${ms(s(CLIENT, "lateness", "p99_ms"), 0)}`,
      [PROMISES, JS, JS_PUSH].map((t) => `${PEER_NAMES[t]} ${num(s(t, "lateness", "p50_ms"))} / ${ms(s(t, "lateness", "p99_ms"), 0)}`).join("; "),
      `${times(ratio(lateP99, s(JS, "lateness", "p99_ms")))} JS object (p99)`,
    ),
  );
  edgeRows.push(
    row(
      "fire lateness p99 under the load phases (saturated)",
      NO_GOAL,
      ms(s(LULL, "lateness_saturated", "p99_ms"), 0),
      peers([PROMISES, JS, JS_PUSH], (x) => ms(x, 0), "lateness_saturated", "p99_ms"),
      `${times(ratio(s(LULL, "lateness_saturated", "p99_ms"), s(JS, "lateness_saturated", "p99_ms")))} JS object`,
    ),
  );
  edgeRows.push(
    row(
      "cost / million events, single events",
      NO_GOAL,
      dollars(s(LULL, "cost_per_million")),
      peers([PROMISES, JS, JS_PUSH], dollars, "cost_per_million"),
      `${times(ratio(s(LULL, "cost_per_million"), s(PROMISES, "cost_per_million")))} same-promises; ${times(ratio(s(LULL, "cost_per_million"), s(JS, "cost_per_million")))} plain`,
    ),
  );
  edgeRows.push(
    row(
      "client token (an HS256 JWT verified per event) / ingest token, events/s",
      NO_GOAL,
      `1 hot key ${times(R.client_vs_ingest_hot ?? null)}; 1,000 keys ${times(R.client_vs_ingest_spread ?? null)}`,
      "",
      "",
    ),
  );

  // Batches of BATCH on one hot key (32 producers): the goals on rows, cost and rate.
  const HB = at("edge", E, "hot_batch") ?? {};
  const batch = HB.batch ?? cfg("BATCH");
  const noopHot = s(NOOP, "hot", "per_sec");
  const batchVsNoop = R.hot_batch_vs_noop_single ?? ratio(HB.per_sec ?? null, noopHot);
  edgeRows.push(group(`one hot key in events:batch of ${num(batch)}, ${num(cfg("CONCURRENCY"))} producers`));
  edgeRows.push(
    row(
      "events/s (request p50 / p99)",
      goal(`≥ ${times(GOALS.batch_vs_noop, 1)} the no-op object's single requests`, atLeast(batchVsNoop, GOALS.batch_vs_noop), "batches vs the no-op object"),
      `${num(at("edge", HB, "per_sec"))} (${num(at("edge", HB, "p50_ms"), 1)} / ${ms(at("edge", HB, "p99_ms"))})`,
      `no-op object, single requests, 1 hot key ${num(noopHot)}`,
      `${times(batchVsNoop)} no-op`,
    ),
  );
  const batchRows = at("edge", HB, "rows_per_event");
  edgeRows.push(
    row(
      "rows written / event (alarms / event; object requests / event)",
      goal(`≤ ${num(GOALS.batch_rows_per_event, 1)}`, atMost(batchRows, GOALS.batch_rows_per_event), "rows per event in batches"),
      `${num(batchRows, 3)} (${num(at("edge", HB, "alarms_per_event"), 4)}; ${num(at("edge", HB, "object_requests_per_event"), 3)})`,
      "",
      "",
    ),
  );
  const batchCost = at("edge", HB, "cost_per_million");
  edgeRows.push(
    row(
      "cost / million events",
      goal(`≤ ${dollars(GOALS.batch_cost_per_million)}`, atMost(batchCost, GOALS.batch_cost_per_million), "cost per million events in batches"),
      dollars(batchCost),
      `single events: ${PEER_NAMES[JS]} ${dollars(s(JS, "cost_per_million"))}`,
      `${times(ratio(batchCost, s(JS, "cost_per_million")), 3)} JS object's single events`,
    ),
  );

  // One hot key by producers (lull-edge), each load a row; the JS object's paced load is the paced rows' peer.
  const phases = at("edge", E, "hot_key_by_producers") ?? {};
  const noopByRound = (E.rounds?.[NOOP]?.hot ?? []).map((x) => x.per_sec);
  const PRICE = cfg("PRICE");
  const costOf = (phase, perEvent) => {
    if (!PRICE) return null;
    const workerRequests = phase.startsWith("batch") ? 1 / (batch ?? NaN) : 1;
    return (workerRequests + perEvent.objects) * PRICE.request + (perEvent.rows + perEvent.alarms) * PRICE.row;
  };
  const phaseFigures = (name) => {
    const runs = phases[name] ?? [];
    if (!runs.length) {
      missing.push(`edge.hot_key_by_producers.${name}`);
      return null;
    }
    const med = (k) => (runs.every((x) => typeof x[k] === "number") ? median(runs.map((x) => x[k])) : null);
    const events = runs.reduce((n, x) => n + x.events, 0);
    const per = (k) => runs.reduce((n, x) => n + x[k], 0) / events;
    const perEvent = { rows: per("sql"), alarms: per("alarms"), objects: per("objects") };
    // Achieved over the no-op object's single-request rate of the same round, the median of rounds.
    const vsNoop = noopByRound.length === runs.length ? median(runs.map((x, r) => x.per_sec / noopByRound[r])) : ratio(med("per_sec"), noopHot);
    return {
      per_sec: med("per_sec"), p50: med("p50_ms"), p99: med("p99_ms"), offered: med("offered_per_sec"), perEvent,
      cost: costOf(name, perEvent), lost: runs.some((x) => x.lost !== undefined) ? runs.reduce((n, x) => n + (x.lost ?? 0), 0) : null, vsNoop,
    };
  };
  const describe = (f) =>
    `${perSec(f.per_sec)}${f.offered !== null ? ` of ${num(f.offered)} offered` : ""}; p50 / p99 ${num(f.p50, 1)} / ${ms(f.p99)}; ` +
    `rows ${num(f.perEvent.rows, 3)}, object requests ${num(f.perEvent.objects, 3)} / event; ${dollars(f.cost)}/M; lost ${num(f.lost)}`;
  const jsPaced = Object.keys(phases).find((name) => name.endsWith(`, ${JS}`));
  const jsPacedFigures = jsPaced ? phaseFigures(jsPaced) : null;
  const promisesPaced = Object.keys(phases).find((name) => name.endsWith(`, ${PROMISES}`));
  const promisesPacedFigures = promisesPaced ? phaseFigures(promisesPaced) : null;
  const pacedP99 = R.hot_paced_p99_ms ?? {};
  const maxProducers = Math.max(...(C.PRODUCERS ?? Object.keys(phases).map((name) => Number(name.match(/ (\d+)(?:,|$)/)?.[1] ?? 0))));
  edgeRows.push(group(`one hot key by producers (lull-edge; single events coalesced by default, or coalesce: false; batches of ${num(batch)})`));
  for (const name of Object.keys(phases)) {
    if (name === jsPaced || name === promisesPaced) continue;
    const f = phaseFigures(name);
    if (!f) continue;
    const lostGoal = goal(`${num(GOALS.lost)} lost`, f.lost === null ? null : f.lost <= GOALS.lost, `${name}: lost events`);
    const gs = [lostGoal];
    let peer = "";
    let r = `${times(f.vsNoop)} no-op`;
    const producers = Number(name.match(/ (\d+)(?:,|$)/)?.[1]);
    if (name.startsWith("single")) {
      gs.unshift(goal(`rows ≤ ${num(GOALS.single_rows_per_event, 1)} / event`, atMost(f.perEvent.rows, GOALS.single_rows_per_event), `${name}: rows per event`));
    }
    if (name.startsWith("single ")) {
      const off = R[`hot_coalesced_vs_off_${producers}`];
      if (off !== undefined) r += `; ${times(off)} coalescing off`;
    }
    if (name.startsWith("batch") && name.includes("paced")) {
      const key = name.includes(", ") && name.split(/ \d+, /)[1] ? name.split(/ \d+, /)[1] : LULL;
      const p99 = pacedP99[key] ?? f.p99;
      gs.unshift(goal(`≥ ${times(GOALS.batch_vs_noop, 1)} no-op`, atLeast(key === LULL ? (R.hot_paced_vs_noop_single ?? f.vsNoop) : f.vsNoop, GOALS.batch_vs_noop), `${name}: rate vs the no-op object`));
      gs.unshift(goal(`accept p99 ≤ ${ms(GOALS.paced_p99_ms, 0)}`, atMost(p99, GOALS.paced_p99_ms), `${name}: accept p99`));
      if (key === LULL && R.hot_paced_vs_noop_single !== undefined) r = `${times(R.hot_paced_vs_noop_single)} no-op`;
      if (key === LULL && promisesPacedFigures) {
        const rounds = R.hot_paced_p99_rounds_at_most_promises;
        gs.unshift(goal(`p99 ≤ the same-promises JS object's in ≥ ${GOALS.paced_p99_rounds_vs_promises} of ${num(cfg("ROUNDS"))} rounds`, atLeast(rounds ?? null, GOALS.paced_p99_rounds_vs_promises), `${name}: accept p99 vs the same-promises JS object, rounds`));
        r += `; p99 at most the same-promises object's in ${num(rounds)} of ${num(cfg("ROUNDS"))} rounds`;
        const full = R.hot_paced_gc?.[LULL]?.gc_full_per_1k ?? null;
        const peerFull = R.hot_paced_gc?.[PROMISES]?.gc_full_per_1k ?? null;
        gs.unshift(
          goal(
            `full collections / 1,000 events ≤ ${times(GOALS.paced_full_gc_vs_promises)} the same-promises JS object's`,
            full === null || peerFull === null ? null : full <= GOALS.paced_full_gc_vs_promises * peerFull,
            `${name}: full collections vs the same-promises JS object`,
          ),
        );
      }
      const paced = [[PROMISES, promisesPacedFigures, "windows of 100, one object request and one row per key of a batch"], [JS, jsPacedFigures, "windows uncapped, one object request and one row per key of a batch"]];
      const collected = (who) => (R.hot_paced_gc?.[who] ? `; collections / 1,000 events ${gcFigure(R.hot_paced_gc[who])}` : "");
      peer = paced
        .filter(([, f]) => f)
        .map(([who, f, how]) => `${PEER_NAMES[who]} (${how}) ${perSec(f.per_sec)}; p99 ${ms(pacedP99[who] ?? f.p99)}${collected(who)}`)
        .join("; ");
      if (key === LULL) r += collected(LULL);
      r += paced.filter(([, f]) => f).map(([who, f]) => `; p99 ${times(ratio(p99, pacedP99[who] ?? f.p99))} ${PEER_NAMES[who]}`).join("");
    } else if (name === `batch ${maxProducers}`) {
      r += " (closed loop)";
    }
    edgeRows.push(row(name, goals(...gs), describe(f), peer, r));
  }

  // Backlog: one key whose target is down.
  const B = at("edge", E, "backlog") ?? {};
  const b = (t, ...keys) => at("edge", B, t, ...keys);
  const backlogFigure = (t) =>
    `${num(b(t, "empty", "per_sec"))} / ${num(b(t, "held", "per_sec"))} ev/s (p99 ${num(b(t, "empty", "p99_ms"), 1)} / ${ms(b(t, "held", "p99_ms"))}); ${num(b(t, "rows_per_event"), 2)} rows / event`;
  edgeRows.push(group(`backlog: one key, its target down, ${num(cfg("BACKLOG_MEASURED"))} events with 0 and with ${num(cfg("BACKLOG"))} windows held`));
  edgeRows.push(
    row(
      "events/s with 0 / with the backlog held (accept p99); rows / event",
      NO_GOAL,
      backlogFigure(LULL),
      `JS object (undelivered event rows) ${backlogFigure(JS)}`,
      `held / 0: ${times(R.backlog_held_vs_empty ?? null)} events/s, ${times(R.backlog_p99_held_vs_empty ?? null)} p99; ${times(R.backlog_held_vs_js ?? null)} JS object held`,
    ),
  );

  // Load levelling and the gate (bench-queues.mjs).
  const shapes = Q.results ?? {};
  const webhookLast = shapes.webhook?.last_delivered_ms ?? null;
  edgeRows.push(
    group(
      `load levelling: ${num(at("queues", Q, "events"))} events over ${num(at("queues", Q, "keys"))} keys, every window fired at once; receiver ${ms(at("queues", Q, "receiver_ms"), 0)} a call`,
    ),
  );
  if (!Object.keys(shapes).length) edgeRows.push(row("(not run: LULL_BENCH_ONLY=gate)", NO_GOAL, "–", "", ""));
  for (const [name, r] of Object.entries(shapes)) {
    const gs = [];
    if (r.gate_requests_per_forward !== undefined) {
      gs.push(goal(`≤ ${num(GOALS.gate_requests_per_forward)} gate requests / forward`, atMost(r.gate_requests_per_forward, GOALS.gate_requests_per_forward), `${name}: gate requests per forward`));
    }
    if (r.topic_requests_per_delivery !== undefined) {
      gs.push(goal(`≤ ${num(GOALS.topic_requests_per_delivery, 2)} topic object requests / delivery`, atMost(r.topic_requests_per_delivery, GOALS.topic_requests_per_delivery), `${name}: topic object requests per delivery`));
    }
    edgeRows.push(
      row(
        name,
        gs.length ? goals(...gs) : NO_GOAL,
        `${num(at("queues", r, "calls"))} calls (${num(at("queues", r, "events"))} events received), peak ${num(at("queues", r, "peak_concurrency"))} in flight, last window ${seconds(at("queues", r, "last_delivered_ms"))} after the flushes` +
          (r.gate_requests_per_forward !== undefined ? `; ${num(r.gate_requests_per_forward, 2)} gate requests / forward` : "") +
          (r.topic_requests_per_delivery !== undefined
            ? `; the healthy path: ${num(r.topic_requests_per_delivery, 3)} topic object requests / delivery (${JSON.stringify(r.topic_requests_by_op)})`
            : ""),
        "",
        name === "webhook" ? "" : `${times(ratio(r.last_delivered_ms ?? null, webhookLast), 1)} the webhook's time`,
      ),
    );
  }
  const T = Q.throttle ?? {};
  const [TL, TB, TJ] = ["lull-edge", "lull-edge before", "plain JS DO"].map((who) => T.results?.[who]);
  if (TL && TB && TJ) {
    const [rb, rj] = [ratio(TL.requests_while_throttled, TB.requests_while_throttled), ratio(TL.requests_while_throttled, TJ.requests_while_throttled)];
    const seen = (r) => `${num(r.requests_while_throttled)} requests while throttled (${num(r.requests_after_the_first_half_second)} after its first half second), ${num(r.requests)} in all, every window by ${seconds(r.all_delivered_ms)}`;
    edgeRows.push(
      row(
        `a throttling receiver: ${num(T.keys)} keys' windows at once, 429 Retry-After: 2 for its first ${seconds(T.throttle_ms)}`,
        goals(
          goal(`≤ ${num(GOALS.throttled_requests_ratio, 2)}× the previous release's requests while throttled`, atMost(rb, GOALS.throttled_requests_ratio), "requests while throttled, against the previous release"),
          goal(`≤ ${num(GOALS.throttled_requests_ratio, 2)}× the plain JS object's`, atMost(rj, GOALS.throttled_requests_ratio), "requests while throttled, against the plain JS object"),
        ),
        `lull-edge: ${seen(TL)}, largest Lull-Attempt ${num(TL.max_attempt)}; the previous release (${String(T.baseline_rev ?? "?").slice(0, 7)}: each key on its own backoff, deaf to Retry-After): ${seen(TB)}, largest Lull-Attempt ${num(TB.max_attempt)}; the plain JS object (retries each key every second, ignoring Retry-After): ${seen(TJ)}`,
        "",
        `${times(rb, 2)} the previous release's, ${times(rj, 2)} the JS object's`,
      ),
    );
  }
  const G = at("queues", Q, "waiting") ?? {};
  edgeRows.push(
    row(
      `the gate's waiting protocol: ${num(at("queues", G, "messages"))} messages waiting, forward_concurrency 1`,
      goal(`≤ ${num(GOALS.gate_requests_per_forward)} gate requests / forward`, atMost(at("queues", G, "gate_requests_per_forward"), GOALS.gate_requests_per_forward), "the gate's waiting protocol"),
      `${num(G.gate_requests_per_forward ?? null, 2)} gate requests / forward (${num(at("queues", G, "gate_requests"))} for ${num(at("queues", G, "calls"))} forwards; ${num(at("queues", G, "requeued"))} requeued); last delivered ${seconds(at("queues", G, "last_delivered_ms"))} after the flushes`,
      "",
      "",
    ),
  );
}
const edgeMethod = (() => {
  const waits = (E.calm_waits_ms ?? []).map((x) => x / 1000);
  const rounds = cfg("ROUNDS");
  const few = rounds !== null && rounds < 4 ? ` **${num(rounds)} round${rounds === 1 ? "" : "s"} only (LULL_BENCH_ROUNDS): a quick look, not figures to quote.**` : "";
  const price = cfg("PRICE") ? ` Cost at Cloudflare's published prices: $${num(C.PRICE.request, 2)} per million requests (the Worker's, and the object's: requests and alarms served), $${num(C.PRICE.row, 2)} per million rows written and setAlarm calls.` : "";
  const paced =
    cfg("PACED_VS_NOOP") !== null
      ? ` The paced rows: ${num(Math.max(...(C.PRODUCERS ?? [])))} producers each sending a batch of ${num(C.BATCH)} on a schedule of its own, together offering ${num(C.PACED_VS_NOOP, 1)}× the round's no-op rate for ${num(C.PACED_MS / 1000)} s after ${num(C.PACED_WARMUP_MS / 1000)} s of warm-up (not counted); latency from each batch's scheduled time.`
      : "";
  return (
    `**Method.** One local workerd (${edgeRun.machine?.workerd ? `workerd ${edgeRun.machine.workerd}, Miniflare ${edgeRun.machine.miniflare}` : "Miniflare"}) on this machine; lull-edge, the same-promises JavaScript Durable Object ` +
    `(tests/edge/fixtures/js-promises.mjs: what a team would write to keep lull-edge's promises: RPC, an alarm per window, windows of 100, a delivery's begun and outcome records, a signed fetch with a timeout and no redirects, retries, dead letters, an idle key's collection; the reference of the goals), ` +
    `the plain one (a row per event, the alarm set only when none is; and a variant pushing the alarm per event: the floor) and a no-op object (the ceiling), each role a worker (an isolate) of its own. ` +
    `${num(cfg("CONCURRENCY"))} keep-alive clients, ${num(rounds)} interleaved round${rounds === 1 ? "" : "s"}, each figure the median of rounds (rows, alarms and requests per event: totals over them); ` +
    `lull-edge and the same-promises object take turns to go first, and each turn starts once workerd has used under ${num(cfg("CALM_TICKS"))} clock ticks a second for ${num(cfg("CALM_SECONDS"))} s (at most ${num(cfg("CALM_MAX_MS") === null ? null : C.CALM_MAX_MS / 1000)} s; this run waited ${waits.length ? `${num(Math.min(...waits))}–${num(Math.max(...waits))} s` : NA}). ` +
    `Topics wait ${num(cfg("WAIT"))} ms, max_wait ${num(cfg("MAX_WAIT"))} ms, payload all. Loads: ${num(cfg("HOT_EVENTS"))} events on 1 hot key; ${num(cfg("SPREAD_EVENTS"))} on ${num(cfg("KEYS"))} new keys, then the same again once their windows were delivered; CPU per event is workerd's (user and system, from /proc), from a load's start until its windows were delivered, and so are its collections (V8's \`--trace-gc\` lines, each isolate's heap bounded at ${num(C.TRACED_HEAP_MB ?? null)} MB as production's are; young: scavenges, full: mark-compacts); ` +
    `fire lateness from one event per key every ${num(cfg("PACE_MS"))} ms (${num(cfg("PACED_KEYS"))} keys a round); the hot key at ${(cfg("PRODUCERS") ?? []).map((x) => num(x)).join(" and ") || NA} producers, batches of ${num(C.BATCH ?? E.hot_batch?.batch ?? null)} (${num(C.HOT_BATCH_EVENTS ?? E.hot_batch?.events_per_round ?? null)} events a round).` +
    paced +
    price +
    ` Load levelling: ${num(Q.senders ?? null)} senders, each key's window flushed at once, by webhook and through the queue at forward_concurrency 1 and 4; gate requests as the topic's gate object counted what it served.` +
    few
  );
})();

// ---- lull pull's budget (crates/lull-core/examples/budget_bench.rs, virtual time) ----

const B = budget.json;
const budgetRows = (() => {
  const rows = [];
  const streams = [...new Set((B.rows ?? []).map((r) => r.stream))];
  for (const stream of streams) {
    const [seed, lull] = ["seed", "lull"].map((rule) => (B.rows ?? []).find((r) => r.stream === stream && r.margin.startsWith(rule)) ?? null);
    const constant = stream.startsWith("constant");
    rows.push(group(stream));
    const figure = (r) =>
      r === null
        ? NA
        : `share ${num(at("budget", r, "share"), 3)} (lowest run ${num(at("budget", r, "lowest_share"), 3)}); ${num(at("budget", r, "overruns"))} of ${num(at("budget", r, "runs"))} runs past the minute (longest ${seconds(at("budget", r, "longest_run_ms"))}); ${num(at("budget", r, "windows_per_run"), 1)} windows a run; ${num(at("budget", r, "cut"))} stopped at the handler timeout`;
    for (const r of [seed, lull]) {
      if (r === null) continue;
      const isLull = r === lull;
      const g = isLull
        ? goals(
            goal("0 runs past the minute", atMost(at("budget", r, "overruns"), 0), `lull pull: runs past the minute (${stream})`),
            ...(constant ? [goal("share ≥ 0.92", atLeast(at("budget", r, "share"), 0.92), "lull pull: share of the minute (constant stream)")] : []),
          )
        : NO_GOAL;
      rows.push(row(r.margin, g, figure(r), isLull && seed ? `seed's rule: ${figure(seed)}` : "", isLull && seed ? `share ${times(ratio(r.share, seed.share))}` : ""));
    }
  }
  return rows;
})();
const budgetMethod =
  `**Method.** Virtual time (the algorithm is judged, not a machine): ${num(B.runs ?? null)} one-minute runs (eight days, each stream seeded per day), each run's budget the minute, a pull ${ms(B.pull_ms ?? null, 0)}, a backlog always waiting; ` +
  `tolerance ${num(B.tolerance ?? null)}, estimate 2 s; lull keeps its durations across runs (as \`lull pull\` does in its state file), the seed's rule measures each run afresh and has no handler timeout (a window stopped at lull's is retried, not lost). ` +
  `Share: the time spent in handlers over the minute. A run past the minute is one whose last message ended after the next start.`;

// ---- the document ----

const findings = readFileSync(join(new URL(".", import.meta.url).pathname, "bench-findings.md"), "utf8").trimEnd();
const met = judged.filter((g) => g.ok === true).length;
const missed = judged.filter((g) => g.ok === false);
const unjudged = judged.filter((g) => g.ok === null);
const summary =
  `Goals: ${met} of ${judged.length} met` +
  (missed.length ? `; missed: ${missed.map((g) => g.what).join(", ")}` : "") +
  (unjudged.length ? `; not judged (no figure): ${unjudged.map((g) => g.what).join(", ")}` : "") +
  ".";
const HEAD = ["", "goal", "figure", "peers", "ratio", "met"];
const doc = [
  ...header,
  "",
  summary,
  "",
  "## lull-web",
  "",
  table(HEAD, webRows),
  "",
  webMethod,
  "",
  "## lull-edge",
  "",
  table(HEAD, edgeRows),
  "",
  edgeMethod,
  "",
  "## lull pull (the budget of a scheduled consumer)",
  "",
  table(HEAD, budgetRows),
  "",
  budgetMethod,
  "",
  findings,
  "",
].join("\n");
if (/\bundefined\b|\bNaN\b/.test(doc)) {
  console.error("bench-report: the document has an undefined or NaN figure: a key the JSON does not have?");
  process.exit(1);
}
writeFileSync(outPath, doc);
if (missing.length) console.error(`bench-report: not in the JSON (shown as ${NA}): ${[...new Set(missing)].join(", ")}`);
console.log(`wrote ${relative(process.cwd(), outPath) || outPath}`);
