//! Node's test runner as a step: the spec reporter to the terminal, TAP to a
//! file under `target/test-reports`, and on failure an error that names each
//! test that failed (where it is and the first line of why), so the summary at
//! the end of a long run says what broke without the log above it.

use std::path::Path;
use std::process::Command;

use crate::cmd::run;

/// The most failed tests an error names; past it, how many more there were.
const NAMED_AT_MOST: usize = 20;

/// Run `cmd` (Node, with its own flags and environment) as `node --test` over
/// `files` in `dir`, as step `name`; one file at a time.
pub fn run_tests(name: &str, root: &Path, dir: &Path, mut cmd: Command, files: &[&str]) -> Result<(), String> {
    let reports = root.join("target/test-reports");
    std::fs::create_dir_all(&reports).map_err(|e| format!("{}: {e}", reports.display()))?;
    let report = reports.join(format!("{}.tap", slug(name)));
    // A report left by an earlier run must not be read as this one's.
    let _ = std::fs::remove_file(&report);
    cmd.args(["--test", "--test-concurrency=1"])
        .args(["--test-reporter=spec", "--test-reporter-destination=stdout", "--test-reporter=tap"])
        .arg(format!("--test-reporter-destination={}", report.display()))
        .args(files);
    run(name, dir, &mut cmd).map_err(|error| {
        let tap = std::fs::read_to_string(&report).unwrap_or_default();
        let failed = failed_tests(&tap, &format!("{}/", root.display()));
        if failed.is_empty() {
            return format!("{error} (no failed test in {}: it stopped before a test ended)", report.display());
        }
        let mut lines: Vec<String> = failed.iter().take(NAMED_AT_MOST).map(|f| format!("\n  - {f}")).collect();
        if failed.len() > NAMED_AT_MOST {
            lines.push(format!("\n  … and {} more (in {})", failed.len() - NAMED_AT_MOST, report.display()));
        }
        format!("{error}; {} failed:{}", failed.len(), lines.concat())
    })
}

/// `name` as a file name: letters and digits, the rest runs of `-`.
fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// Each test that failed in Node's TAP output, as `file:line name: why`
/// (`file` without `prefix`); a test failed only because a subtest did is
/// left out, as the subtest is named.
fn failed_tests(tap: &str, prefix: &str) -> Vec<String> {
    let lines: Vec<&str> = tap.lines().collect();
    let mut failed = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let Some(rest) = trimmed.strip_prefix("not ok ") else { continue };
        let test = rest.split_once(" - ").map_or(rest, |(_, name)| name).trim();
        let indent = line.len() - trimmed.len() + 2;
        let block = yaml_block(&lines[i + 1..], indent);
        if field(&block, "failureType").as_deref() == Some("subtestsFailed") {
            continue;
        }
        let location = field(&block, "location").unwrap_or_default();
        let location = location.strip_prefix("file://").unwrap_or(&location);
        let location = location.strip_prefix(prefix).unwrap_or(location);
        // `file:line:column`: the column says nothing more.
        let location =
            location.rsplit_once(':').filter(|(_, col)| col.parse::<u32>().is_ok()).map_or(location, |(at, _)| at);
        let why = field(&block, "error").unwrap_or_default();
        failed.push(format!("{location} {test}: {why}"));
    }
    failed
}

/// The YAML block (`---` … `...`) right after a TAP result line, its lines
/// with `indent` removed; empty if there is none.
fn yaml_block<'a>(after: &[&'a str], indent: usize) -> Vec<&'a str> {
    let pad = " ".repeat(indent);
    if after.first().map(|l| l.trim_end()) != Some(&format!("{pad}---")) {
        return Vec::new();
    }
    after[1..]
        .iter()
        .take_while(|l| l.trim_end() != format!("{pad}..."))
        .map(|l| l.strip_prefix(pad.as_str()).unwrap_or(l.trim_start()))
        .collect()
}

/// A top-level field of a YAML block: a plain or quoted scalar, or the first
/// non-empty line of a `|-` block.
fn field(block: &[&str], key: &str) -> Option<String> {
    let at = block.iter().position(|l| l.strip_prefix(key).is_some_and(|r| r.starts_with(':')))?;
    let value = block[at][key.len() + 1..].trim();
    if value.starts_with('|') {
        let first = block[at + 1..].iter().take_while(|l| l.starts_with(' ')).map(|l| l.trim()).find(|l| !l.is_empty());
        return first.map(str::to_string);
    }
    let unquoted = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')).map(|v| v.replace("''", "'"));
    Some(unquoted.unwrap_or_else(|| value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Node 22's TAP for a file with a failing subtest, a failing test whose
    /// error is a block, a single-line error and two passing tests.
    const TAP: &str = "TAP version 13
# Subtest: outer
    # Subtest: inner fails
    not ok 1 - inner fails
      ---
      duration_ms: 2.003633
      type: 'test'
      location: '/repo/tests/a.test.mjs:4:11'
      failureType: 'testCodeFailure'
      error: |-
        one is not two
        
        1 !== 2
      code: 'ERR_ASSERTION'
      ...
    # Subtest: inner ok
    ok 2 - inner ok
      ---
      duration_ms: 0.22809
      ...
    1..2
not ok 1 - outer
  ---
  duration_ms: 3.815948
  location: '/repo/tests/a.test.mjs:3:1'
  failureType: 'subtestsFailed'
  error: '1 subtest failed'
  ...
# Subtest: quoted
not ok 2 - quoted
  ---
  location: '/repo/tests/b.test.mjs:9:1'
  failureType: 'testCodeFailure'
  error: 'it''s late'
  ...
ok 3 - fine
1..3
";

    #[test]
    fn failed_tests_are_named_with_where_and_why_and_their_parents_left_out() {
        assert_eq!(
            failed_tests(TAP, "/repo/"),
            ["tests/a.test.mjs:4 inner fails: one is not two", "tests/b.test.mjs:9 quoted: it's late"]
        );
        assert!(failed_tests("TAP version 13\nok 1 - fine\n1..1\n", "/repo/").is_empty());
    }

    #[test]
    fn a_step_name_becomes_a_file_name() {
        assert_eq!(slug("edge tests (workerd), at 3 ages"), "edge-tests-workerd-at-3-ages");
    }
}
