//! Running commands as named steps, and the `test` suite list.

use std::path::Path;
use std::process::Command;
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

fn cargo(args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(args);
    cmd
}

/// lull-web's wasm-bindgen tests in headless Chromium (real DOM, real timers);
/// `webdriver.json` in the crate holds Chromium's offline flags.
fn browser_tests(root: &Path) -> Command {
    let mut cmd = Command::new("wasm-pack");
    cmd.args(["test", "--headless", "--chrome", "--chromedriver", "/usr/bin/chromedriver"]);
    cmd.arg(root.join("crates/lull-web"));
    cmd
}

/// Every suite, each run even when an earlier one failed; then a summary.
pub fn test(root: &Path, tools: &Tools) -> Result<(), String> {
    // `--show-output`: passing tests' reports (the differential's counts) are printed.
    let mut tests = cargo(&["test", "--workspace", "--all-targets", "--", "--show-output"]);
    tests.env("LULL_NODE", &tools.node);
    let mut doc_tests = cargo(&["test", "--workspace", "--doc"]);
    doc_tests.env("LULL_NODE", &tools.node);
    let suites: Vec<(&str, Command)> = vec![
        ("format", cargo(&["fmt", "--all", "--check"])),
        ("lints (native)", cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])),
        (
            "lints (wasm32, lull-core)",
            cargo(&["clippy", "-p", "lull-core", "--target", "wasm32-unknown-unknown", "--", "-D", "warnings"]),
        ),
        (
            "lints (wasm32, lull-web)",
            cargo(&[
                "clippy",
                "-p",
                "lull-web",
                "--all-targets",
                "--target",
                "wasm32-unknown-unknown",
                "--",
                "-D",
                "warnings",
            ]),
        ),
        ("build (wasm32, lull-core)", cargo(&["build", "-p", "lull-core", "--target", "wasm32-unknown-unknown"])),
        ("tests (unit, scenarios, properties, lodash differential)", tests),
        ("doc tests", doc_tests),
        ("browser tests (lull-web in headless Chromium)", browser_tests(root)),
    ];
    let mut results = Vec::new();
    for (name, mut cmd) in suites {
        let start = Instant::now();
        let outcome = run(name, root, &mut cmd);
        results.push((name, outcome.is_ok(), start.elapsed().as_secs_f64()));
    }
    println!("\n{:<58} {:>6} {:>9}", "suite", "result", "seconds");
    for (name, ok, secs) in &results {
        println!("{name:<58} {:>6} {secs:>9.1}", if *ok { "ok" } else { "FAILED" });
    }
    let failed = results.iter().filter(|(_, ok, _)| !ok).count();
    println!("summary: {} passed, {failed} failed", results.len() - failed);
    if failed == 0 { Ok(()) } else { Err(format!("{failed} suite(s) failed")) }
}
