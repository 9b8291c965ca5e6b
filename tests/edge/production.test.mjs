// The production worker (`cargo xtask edge-build`: lull-edge without its cargo
// feature `demo`) holds none of the demo: not its code (the places index, the
// data set's credit) and not its routes, even with LULL_DEMO_SINK on, so only
// the feature can be what removes them. The demo build (`--demo`, what the
// other tests run) holds both. wrangler.toml builds each where it belongs: its
// top level (a plain `wrangler deploy`) the production worker, its env.dev
// (`cargo xtask dev`) the demo.
// The edge suite builds the production worker into target/edge-production
// before the demo build in crates/lull-edge/build.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { unstable_readConfig } from "wrangler";
import { TOKENS, client, startEdge, stateDir } from "./harness.mjs";

const root = resolve(import.meta.dirname, "../..");
const BUILDS = { production: join(root, "target/edge-production"), demo: join(root, "crates/lull-edge/build") };
// Byte strings only the demo's code holds: the places' credit and the places parser's error.
const MARKERS = ["GeoNames", "places data"];
// What only the demo serves: its search, its data set, its sink, the sink's switches and the page's target view.
const DEMO_REQUESTS = [
  ["GET", "/demo/search?q=a"],
  ["GET", "/demo/places"],
  ["GET", "/sink"],
  ["POST", "/sink", { topic: "t", key: "k", window: 1, events: [] }],
  ["PUT", "/sink/failing/k"],
  ["PUT", "/sink/answer/gone"],
  ["GET", "/demo/target"],
];
// The window stays open (60 s) past the test: nothing is delivered, the target is never called.
const topics = { t: { target: "http://127.0.0.1:9/never", wait_ms: 60_000, payload: "all" } };

const wasm = (build) => {
  const file = join(BUILDS[build], "index_bg.wasm");
  assert.ok(existsSync(file), `${file} is missing: \`cargo xtask test edge\` builds both workers`);
  return readFileSync(file);
};

let state;
before(() => (state = stateDir()));
after(() => state?.cleanup());

/** wrangler.toml as wrangler reads it for `env` (undefined: the top level, what `wrangler deploy` ships). */
const config = (env) => unstable_readConfig({ config: join(root, "wrangler.toml"), env }, { hideWarnings: true });
/** A configuration's topics (LULL_TOPICS: JSON text or a table). */
const topicsOf = (vars) => (typeof vars.LULL_TOPICS === "string" ? JSON.parse(vars.LULL_TOPICS) : vars.LULL_TOPICS);

test("wrangler.toml: a plain `wrangler deploy` ships the production worker; `cargo xtask dev`'s env.dev the demo", () => {
  const production = config(undefined);
  assert.equal(production.build.command, "cargo xtask edge-build", "the top level builds without the demo");
  assert.equal(production.vars.LULL_DEMO_SINK, undefined, "no demo sink at the top level");
  const topics = topicsOf(production.vars);
  assert.ok(Object.keys(topics).length > 0 && !("demo" in topics), `the top level's topics: ${Object.keys(topics)}`);
  for (const [name, topic] of Object.entries(topics)) {
    assert.ok(!topic.allow_http && topic.target.startsWith("https://"), `topic ${name} delivers over https`);
  }
  assert.notEqual(production.assets?.directory, "target/www", "the demo page is not deployed");
  const dev = config("dev");
  assert.equal(dev.build.command, "cargo xtask edge-build --demo");
  assert.equal(dev.vars.LULL_DEMO_SINK, "on");
  assert.ok("demo" in topicsOf(dev.vars), "env.dev has the demo topic");
  assert.deepEqual([dev.assets?.directory, dev.assets?.binding], ["target/www", "ASSETS"], "env.dev serves the demo page");
  // Bindings are not inherited by an environment: env.dev declares the top level's again, the same.
  for (const field of ["durable_objects", "queues"]) {
    assert.deepEqual(dev[field], production[field], `env.dev's ${field} are the top level's`);
  }
  assert.equal(dev.vars.LULL_DEAD_LETTER_QUEUE, production.vars.LULL_DEAD_LETTER_QUEUE);
  // Both run the entry module that makes the objects DurableObjects (the router calls them over RPC).
  for (const env of [undefined, "dev"]) {
    assert.equal(config(env).main, join(root, "crates/lull-edge/build/entry.mjs"), `main (${env ?? "top level"})`);
    const watched = [config(env).build.watch_dir].flat().map((dir) => resolve(dir)); // relative to the working directory
    assert.ok(watched.includes(join(root, "crates/lull-edge/js")), `the entry is watched (${env ?? "top level"}): ${watched}`);
  }
});

test("both builds hold the entry module as crates/lull-edge/js/entry.mjs writes it", () => {
  const source = readFileSync(join(root, "crates/lull-edge/js/entry.mjs"), "utf8");
  for (const build of ["production", "demo"]) {
    assert.equal(readFileSync(join(BUILDS[build], "entry.mjs"), "utf8"), source, `${build}: entry.mjs`);
  }
});

test("the production wasm holds none of the demo's code; the demo build holds it", () => {
  const [production, demo] = [wasm("production"), wasm("demo")];
  for (const marker of MARKERS) {
    assert.ok(demo.includes(marker), `the demo build holds ${JSON.stringify(marker)}`);
  }
  for (const marker of MARKERS) {
    assert.ok(!production.includes(marker), `the production build must not hold ${JSON.stringify(marker)}`);
  }
});

test("the production worker answers the demo's routes 404 not_found, even with LULL_DEMO_SINK on; the API works", async () => {
  const seen = {};
  for (const build of ["demo", "production"]) {
    const edge = await startEdge({ topics, persist: join(state.dir, build), build: BUILDS[build] });
    try {
      const admin = client(edge.url);
      seen[build] = [];
      for (const [method, path, body] of DEMO_REQUESTS) {
        const res = await admin.call(method, path, body);
        seen[build].push({ route: `${method} ${path}`, status: res.status, code: res.json?.error?.code });
      }
      assert.equal((await fetch(`${edge.url}/healthz`)).status, 200, `${build}: GET /healthz`);
      const accepted = await client(edge.url, TOKENS.ingest).event("t", "k", { n: 1 });
      assert.equal(accepted.status, 202, `${build}: an event is accepted: ${JSON.stringify(accepted.json)}`);
    } finally {
      await edge.stop();
    }
  }
  // The demo build serves them (so the routes and the harness are right), whatever each answers.
  for (const answer of seen.demo) {
    assert.notEqual(answer.code, "not_found", `the demo build serves ${answer.route}: ${JSON.stringify(answer)}`);
  }
  assert.deepEqual(
    seen.production,
    seen.demo.map(({ route }) => ({ route, status: 404, code: "not_found" })),
    "the production build has none of the demo's routes",
  );
});
