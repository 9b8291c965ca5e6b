//! The edge worker: its offline build (worker-build), `cargo xtask dev`
//! (wrangler dev on workerd), its end-to-end tests and its benchmark.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd::{cargo, run};
use crate::setup::Tools;

/// Where `cargo xtask dev` serves the worker.
pub const DEV_ADDRESS: &str = "127.0.0.1:8787";

/// Keep wrangler from calling out (metrics, `cf` fetch, update banner) and its
/// logs and config in the tree.
fn offline(cmd: &mut Command, root: &Path) {
    cmd.env("WRANGLER_SEND_METRICS", "false")
        .env("CLOUDFLARE_CF_FETCH_ENABLED", "false")
        .env("WRANGLER_HIDE_BANNER", "true")
        .env("XDG_CONFIG_HOME", root.join("target/wrangler-config"));
}

/// The first `name` on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}

/// Which worker `worker-build` makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Worker {
    /// Without the demo's endpoints (the sink, `/demo/…`, the places index):
    /// what a plain `wrangler deploy` ships (`cargo xtask edge-build`).
    Production,
    /// With them (lull-edge's cargo feature `demo`): `cargo xtask dev`, the
    /// tests and the bench (`cargo xtask edge-build --demo`).
    Demo,
}

/// Where the worker goes (`main` in `wrangler.toml` points into it).
pub const BUILD: &str = "crates/lull-edge/build";

/// Where the edge suite builds the production worker, beside the demo one in
/// [`BUILD`] (`tests/edge/production.test.mjs` compares the two).
pub const PRODUCTION_BUILD: &str = "target/edge-production";

/// `worker-build --release` in `crates/lull-edge`, into `out` (relative to
/// `root`), with the cargo-installed wasm-bindgen, npm's wasm-opt and esbuild
/// (it would otherwise download them). worker-build takes `--out-dir` itself
/// and hands the arguments it does not know (`--features demo`, last) to
/// `cargo build`.
pub fn build(root: &Path, worker: Worker, out: &str) -> Result<(), String> {
    build_tree(root, root, worker, &root.join(out), None)
}

/// [`build`] of the tree at `src` (its `crates/lull-edge` and entry module)
/// into `out`, with the tools of the tree at `root`, compiling into
/// `target_dir` when given (else cargo's own choice).
fn build_tree(root: &Path, src: &Path, worker: Worker, out: &Path, target_dir: Option<&Path>) -> Result<(), String> {
    let wasm_bindgen = on_path("wasm-bindgen").ok_or("wasm-bindgen is not on PATH: run `cargo xtask setup`")?;
    let mut cmd = Command::new("worker-build");
    cmd.arg("--release").arg("--out-dir").arg(out);
    if worker == Worker::Demo {
        cmd.args(["--features", "demo"]);
    }
    cmd.env("WASM_BINDGEN_BIN", wasm_bindgen)
        .env("WASM_OPT_BIN", root.join("tests/web/node_modules/.bin/wasm-opt"))
        .env("ESBUILD_BIN", root.join("tests/edge/node_modules/@esbuild/linux-x64/bin/esbuild"));
    if let Some(dir) = target_dir {
        cmd.env("CARGO_TARGET_DIR", dir);
    }
    let name = match worker {
        Worker::Production => "worker-build (lull-edge, production)",
        Worker::Demo => "worker-build (lull-edge, with the demo)",
    };
    run(name, &src.join("crates/lull-edge"), &mut cmd)?;
    let entry = out.join(ENTRY_IN_BUILD);
    std::fs::copy(src.join(ENTRY), &entry).map_err(|e| format!("{}: {e}", entry.display()))?;
    Ok(())
}

/// The release of lull-edge before it kept to its receivers' answers (it
/// retried each key on its own backoff, deaf to `Retry-After`): the bench's
/// throttling receiver measures it beside this tree, in the same run.
pub const BASELINE_REV: &str = "e9378733c9b02c62b742e04c78ae4d8e68436905";

/// Where the bench keeps [`BASELINE_REV`]: its source (`src`), its own cargo
/// target (`target`) and its worker with the demo (`build`, with a `REV` file
/// naming what it holds, so a second bench reuses it).
const BASELINE_DIR: &str = "target/bench-baseline";

/// The variable naming [`BASELINE_REV`]'s worker-build output to `tests/edge/bench-queues.mjs`.
const BASELINE_BUILD_VAR: &str = "LULL_BASELINE_BUILD";

/// The variable naming [`BASELINE_REV`] to the bench (written into its JSON).
const BASELINE_REV_VAR: &str = "LULL_BASELINE_REV";

/// [`BASELINE_REV`]'s worker with the demo, built once from `git archive` of
/// this clone's history; its build directory.
fn baseline(root: &Path) -> Result<PathBuf, String> {
    let dir = root.join(BASELINE_DIR);
    let (src, out) = (dir.join("src"), dir.join("build"));
    let stamp = out.join("REV");
    if std::fs::read_to_string(&stamp).is_ok_and(|rev| rev.trim() == BASELINE_REV) {
        println!("==> the bench's baseline worker ({BASELINE_REV}): built already");
        return Ok(out);
    }
    let tar = dir.join("src.tar");
    for path in [&src, &out] {
        if path.exists() {
            std::fs::remove_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    std::fs::create_dir_all(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    let mut archive = Command::new("git");
    archive.arg("archive").arg("--format=tar").arg("-o").arg(&tar).arg(BASELINE_REV);
    run("the bench's baseline (git archive; a shallow clone needs `git fetch --unshallow`)", root, &mut archive)?;
    run("the bench's baseline (tar)", root, Command::new("tar").arg("-xf").arg(&tar).arg("-C").arg(&src))?;
    build_tree(root, &src, Worker::Demo, &out, Some(&dir.join("target")))?;
    std::fs::write(&stamp, BASELINE_REV).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(out)
}

/// lull-edge's entry module: worker-build's exports, each object's class declared a `DurableObject` (RPC).
const ENTRY: &str = "crates/lull-edge/js/entry.mjs";

/// Where a build's entry module goes, beside worker-build's `index.js` (`main` in `wrangler.toml` names it).
const ENTRY_IN_BUILD: &str = "entry.mjs";

/// Node 22 running `args` as step `name`, with wrangler kept offline.
fn node22(root: &Path, tools: &Tools, name: &str, args: &[&OsStr]) -> Result<(), String> {
    node22_with(root, tools, name, args, &[])
}

/// [`node22`] with more environment variables.
fn node22_with(root: &Path, tools: &Tools, name: &str, args: &[&OsStr], env: &[(&str, &str)]) -> Result<(), String> {
    let mut cmd = offline_node22(root, tools, env);
    run(name, root, cmd.args(args))
}

/// Node 22 with `env` and wrangler kept offline.
fn offline_node22(root: &Path, tools: &Tools, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(&tools.node22);
    cmd.envs(env.iter().copied());
    offline(&mut cmd, root);
    cmd
}

/// The ages a fixture test runs at besides `committed` (its stored times as
/// they are, in the run of every test): `tests/edge/fixture.mjs` moves every
/// stored time so the fixture was made a minute ago, or 30 days before it was.
const FIXTURE_AGES: [&str; 2] = ["fresh", "aged"];

/// The edge tests that load stored state an earlier release made (they call
/// `copyFixture`), as paths relative to `root`.
fn fixture_tests(root: &Path) -> Result<Vec<String>, String> {
    let dir = root.join("tests/edge");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        let name = path.file_name().and_then(OsStr::to_str).unwrap_or_default().to_owned();
        if name.ends_with(".test.mjs") {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if text.contains("copyFixture(") {
                files.push(format!("tests/edge/{name}"));
            }
        }
    }
    files.sort();
    if files.is_empty() {
        return Err("no edge test loads a stored fixture (copyFixture): the fixture ages check nothing".into());
    }
    Ok(files)
}

/// End-to-end tests (`files`, a glob), one file at a time, after the worker
/// (with the demo: the tests use its sink) and the demo page (from `package`,
/// the built lull-web) are built, with `env` set:
/// `tests/edge` on a local workerd, `tests/browser` on wrangler dev in Chromium.
pub fn tests(
    root: &Path,
    tools: &Tools,
    package: &Path,
    files: &str,
    name: &str,
    env: &[(&str, &str)],
) -> Result<(), String> {
    crate::www::build(root, tools, package)?;
    build(root, Worker::Demo, BUILD)?;
    crate::node_tests::run_tests(name, root, root, offline_node22(root, tools, env), &[files])
}

/// The variable naming the `lull` binary to `tests/edge/cli.test.mjs`.
pub const LULL_BIN: &str = "LULL_BIN";

/// `cargo build -p lull-cli`; the path of its `lull` binary (in
/// `CARGO_TARGET_DIR`, else the workspace's `target`).
pub fn lull_cli(root: &Path) -> Result<PathBuf, String> {
    run("build (lull-cli, the lull command)", root, &mut cargo(&["build", "-p", "lull-cli"]))?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |dir| root.join(dir));
    Ok(target.join("debug").join("lull"))
}

/// The tests that load stored fixtures again at each of [`FIXTURE_AGES`]
/// (after [`tests`] ran them as committed), so none depends on the day it runs.
pub fn fixture_tests_at_every_age(root: &Path, tools: &Tools) -> Result<(), String> {
    let files = fixture_tests(root)?;
    for age in FIXTURE_AGES {
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        let name = format!("edge fixture tests, their stored times {age} (LULL_FIXTURE_AGE={age})");
        let node = offline_node22(root, tools, &[("LULL_FIXTURE_AGE", age)]);
        crate::node_tests::run_tests(&name, root, root, node, &files)?;
    }
    Ok(())
}

/// The edge benchmarks: lull-edge vs a plain JavaScript Durable Object vs a
/// no-op one, and load levelling (webhook vs queue; a throttling receiver,
/// with [`BASELINE_REV`] beside this tree).
pub fn bench(root: &Path, tools: &Tools) -> Result<(), String> {
    build(root, Worker::Demo, BUILD)?;
    let baseline = baseline(root)?;
    let baseline = baseline.to_str().ok_or("the baseline's build directory is not UTF-8")?;
    for (script, out, name) in [
        ("tests/edge/bench.mjs", "target/bench/edge.json", "bench (lull-edge vs JS Durable Object vs no-op)"),
        (
            "tests/edge/bench-queues.mjs",
            "target/bench/queues.json",
            "bench (load levelling: webhook vs queue, forward_concurrency 1 and 4)",
        ),
    ] {
        let out = root.join(out);
        let args = [OsStr::new(script), out.as_os_str()];
        node22_with(root, tools, name, &args, &[(BASELINE_BUILD_VAR, baseline), (BASELINE_REV_VAR, BASELINE_REV)])?;
    }
    Ok(())
}

/// The `wrangler.toml` environment `cargo xtask dev` serves: the worker with
/// the demo, its page and its `demo` topic (the top level is the production
/// worker, what a plain `wrangler deploy` ships).
pub const DEV_ENV: &str = "dev";

/// `wrangler dev --env dev` ([`DEV_ENV`]) on 127.0.0.1:8787 with state persisted under
/// `.wrangler/state`; wrangler runs `cargo xtask edge-build --demo` (wrangler.toml) before it serves.
pub fn dev(root: &Path, tools: &Tools) -> Result<(), String> {
    let vars = root.join(".dev.vars");
    if !vars.exists() {
        std::fs::copy(root.join(".dev.vars.example"), &vars).map_err(|e| format!(".dev.vars: {e}"))?;
        println!("dev: wrote .dev.vars from .dev.vars.example (local secrets)");
    }
    println!(
        "dev: lull-edge on http://{DEV_ADDRESS} (Ctrl-C stops it). Try:\n\n  \
         curl -i -X POST http://{DEV_ADDRESS}/v1/topics/demo/keys/doc-1/events \\\n    \
         -H 'authorization: Bearer dev-ingest-token' -H 'content-type: application/json' -d '{{\"edit\": 1}}'\n  \
         sleep 3; curl -s http://{DEV_ADDRESS}/sink -H 'authorization: Bearer dev-admin-token-local'\n"
    );
    let (ip, port) = DEV_ADDRESS.split_once(':').unwrap_or(("127.0.0.1", "8787"));
    let wrangler = root.join("tests/edge/node_modules/wrangler/bin/wrangler.js");
    let args = ["dev", "--env", DEV_ENV, "--local", "--ip", ip, "--port", port, "--persist-to", ".wrangler/state"];
    let flags = args.iter().chain(&["--show-interactive-dev-session=false"]).map(OsStr::new);
    node22(root, tools, "wrangler dev", &std::iter::once(wrangler.as_os_str()).chain(flags).collect::<Vec<_>>())
}
