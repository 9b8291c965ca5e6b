//! `cargo xtask setup|dev|test|bench`: the project's only entry points.
//!
//! `setup` installs what the project needs and skips what is present;
//! `test` sets up, then runs every suite and ends with a summary line.

mod edge;
mod package;
mod setup;
mod steps;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>

  setup   install what the project needs (skips what is present)
  package build the npm package lull-web into target/npm
  test    set up, then run every suite (format, lints, wasm32 build, tests)
  dev     set up, then serve the edge worker on http://127.0.0.1:8787 (wrangler dev, workerd)
  bench   run the benchmarks, print a table, write JSON under target/bench
  edge-build  build the edge worker into crates/lull-edge/build (wrangler.toml runs it)";

fn main() -> ExitCode {
    let root = workspace_root();
    match std::env::args().nth(1).as_deref() {
        Some("setup") => exit(setup::all(&root).map(|_| ())),
        Some("package") => exit(setup::all(&root).and_then(|_| package::web(&root)).map(|tarball| {
            println!("packed {}", tarball.display());
        })),
        Some("test") => exit(setup::all(&root).and_then(|tools| steps::test(&root, &tools))),
        Some("dev") => exit(setup::all(&root).and_then(|tools| edge::dev(&root, &tools))),
        Some("edge-build") => exit(edge::build(&root)),
        Some("bench") => exit(setup::all(&root).and_then(|tools| {
            let tarball = package::web(&root)?;
            let package = tarball.with_file_name("lull-web");
            let out = root.join("target/bench/web.json");
            let mut bench = std::process::Command::new(&tools.node);
            bench.arg(root.join("tests/web/bench.mjs")).arg(package).arg(&out);
            steps::run("bench (lull-web vs lodash.debounce vs es-toolkit)", &root, &mut bench)?;
            edge::bench(&root, &tools)
        })),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("unknown command {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
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
