//! `lull pull`, the real binary, against a local fake of Cloudflare's pull
//! API, scaled down to seconds. Handlers are small `sh` scripts that log
//! when they begin and end (wall-clock ns), so each test judges by the times
//! that happened and by what the fake queue saw.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use support::fake_queue::{ACCOUNT, FakeQueue, Op, QUEUE, TOKEN};

/// A handler: logs `<ns> start <key> <attempt> <stdin's window key>` and `<ns> end <key>`,
/// sleeping `$SLEEP` seconds between (or what `$SLOW_KEY` gets: `$SLOW_SLEEP`).
const LOGGING: &str = r#"
now() { date +%s%N; }
window=$(cat)
printf '%s start %s %s %s\n' "$(now)" "$LULL_IDEMPOTENCY_KEY" "$LULL_ATTEMPT" "$(printf '%s' "$window" | sed 's/.*"key":"\([^"]*\)".*/\1/')" >> "$LOG"
sleep "${SLEEP:-0}"
printf '%s end %s\n' "$(now)" "$LULL_IDEMPOTENCY_KEY" >> "$LOG"
"#;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lull-pull-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// `lull pull FLAGS --json --state DIR/state.json -- sh -c SCRIPT`, with the fake's settings.
fn start(fake: &FakeQueue, dir: &Path, flags: &[&str], script: &str, env: &[(&str, &str)]) -> Child {
    start_with(fake, dir, &[flags, &["--json"]].concat(), script, env)
}

/// [`start`] without `--json`.
fn start_with(fake: &FakeQueue, dir: &Path, flags: &[&str], script: &str, env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lull"));
    cmd.arg("pull").args(flags).arg("--state").arg(dir.join("state.json"));
    cmd.args(["--", "sh", "-c", script, "handler"]);
    cmd.env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd.env("CLOUDFLARE_ACCOUNT_ID", ACCOUNT).env("CLOUDFLARE_API_TOKEN", TOKEN).env("LULL_PULL_QUEUE", QUEUE);
    cmd.env("CLOUDFLARE_API_BASE_URL", &fake.base).env("LOG", dir.join("log"));
    cmd.envs(env.iter().copied());
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.spawn().expect("the lull binary starts")
}

/// What a finished run said.
struct Ran {
    code: Option<i32>,
    windows: Vec<Value>,
    summary: Value,
    stderr: String,
    wall: Duration,
}

fn finish(child: Child, began: Instant) -> Ran {
    let out = child.wait_with_output().expect("the run ends");
    let wall = began.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let summary = lines.last().map(|l| l["summary"].clone()).expect("a summary line");
    let windows = lines[..lines.len() - 1].to_vec();
    Ran { code: out.status.code(), windows, summary, stderr: String::from_utf8_lossy(&out.stderr).into(), wall }
}

/// A line of the handler's log.
#[derive(Debug)]
struct Line {
    /// Wall clock, ns.
    at: u128,
    /// "start" or "end".
    what: String,
    /// `LULL_IDEMPOTENCY_KEY`.
    key: String,
    /// `LULL_ATTEMPT`.
    attempt: String,
    /// The `key` of the window read on stdin.
    window_key: String,
}

fn handler_log(dir: &Path) -> Vec<Line> {
    std::fs::read_to_string(dir.join("log"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let mut parts = l.split(' ');
            let mut next = || parts.next().unwrap_or("").to_string();
            Line { at: next().parse().unwrap_or(0), what: next(), key: next(), attempt: next(), window_key: next() }
        })
        .collect()
}

fn starts(log: &[Line]) -> Vec<&Line> {
    log.iter().filter(|l| l.what == "start").collect()
}

/// A state file as if 200 earlier windows took `ms` each: past the warm-up,
/// the margin is tolerance × what was measured.
fn warm_state(dir: &Path, ms: u64) {
    let durations = vec![ms; lull_core::WARM_DURATIONS];
    std::fs::write(dir.join("state.json"), serde_json::json!({ "durations_ms": durations }).to_string())
        .expect("state");
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(u64::MAX)
}

#[test]
fn a_run_ends_inside_its_budget_with_the_queue_drained_as_far_as_the_margin_allows() {
    let fake = FakeQueue::start();
    for i in 0..60 {
        fake.add(&format!("k{i}"));
    }
    let dir = scratch("budget");
    warm_state(&dir, 100);
    let began = Instant::now();
    let child = start(
        &fake,
        &dir,
        &["--budget", "3s", "--handler-timeout", "1s", "--batch", "5"],
        LOGGING,
        &[("SLEEP", "0.1")],
    );
    let ran = finish(child, began);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let s = &ran.summary;
    assert!(n(&s["used_ms"]) <= 3_000, "inside its budget: {s}");
    assert!(ran.wall < Duration::from_millis(4_000), "the process too: {:?}", ran.wall);
    // It stopped only when another window would not fit: the last began within
    // the margin and one window's time of the budget's end.
    let log = handler_log(&dir);
    let handled = starts(&log);
    let longest = ran.windows.iter().map(|w| n(&w["took_ms"])).max().unwrap_or(0);
    let last_began_ms = (handled.last().map(|s| s.at).unwrap_or(0) - (now_ns() - ran.wall.as_nanos())) / 1_000_000;
    assert!(
        last_began_ms as u64 + n(&s["margin_ms"]) + 2 * longest + 300 >= 3_000,
        "stopped early: last began at {last_began_ms} ms, margin {} ms, longest {longest} ms",
        s["margin_ms"]
    );
    assert!(handled.len() >= 10, "windows of ~0.1 s in ~2.5 s: {}", handled.len());
    assert_eq!(fake.acked().len(), handled.len(), "each handled window acked");
    assert_eq!(n(&s["acked"]) as usize, handled.len());
    assert_eq!(fake.available_now(), 60 - handled.len(), "nothing left leased: the rest is available now");
    assert!(n(&s["margin_ms"]) < 1_000, "warm: 2 × ~0.1 s, not the handler timeout: {s}");
}

#[test]
fn an_empty_queue_idles_and_takes_a_window_arriving_within_idle_and_a_second() {
    let fake = FakeQueue::start();
    let dir = scratch("idle");
    let began = Instant::now();
    let child = start(&fake, &dir, &["--budget", "5s", "--idle", "500ms", "--handler-timeout", "1s"], LOGGING, &[]);
    std::thread::sleep(Duration::from_millis(1_500));
    let arrived = now_ns();
    fake.add("late");
    let ran = finish(child, began);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let log = handler_log(&dir);
    let handled = starts(&log);
    assert_eq!(handled.len(), 1, "{log:?}");
    let waited = Duration::from_nanos((handled[0].at.saturating_sub(arrived)) as u64);
    assert!(waited <= Duration::from_millis(1_500), "taken {waited:?} after it arrived (idle 0.5 s + 1 s)");
    assert!(n(&ran.summary["idles"]) >= 2, "{}", ran.summary);
    assert!(n(&ran.summary["used_ms"]) <= 5_000);
}

#[test]
fn a_slow_handler_widens_the_margin() {
    let fake = FakeQueue::start();
    for i in 0..20 {
        fake.add(&format!("k{i}"));
    }
    let dir = scratch("slow");
    warm_state(&dir, 50);
    let began = Instant::now();
    let child = start(&fake, &dir, &["--budget", "3s", "--handler-timeout", "2s"], LOGGING, &[("SLEEP", "0.3")]);
    let ran = finish(child, began);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let slowest_measured = ran.windows.iter().map(|w| n(&w["took_ms"])).max().unwrap_or(0);
    let margin = n(&ran.summary["margin_ms"]);
    assert!(margin >= 2 * 300, "2 × the slow handler's time, not 2 × 50 ms: {margin} ms");
    assert!(margin <= 2 * slowest_measured, "from what was measured: {margin} ms, slowest {slowest_measured} ms");
    assert_eq!(ran.summary["margin_from"], "p99.5");
    let kept: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("state.json")).expect("state kept")).expect("json");
    assert_eq!(kept["durations_ms"].as_array().map(Vec::len), Some(lull_core::WARM_DURATIONS + ran.windows.len()));
}

#[test]
fn a_failing_or_crashing_window_comes_back_and_is_handled_once_it_succeeds() {
    let fake = FakeQueue::start();
    for key in ["fails", "crashes", "fine"] {
        fake.add(key);
    }
    let dir = scratch("failing");
    // The first try of `fails` exits 3; the first of `crashes` kills itself.
    let script = format!(
        r#"{LOGGING}
case "$LULL_IDEMPOTENCY_KEY" in
  */fails/*) [ -e "$LOG.fails" ] || {{ touch "$LOG.fails"; exit 3; }} ;;
  */crashes/*) [ -e "$LOG.crashes" ] || {{ touch "$LOG.crashes"; kill -9 $$; }} ;;
esac"#
    );
    let began = Instant::now();
    let child = start(&fake, &dir, &["--budget", "5s", "--idle", "200ms", "--handler-timeout", "1s"], &script, &[]);
    let ran = finish(child, began);
    assert_eq!(ran.code, Some(4), "failures show in the exit code: {}", ran.stderr);
    assert_eq!((n(&ran.summary["failed"]), n(&ran.summary["acked"])), (2, 3), "{}", ran.summary);
    let mut acked = fake.acked();
    acked.sort();
    assert_eq!(acked, ["crashes", "fails", "fine"], "every window handled in the end");
    let outcomes: Vec<_> =
        ran.windows.iter().map(|w| (w["window"].as_str().unwrap_or(""), w["outcome"].as_str().unwrap_or(""))).collect();
    assert!(
        outcomes.contains(&("orders/fails/w.1", "failed")) && outcomes.contains(&("orders/crashes/w.1", "crashed")),
        "{outcomes:?}"
    );
    // Given back with a delay of at least a second, and attempted again as attempt 2.
    let retried: Vec<_> = fake
        .log()
        .into_iter()
        .filter_map(|op| if let Op::Ack { retried, .. } = op { Some(retried) } else { None })
        .flatten()
        .collect();
    assert!(retried.iter().all(|(_, delay)| delay.unwrap_or(0) >= 1), "{retried:?}");
    let log = handler_log(&dir);
    let attempts: Vec<_> =
        starts(&log).iter().filter(|s| s.key.contains("/fails/")).map(|s| s.attempt.clone()).collect();
    assert_eq!(attempts, ["1", "2"], "LULL_ATTEMPT grows with the queue's count");
    let fails: Vec<_> = starts(&log).iter().filter(|s| s.key.contains("/fails/")).map(|s| s.at).collect();
    assert!(fails[1] - fails[0] >= 1_000_000_000, "the retry waited its delay");
}

#[test]
fn windows_pulled_and_not_reached_are_given_back_at_exit_not_left_to_their_lease() {
    let fake = FakeQueue::start();
    for i in 0..20 {
        fake.add(&format!("k{i}"));
    }
    let dir = scratch("release");
    // Earlier windows took 50 ms: a pull asks for 10, but these take 0.3 s
    // each, the margin widens, and most of the batch will not fit.
    warm_state(&dir, 50);
    let began = Instant::now();
    let child = start(
        &fake,
        &dir,
        &["--budget", "1500ms", "--handler-timeout", "1s", "--batch", "10"],
        LOGGING,
        &[("SLEEP", "0.3")],
    );
    let ran = finish(child, began);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let released = n(&ran.summary["released"]);
    assert!(released >= 1, "{}", ran.summary);
    let gave_back: Vec<_> = fake
        .log()
        .into_iter()
        .filter_map(|op| if let Op::Ack { retried, .. } = op { Some(retried) } else { None })
        .flatten()
        .collect();
    assert_eq!(gave_back.len() as u64, released);
    assert!(gave_back.iter().all(|(_, delay)| *delay == Some(0)), "given back with no delay: {gave_back:?}");
    assert_eq!(
        fake.available_now(),
        20 - fake.acked().len(),
        "available again at once, not after the visibility timeout"
    );
    // The visibility asked for outlasts the run and the handler timeout.
    for op in fake.log() {
        if let Op::Pull { visibility_ms, at, .. } = op {
            assert!(visibility_ms as u128 >= 1_500 - at.as_millis().min(1_500) + 1_000, "{visibility_ms} ms at {at:?}");
        }
    }
}

#[test]
fn sigterm_mid_window_finishes_it_gives_the_rest_back_and_loses_nothing() {
    let fake = FakeQueue::start();
    for i in 0..5 {
        fake.add(&format!("k{i}"));
    }
    let dir = scratch("sigterm");
    let began = Instant::now();
    let child =
        start(&fake, &dir, &["--budget", "20s", "--handler-timeout", "5s", "--batch", "5"], LOGGING, &[("SLEEP", "1")]);
    // Once the first window is in hand, SIGTERM the run (not its handler).
    let deadline = Instant::now() + Duration::from_secs(10);
    while starts(&handler_log(&dir)).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let ran = finish(child, began);
    assert_eq!(ran.code, Some(5), "interrupted: {}", ran.stderr);
    let log = handler_log(&dir);
    assert_eq!(starts(&log).len(), 1, "no window begun after the signal: {log:?}");
    assert_eq!(log.iter().filter(|l| l.what == "end").count(), 1, "the window in hand finished");
    assert_eq!(fake.acked().len(), 1, "and was acked");
    assert_eq!(fake.available_now(), 4, "the rest given back at once (or never pulled)");
    let pulled: usize = fake.log().iter().map(|op| if let Op::Pull { keys, .. } = op { keys.len() } else { 0 }).sum();
    assert!(pulled > 1, "more than the window in hand was pulled: {pulled}");
    assert_eq!(n(&ran.summary["released"]) as usize, pulled - 1);
    assert_eq!(ran.summary["ended_by"], "signal");
    assert!(ran.wall < Duration::from_secs(5), "it ended soon after: {:?}", ran.wall);
}

#[test]
fn a_duplicate_idempotency_key_runs_the_handler_once() {
    let fake = FakeQueue::start();
    fake.add("twice");
    fake.add("once");
    fake.add("twice"); // a redelivery: another message, the same window
    let dir = scratch("duplicate");
    let began = Instant::now();
    // The handler also notes whether it got lull's credentials (it must not).
    let script = format!(
        r#"{LOGGING}
echo "${{CLOUDFLARE_API_TOKEN:-none}} ${{LULL_TOKEN:-none}}" >> "$LOG.env""#
    );
    let child = start(
        &fake,
        &dir,
        &["--budget", "3s", "--handler-timeout", "500ms", "--idle", "200ms"],
        &script,
        &[("LULL_TOKEN", "t")],
    );
    // Once the first copy is acked, a third arrives: set apart at its pull.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !fake.acked().contains(&"twice".to_string()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    fake.add("twice");
    let ran = finish(child, began);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let log = handler_log(&dir);
    let keys: Vec<_> = starts(&log).iter().map(|s| s.key.clone()).collect();
    assert_eq!(keys, ["orders/twice/w.1", "orders/once/w.1"], "the handler ran once per window");
    assert_eq!(fake.acked(), ["twice", "once", "twice", "twice"], "every copy acked");
    assert_eq!(n(&ran.summary["duplicates"]), 2, "one in the first batch, one at a later pull");
    let env = std::fs::read_to_string(dir.join("log.env")).expect("the handler ran");
    assert!(env.lines().all(|l| l == "none none"), "no credential reaches the handler: {env:?}");
    // The window on stdin is the message's body, and the attempt lull-edge would forward.
    for line in starts(&log) {
        assert_eq!(line.key, format!("orders/{}/w.1", line.window_key), "{line:?}");
        assert_eq!(line.attempt, "1");
    }
}

#[test]
fn without_json_a_run_prints_its_summary_line_and_off_a_terminal_no_status_line() {
    let fake = FakeQueue::start();
    for i in 0..30 {
        fake.add(&format!("k{i}"));
    }
    let dir = scratch("summary");
    warm_state(&dir, 100);
    let script = format!("{LOGGING}\ncase \"$LULL_IDEMPOTENCY_KEY\" in */k3/*) exit 1 ;; esac");
    let child = start_with(&fake, &dir, &["--budget", "2s", "--handler-timeout", "1s"], &script, &[("SLEEP", "0.1")]);
    let out = child.wait_with_output().expect("the run ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}{stderr}");
    assert_eq!(out.status.code(), Some(4), "a failed window shows in the exit code");
    let lines: Vec<_> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one summary line: {stdout}");
    let log = handler_log(&dir);
    let handled = starts(&log).len();
    // k3 fails on every try (given back for a second after each).
    let failed = starts(&log).iter().filter(|l| l.key.contains("/k3/")).count();
    assert!(failed >= 1);
    let expected =
        format!("lull pull: handled {handled} (acked {}, failed {failed}), duplicates 0, released ", handled - failed);
    assert!(lines[0].starts_with(&expected), "{}", lines[0]);
    assert!(lines[0].contains(" of 2.0 s; margin ") && lines[0].contains(" = 2 × p99.5 "), "{}", lines[0]);
    assert!(!stderr.contains('\r') && !stderr.contains("handling:"), "no live status line off a terminal: {stderr:?}");
    assert!(stderr.contains(&format!("lull: windows failed: {failed}")), "{stderr}");
}

#[test]
fn a_handler_past_its_timeout_is_stopped_with_what_it_started_and_its_window_comes_back() {
    let fake = FakeQueue::start();
    fake.add("stuck");
    let dir = scratch("timeout");
    // It starts a child of its own, never reads its stdin, and never ends.
    let script = r#"sleep 60 & echo $! > "$LOG.child"; wait"#;
    let began = Instant::now();
    let child = start(&fake, &dir, &["--budget", "3s", "--handler-timeout", "500ms", "--idle", "5s"], script, &[]);
    let ran = finish(child, began);
    assert_eq!(ran.code, Some(4), "{}", ran.stderr);
    assert_eq!(ran.windows[0]["outcome"], "timed_out", "{:?}", ran.windows);
    let took = n(&ran.windows[0]["took_ms"]);
    assert!((500..1_500).contains(&took), "stopped at its timeout: {took} ms");
    let pid = std::fs::read_to_string(dir.join("log.child")).expect("the handler's child").trim().to_string();
    let alive = Command::new("kill").args(["-0", &pid]).stderr(Stdio::null()).status().expect("kill -0").success();
    assert!(!alive, "what the handler started was stopped with it");
    let held = fake.remaining();
    assert_eq!(held.len(), 1, "the window is still on the queue");
    assert!(held[0].lease.is_none(), "given back, not left to its lease");
}

#[test]
fn on_a_terminal_a_live_status_line_is_drawn_and_cleared() {
    let fake = FakeQueue::start();
    for i in 0..3 {
        fake.add(&format!("k{i}"));
    }
    let dir = scratch("terminal");
    // `script` gives the run a terminal (a pty) and copies what it draws to its own stdout.
    let line = format!(
        "{} pull --budget 1500ms --handler-timeout 300ms --no-state -- sh -c 'cat >/dev/null'",
        env!("CARGO_BIN_EXE_lull")
    );
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CLOUDFLARE_ACCOUNT_ID", ACCOUNT)
        .env("CLOUDFLARE_API_TOKEN", TOKEN)
        .env("LULL_PULL_QUEUE", QUEUE)
        .env("CLOUDFLARE_API_BASE_URL", &fake.base)
        .current_dir(&dir)
        .output()
        .expect("script runs");
    let drawn = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{drawn}");
    assert!(drawn.contains("\r\x1b[2Khandling: "), "a status line while a window is handled: {drawn:?}");
    assert!(drawn.contains(" of 1.5 s · margin "), "{drawn:?}");
    let summary = drawn.rsplit("\r\x1b[2K").next().unwrap_or("");
    assert!(summary.starts_with("lull pull: handled 3 (acked 3, failed 0)"), "cleared before the summary: {summary:?}");
}
