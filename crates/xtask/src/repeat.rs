//! `cargo xtask test <suite> --repeat N`: hunt flakes.
//!
//! Runs one suite N times, each in a fresh `cargo xtask test <suite>` process,
//! keeps each run's output in `target/repeat/<suite>/<n>.log`, and prints how
//! many runs failed and which tests failed, with how often.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Run `suite` `runs` times; an error if any run failed.
pub fn suite(root: &Path, suite: &str, runs: u32) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find xtask itself: {e}"))?;
    let dir = root.join("target/repeat").join(suite);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut failed_runs = 0;
    let mut by_test: BTreeMap<String, u32> = BTreeMap::new();
    for n in 1..=runs {
        let log = dir.join(format!("{n}.log"));
        let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
        let start = Instant::now();
        let status = Command::new(&exe)
            .args(["test", suite])
            .current_dir(root)
            .stdout(out)
            .stderr(err)
            .status()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let secs = start.elapsed().as_secs_f64();
        let output = std::fs::read_to_string(&log).unwrap_or_default();
        let failed = failed_tests(&output);
        if status.success() {
            println!("repeat {suite}: run {n}/{runs} ok ({secs:.0} s)");
            continue;
        }
        failed_runs += 1;
        for test in &failed {
            *by_test.entry(test.clone()).or_default() += 1;
        }
        let names = if failed.is_empty() { "no test named (see the log)".to_string() } else { failed.join("; ") };
        println!("repeat {suite}: run {n}/{runs} FAILED ({secs:.0} s): {names}; log {}", log.display());
    }
    println!("repeat {suite}: {failed_runs} of {runs} runs failed");
    for (test, times) in &by_test {
        println!("  {times}x  {test}");
    }
    if failed_runs == 0 { Ok(()) } else { Err(format!("{failed_runs} of {runs} runs of {suite} failed")) }
}

/// The failing tests a run's output names: cargo and wasm-bindgen-test
/// (`test name ... FAILED`), node's spec reporter (`✖ name (12ms)`), and the
/// consumer test (`FAILED - name: detail`). Each once, in order. (The
/// summary's own list of failed tests, `  - file:line name: why`, is not read.)
fn failed_tests(output: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for line in output.lines().map(str::trim) {
        let name = if let Some(name) = line.strip_prefix("test ").and_then(|l| l.strip_suffix(" ... FAILED")) {
            name
        } else if let Some(rest) = line.strip_prefix("✖ ").filter(|r| *r != "failing tests:") {
            rest.rsplit_once(" (").map_or(rest, |(name, _)| name)
        } else if let Some(rest) = line.strip_prefix("FAILED - ") {
            rest.rsplit_once(": ").map_or(rest, |(name, _)| name)
        } else {
            continue;
        };
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::failed_tests;

    #[test]
    fn failing_tests_are_read_from_each_runner_once() {
        let output = "\
test a_burst_runs_once ... ok
test flush_disarms ... FAILED
  ✔ 1: one event runs once (312.5ms)
  ✖ 3: events every 5 s (2004.1ms)
✖ failing tests:
  ✖ 3: events every 5 s (2004.1ms)
FAILED - debounce: a burst runs once: [4]
ok - no page errors";
        assert_eq!(failed_tests(output), ["flush_disarms", "3: events every 5 s", "debounce: a burst runs once"]);
    }
}
