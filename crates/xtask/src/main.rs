//! `cargo xtask setup|dev|test|bench|check-config`: the project's only entry points.
//!
//! `setup` installs what the project needs and skips what is present;
//! `test` sets up, then runs every suite and ends with a summary line;
//! `test SUITE --repeat N` hunts flakes in one suite.

mod check_config;
mod cmd;
mod edge;
mod node_tests;
mod package;
mod repeat;
mod setup;
mod suites;
mod www;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>

  setup   install what the project needs (skips what is present)
  package build the npm package lull-web into target/npm
  test [SUITE] [--repeat N]
          set up, then run every suite (format, lints, wasm32 build, tests), or only
          SUITE; with --repeat, run SUITE N times and report which runs and tests failed
  dev     set up, then serve the edge worker with the demo and its page on http://127.0.0.1:8787
          (wrangler dev --env dev, workerd)
  www     assemble the demo page (www/, the package, the data set) into target/www
  bench   run the benchmarks, print a table, write JSON under target/bench and
          BENCH.md (from that JSON: the one current benchmark document)
  check-config [--env NAME] [--secrets-file FILE] [--config FILE]
          name every problem a deploy of wrangler.toml (its top level, or [env.NAME])
          would hit: LULL_TOPICS and the secrets read as the worker reads them (the
          secrets from FILE, .dev.vars format, else the environment), the objects'
          and queues' bindings; exits non-zero with one line per problem
  edge-build [--demo]
          build the edge worker into crates/lull-edge/build: as deployed (no demo
          endpoints), or with --demo with the demo's sink and search (wrangler.toml's
          build commands: none at the top level, what `wrangler deploy` ships;
          --demo in [env.dev], what `cargo xtask dev` serves)";

fn main() -> ExitCode {
    let root = workspace_root();
    match std::env::args().nth(1).as_deref() {
        Some("setup") => exit(setup::all(&root).map(|_| ())),
        Some("package") => exit(setup::all(&root).and_then(|_| package::web(&root)).map(|tarball| {
            println!("packed {}", tarball.display());
        })),
        Some("test") => exit(test(&root)),
        Some("dev") => exit(setup::all(&root).and_then(|tools| {
            www::build_all(&root, &tools)?;
            edge::dev(&root, &tools)
        })),
        Some("www") => exit(setup::all(&root).and_then(|tools| www::build_all(&root, &tools).map(|_| ()))),
        Some("edge-build") => exit(edge_build(&root)),
        Some("check-config") => exit(check_config::run(&root, &std::env::args().skip(2).collect::<Vec<_>>())),
        Some("bench") => exit(setup::all(&root).and_then(|tools| {
            let tarball = package::web(&root)?;
            let package = tarball.with_file_name("lull-web");
            let out = root.join("target/bench/web.json");
            let mut bench = std::process::Command::new(&tools.node);
            bench.arg(root.join("tests/web/bench.mjs")).arg(package).arg(&out);
            cmd::run("bench (lull-web vs lodash.debounce vs es-toolkit)", &root, &mut bench)?;
            edge::bench(&root, &tools)?;
            let mut budget = cmd::cargo(&["run", "--release", "-p", "lull-core", "--example", "budget_bench", "--"]);
            budget.arg(root.join("target/bench/budget.json"));
            cmd::run("bench (lull pull's budget: the seed's margin vs lull's, virtual time)", &root, &mut budget)?;
            bench_report(&root, &tools)
        })),
        Some("-h" | "--help" | "help") => {
            println!("{}", usage());
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("unknown command {other:?}\n\n{}", usage());
            ExitCode::from(2)
        }
    }
}

/// The JSON the benches write under `target/bench`, in the order the report takes them.
const BENCH_JSON: [&str; 4] = ["web.json", "edge.json", "queues.json", "budget.json"];

/// `BENCH.md` at the root, from the benches' JSON (`tests/bench-report.mjs`, Node 22).
fn bench_report(root: &std::path::Path, tools: &setup::Tools) -> Result<(), String> {
    let mut report = std::process::Command::new(&tools.node22);
    report.arg(root.join("tests/bench-report.mjs"));
    report.args(BENCH_JSON.map(|json| root.join("target/bench").join(json)));
    report.arg(root.join("BENCH.md"));
    cmd::run("BENCH.md (tests/bench-report.mjs)", root, &mut report)
}

/// `test [SUITE] [--repeat N]`.
fn test(root: &std::path::Path) -> Result<(), String> {
    let mut suite = None;
    let mut repeat = None;
    let mut args = std::env::args().skip(2);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--repeat" => {
                let n = args.next().and_then(|n| n.parse::<u32>().ok()).filter(|n| *n > 0);
                repeat = Some(n.ok_or("--repeat takes a number of runs (1 or more)")?);
            }
            _ if suite.is_none() && !arg.starts_with('-') => suite = Some(arg),
            _ => return Err(format!("unexpected argument {arg:?}\n\n{}", usage())),
        }
    }
    let tools = setup::all(root)?;
    let ids = suites::suite_ids();
    match (repeat, suite) {
        (Some(_), None) => Err(format!("--repeat needs a suite, one of: {}", ids.join(" "))),
        (Some(runs), Some(suite)) => {
            // Refuse an unknown suite before the first run.
            if !ids.contains(&suite.as_str()) {
                return Err(format!("no suite {suite:?}; the suites are: {}", ids.join(" ")));
            }
            repeat::suite(root, &suite, runs)
        }
        (None, only) => suites::test(root, &tools, only.as_deref()),
    }
}

/// `edge-build [--demo]`.
fn edge_build(root: &std::path::Path) -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(2).collect();
    let worker = match args.as_slice() {
        [] => edge::Worker::Production,
        [flag] if flag == "--demo" => edge::Worker::Demo,
        _ => return Err(format!("unexpected arguments {args:?}\n\n{}", usage())),
    };
    edge::build(root, worker, edge::BUILD)
}

/// [`USAGE`] and the suite ids.
fn usage() -> String {
    format!("{USAGE}\n\nsuites: {}", suites::suite_ids().join(" "))
}

fn exit(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: two levels above this crate.
fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(2).map(PathBuf::from).unwrap_or(manifest)
}
