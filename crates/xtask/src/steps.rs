//! Running commands as named steps, and the `test` suite list.

use std::cell::OnceCell;
use std::path::Path;
use std::process::Command;
use std::rc::Rc;
use std::time::Instant;

use crate::setup::Tools;

/// Run `cmd` in `dir`, echoing it; an error names the step.
pub fn run(name: &str, dir: &Path, cmd: &mut Command) -> Result<(), String> {
    cmd.current_dir(dir);
    println!("==> {name}: {}", describe(cmd));
    let status = cmd.status().map_err(|e| format!("{name}: cannot start {}: {e}", describe(cmd)))?;
    if status.success() { Ok(()) } else { Err(format!("{name}: {status}")) }
}

/// Run `cmd` and return its standard output, trimmed (`None` if it cannot run or fails).
pub fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn describe(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// `cargo` (the one running xtask) with `args`.
pub fn cargo(args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(args);
    cmd
}

/// lull-web's browser tests: Rust, compiled to wasm by wasm-bindgen-test,
/// driving the package's JS in headless Chromium (real DOM, real timers);
/// `webdriver.json` in the crate holds Chromium's offline flags.
fn browser_tests(root: &Path) -> Command {
    let mut cmd = Command::new("wasm-pack");
    cmd.args(["test", "--headless", "--chrome", "--chromedriver", "/usr/bin/chromedriver"]);
    cmd.arg(root.join("crates/lull-web"));
    cmd
}

/// A suite: a short id (for `cargo xtask test <id>`), a name, and what runs it.
struct Suite<'a> {
    id: &'static str,
    name: &'static str,
    run: Box<dyn FnOnce() -> Result<(), String> + 'a>,
}

fn command<'a>(id: &'static str, name: &'static str, root: &'a Path, mut cmd: Command) -> Suite<'a> {
    Suite { id, name, run: Box::new(move || run(name, root, &mut cmd)) }
}

/// Every suite, in the order `cargo xtask test` runs them.
fn suites<'a>(root: &'a Path, tools: &'a Tools) -> Vec<Suite<'a>> {
    // `--show-output`: passing tests' reports (the differential's counts) are printed.
    let mut tests = cargo(&["test", "--workspace", "--all-targets", "--", "--show-output"]);
    tests.env("LULL_NODE", &tools.node);
    let mut doc_tests = cargo(&["test", "--workspace", "--doc"]);
    doc_tests.env("LULL_NODE", &tools.node);
    let wasm_lints = |package: &str, all_targets: bool| {
        let mut args = vec!["clippy", "-p", package, "--target", "wasm32-unknown-unknown"];
        if all_targets {
            args.push("--all-targets");
        }
        args.extend(["--", "-D", "warnings"]);
        cargo(&args)
    };
    let tarball = Rc::new(OnceCell::new());
    let packed = tarball.clone();
    let for_fake_timers = tarball.clone();
    let for_browser = tarball.clone();
    let for_edge = tarball.clone();
    let for_demo = tarball.clone();
    // The package built by the `package` suite, or built now (once) when it did not run.
    let built = |tarball: &OnceCell<std::path::PathBuf>| match tarball.get() {
        Some(t) => Ok(t.clone()),
        None => crate::package::web(root).inspect(|t| drop(tarball.set(t.clone()))),
    };
    vec![
        command("format", "format", root, cargo(&["fmt", "--all", "--check"])),
        command(
            "lints",
            "lints (native)",
            root,
            cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]),
        ),
        command("lints-core-wasm", "lints (wasm32, lull-core)", root, wasm_lints("lull-core", false)),
        command("lints-web-wasm", "lints (wasm32, lull-web)", root, wasm_lints("lull-web", true)),
        command("lints-edge-wasm", "lints (wasm32, lull-edge)", root, wasm_lints("lull-edge", true)),
        Suite {
            id: "lints-engines",
            name: "lints (wasm32, lull-web's two engines as shipped)",
            run: Box::new(move || {
                for features in ["module,lite", "module"] {
                    let mut lints = cargo(&["clippy", "-p", "lull-web", "--target", "wasm32-unknown-unknown"]);
                    lints.args(["--profile", "wasm-module", "--features", features, "--", "-D", "warnings"]);
                    run("lints (engine)", root, &mut lints)?;
                }
                Ok(())
            }),
        },
        command(
            "build-core-wasm",
            "build (wasm32, lull-core)",
            root,
            cargo(&["build", "-p", "lull-core", "--target", "wasm32-unknown-unknown"]),
        ),
        command("unit", "tests (unit, scenarios, properties, lodash differential)", root, tests),
        command("doc", "doc tests", root, doc_tests),
        Suite {
            id: "package",
            name: "npm package (two engines, wasm-opt, npm pack)",
            run: Box::new(move || crate::package::web(root).map(|t| drop(packed.set(t)))),
        },
        Suite {
            id: "browser",
            name: "browser tests (the package in headless Chromium)",
            run: Box::new(move || {
                let package = built(&for_browser)?.with_file_name("lull-web");
                crate::package::for_browser_tests(root, &package)?;
                run("browser tests", root, &mut browser_tests(root))
            }),
        },
        Suite {
            id: "consumer",
            name: "consumer test (tarball in a fresh Vite app, in Chromium)",
            run: Box::new(move || {
                let mut cmd = Command::new(&tools.node);
                cmd.arg(root.join("tests/web/consumer.mjs")).arg(built(&tarball)?).arg(root.join("target"));
                run("consumer test", root, &mut cmd)
            }),
        },
        Suite {
            id: "fake-timers",
            name: "fake timers (Vitest and Jest, jsdom: lull-web in lockstep with lodash)",
            run: Box::new(move || {
                let package = built(&for_fake_timers)?.with_file_name("lull-web");
                let dir = root.join("tests/web/fake-timers");
                let modules = root.join("tests/web/node_modules");
                // Node 22: jsdom's fetch (undici) needs it.
                let mut vitest = Command::new(&tools.node22);
                vitest.arg(modules.join("vitest/vitest.mjs")).args(["run", "--root"]).arg(&dir);
                vitest.env("LULL_WEB_PKG", &package);
                run("fake timers (Vitest)", root, &mut vitest)?;
                // Jest runs the package's ES modules as they are (Node's VM modules),
                // from its folder: it finds jest.config.mjs there.
                let mut jest = Command::new(&tools.node22);
                jest.arg("--experimental-vm-modules").arg(modules.join("jest/bin/jest.js"));
                jest.env("LULL_WEB_PKG", &package);
                run("fake timers (Jest)", &dir, &mut jest)
            }),
        },
        Suite {
            id: "edge",
            name: "edge tests (lull-edge on workerd, real HTTP, restarts)",
            // wrangler dev (one of these tests) serves the demo page's assets too.
            run: Box::new(move || {
                let package = built(&for_edge)?.with_file_name("lull-web");
                crate::edge::tests(root, tools, &package, "tests/edge/*.test.mjs", "edge tests (workerd)")
            }),
        },
        Suite {
            id: "demo",
            name: "demo page (wrangler dev, playwright in Chromium)",
            run: Box::new(move || {
                let package = built(&for_demo)?.with_file_name("lull-web");
                crate::edge::tests(
                    root,
                    tools,
                    &package,
                    "tests/browser/*.test.mjs",
                    "demo tests (wrangler dev, Chromium)",
                )
            }),
        },
    ]
}

/// The suite ids, for usage messages.
pub fn suite_ids() -> &'static str {
    "format lints lints-core-wasm lints-web-wasm lints-edge-wasm lints-engines build-core-wasm unit doc package browser consumer fake-timers edge demo"
}

/// Every suite (or only the one called `only`), each run even when an earlier one failed; then a summary.
pub fn test(root: &Path, tools: &Tools, only: Option<&str>) -> Result<(), String> {
    let mut chosen = suites(root, tools);
    if let Some(id) = only {
        chosen.retain(|s| s.id == id);
        if chosen.is_empty() {
            return Err(format!("no suite {id:?}; the suites are: {}", suite_ids()));
        }
    }
    let mut results = Vec::new();
    for suite in chosen {
        let start = Instant::now();
        let outcome = (suite.run)();
        if let Err(e) = &outcome {
            eprintln!("xtask: {e}");
        }
        results.push((suite.name, outcome.is_ok(), start.elapsed().as_secs_f64()));
    }
    println!("\n{:<58} {:>6} {:>9}", "suite", "result", "seconds");
    for (name, ok, secs) in &results {
        println!("{name:<58} {:>6} {secs:>9.1}", if *ok { "ok" } else { "FAILED" });
    }
    let failed = results.iter().filter(|(_, ok, _)| !ok).count();
    println!("summary: {} passed, {failed} failed", results.len() - failed);
    if failed == 0 { Ok(()) } else { Err(format!("{failed} suite(s) failed")) }
}
