//! Differential test: lull-core against `lodash.debounce` / `lodash.throttle`
//! themselves (npm `lodash`, run live in Node under a virtual clock).
//!
//! Random traces of calls, time advances, blocked-loop stalls, `flush` and
//! `cancel`, with random `wait`, `maxWait`, `leading`, `trailing`, go through
//! lodash (tests/lodash/harness.mjs) and through a `Debouncer` driven the way
//! the browser will drive it. Invocation times, arguments and every return
//! value must match lodash with lull's two documented timing fixes applied;
//! the report says how many traces each fix changed.
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use lull_core::{Action, PolicyConfig, Seq, Wait};
use serde::{Deserialize, Serialize};
use support::{Rng, Runs, Sim};

const TRACES: usize = 10_000;

#[derive(Serialize)]
struct Trace {
    kind: &'static str,
    wait: u64,
    options: Option<Options>,
    start: u64,
    ops: Vec<Op>,
}

#[derive(Serialize)]
struct Options {
    #[serde(skip_serializing_if = "Option::is_none")]
    leading: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trailing: Option<bool>,
    #[serde(rename = "maxWait", skip_serializing_if = "Option::is_none")]
    max_wait: Option<u64>,
}

#[derive(Serialize, Clone, Copy)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Op {
    /// A call; `turn`: made in the same turn of the event loop as the op before
    /// it (a synchronous loop of calls), so no timer could have run in between.
    Call {
        arg: u64,
        turn: bool,
    },
    Advance {
        ms: u64,
    },
    Stall {
        ms: u64,
    },
    Flush,
    Cancel,
}

#[derive(Deserialize, PartialEq, Eq, Debug, Clone)]
struct Outcome {
    calls: Vec<(u64, u64)>,
    returns: Vec<Option<u64>>,
}

#[derive(Deserialize)]
struct Variants {
    raw: Outcome,
    flush: Outcome,
    stall: Outcome,
    both: Outcome,
}

fn generate(rng: &mut Rng) -> Trace {
    let any_wait = rng.below(300);
    let wait = if rng.chance(60) { rng.pick(&[0, 1, 5, 10, 50, 100, 250]) } else { any_wait };
    let kind = if rng.chance(70) { "debounce" } else { "throttle" };
    let options = (!rng.chance(10)).then(|| Options {
        leading: rng.chance(50).then(|| rng.chance(50)),
        trailing: rng.chance(50).then(|| rng.chance(50)),
        max_wait: (kind == "debounce" && rng.chance(50)).then(|| {
            let any = rng.below(600);
            rng.pick(&[0, wait / 2, wait, wait * 2, wait * 3 + 7, any])
        }),
    });
    let any_start = rng.below(1_000_000);
    let start = rng.pick(&[0, 1_000, any_start]);
    let mut ops = Vec::new();
    let mut arg = 0;
    for _ in 0..5 + rng.below(75) {
        let roll = rng.below(100);
        // Only after a call or a stall can the next call be in the same turn.
        let may_share_turn = matches!(ops.last(), Some(Op::Call { .. } | Op::Stall { .. }));
        let step = match roll {
            0..45 => {
                arg += 1;
                Op::Call { arg, turn: may_share_turn && rng.chance(40) }
            }
            45..77 => Op::Advance {
                ms: match rng.below(6) {
                    0 => 0,
                    1 => 1 + rng.below(wait.max(1)),
                    2 => wait.saturating_sub(1),
                    3 => wait,
                    4 => wait + 1,
                    _ => rng.below(4 * wait + 20),
                },
            },
            77..85 => Op::Stall { ms: rng.below(3 * wait + 10) },
            85..93 => Op::Flush,
            _ => Op::Cancel,
        };
        ops.push(step);
    }
    ops.push(Op::Advance { ms: 10 * (wait + 600) });
    Trace { kind, wait, options, start, ops }
}

/// lodash's option defaults, mapped onto a lull policy.
fn lull_policy(trace: &Trace) -> PolicyConfig {
    let opts = trace.options.as_ref();
    let throttle = trace.kind == "throttle";
    let leading = opts.and_then(|o| o.leading).unwrap_or(throttle);
    let trailing = opts.and_then(|o| o.trailing).unwrap_or(true);
    let max_wait = if throttle { Some(trace.wait) } else { opts.and_then(|o| o.max_wait) };
    PolicyConfig { wait: Wait::Fixed(trace.wait), max_wait, leading, trailing, ..PolicyConfig::debounce(trace.wait) }
        .clamp_max_wait()
}

/// Calls a driver kept on its side under the engine's horizon, not yet handed in.
#[derive(Default)]
struct Kept {
    count: u64,
    last_at: u64,
    last_arg: u64,
}

/// The trace through lull-core, driven like lull-web drives it: keep each
/// call's argument by seq, call the function with the fire's last one. With
/// `horizon`, calls before the engine's horizon stay on the driver's side
/// (their number, the last one's time and argument) and are handed in with
/// `recorded` before anything else happens; `kept` counts them.
fn run_lull(trace: &Trace, horizon: bool, kept_calls: &mut usize) -> Outcome {
    let mut sim = Sim::new(lull_policy(trace), Runs::Instant);
    sim.now = trace.start;
    let mut args: HashMap<Seq, u64> = HashMap::new();
    let mut seen = 0;
    let mut calls = Vec::new();
    let mut returns = Vec::new();
    let mut result = None;
    let mut settle = |sim: &Sim, args: &mut HashMap<Seq, u64>, result: &mut Option<u64>| {
        for (_, action) in &sim.log[seen..] {
            match action {
                Action::Fire(fire) => {
                    let arg = args[&fire.span.last];
                    calls.push((fire.at, arg));
                    *result = Some(arg);
                    for s in fire.span.first.0..=fire.span.last.0 {
                        args.remove(&Seq(s));
                    }
                }
                Action::Dropped(dropped) => {
                    for s in dropped.span.first.0..=dropped.span.last.0 {
                        args.remove(&Seq(s));
                    }
                }
                other => panic!("a lodash-style debouncer never {other:?}"),
            }
        }
        seen = sim.log.len();
    };
    let mut kept = Kept::default();
    for op in &trace.ops {
        if let Op::Call { arg, .. } = *op
            && horizon
            && let Some(h) = sim.engine.horizon()
            && sim.now < h.until
            && kept.count < h.events
        {
            kept = Kept { count: kept.count + 1, last_at: sim.now, last_arg: arg };
            *kept_calls += 1;
            returns.push(result); // the last run's result, as for any call that runs nothing
            continue;
        }
        if kept.count > 0 {
            let (deadline, logged) = (sim.engine.next_deadline(), sim.log.len());
            let accepted = sim.engine.recorded(kept.count, kept.last_at).unwrap();
            args.insert(accepted.seq, kept.last_arg);
            sim.drain();
            assert_eq!((sim.engine.next_deadline(), sim.log.len()), (deadline, logged), "handing in changed nothing");
            kept = Kept::default();
        }
        match *op {
            Op::Call { arg, turn } => {
                let accepted = if turn { sim.engine.event_in_turn(sim.now) } else { sim.engine.event(sim.now) };
                args.insert(accepted.seq, arg);
                sim.drain(); // after the arg is known: a fire at `now` may cover this call
            }
            Op::Advance { ms } => sim.advance(ms),
            Op::Stall { ms } => sim.stall(ms),
            Op::Flush => sim.flush(),
            Op::Cancel => sim.cancel(),
        }
        settle(&sim, &mut args, &mut result);
        match op {
            Op::Call { .. } | Op::Flush => returns.push(result),
            Op::Cancel => returns.push(None),
            Op::Advance { .. } | Op::Stall { .. } => {}
        }
    }
    assert!(args.is_empty(), "every call's argument was fired or dropped: {args:?}");
    Outcome { calls, returns }
}

fn run_lodash(traces: &[Trace]) -> Vec<Variants> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lodash");
    assert!(
        dir.join("node_modules/lodash/package.json").exists(),
        "lodash is not installed in {}: run `cargo xtask setup`",
        dir.display()
    );
    let node = std::env::var("LULL_NODE").unwrap_or_else(|_| "node".into());
    let mut child = Command::new(&node)
        .arg(dir.join("harness.mjs"))
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{node}` (Node.js): {e}"));
    let input = serde_json::to_vec(traces).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "the lodash harness failed: {}", output.status);
    writer.join().unwrap().unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn lull_matches_lodash_on_random_traces() {
    let mut rng = Rng(0x11_d1ff);
    let traces: Vec<Trace> = (0..TRACES).map(|_| generate(&mut rng)).collect();
    let lodash = run_lodash(&traces);
    assert_eq!(lodash.len(), traces.len());

    let (mut invocations, mut flush_changed, mut stall_changed, mut identical) = (0, 0, 0, 0);
    let mut divergent = Vec::new();
    let mut kept = 0;
    for (i, (trace, lo)) in traces.iter().zip(&lodash).enumerate() {
        let lull = run_lull(trace, false, &mut kept);
        assert_eq!(run_lull(trace, true, &mut kept), lull, "trace {i}: calls kept under the horizon change nothing");
        invocations += lull.calls.len();
        if lull != lo.both {
            divergent.push(i);
            if divergent.len() <= 3 {
                eprintln!(
                    "trace {i}: {} wait={} options={}\n  ops: {}\n  lodash(both fixes): {:?}\n  lull:               {:?}",
                    trace.kind,
                    trace.wait,
                    serde_json::to_string(&trace.options).unwrap(),
                    serde_json::to_string(&trace.ops).unwrap(),
                    lo.both,
                    lull
                );
            }
        }
        // A fix "changed" a trace when lodash without it behaves differently.
        flush_changed += usize::from(lo.stall != lo.both);
        stall_changed += usize::from(lo.flush != lo.both);
        identical += usize::from(lo.raw == lull);
    }
    println!(
        "lodash differential: {} traces, {invocations} invocations; lull == lodash with lull's fixes in {} traces; \
         == unpatched lodash in {identical}; documented divergences: flush disarms (lodash#4648) changed {flush_changed} traces, \
         late timer served before a new call (lodash#6003) changed {stall_changed}; undocumented divergences: {}; \
         calls a driver kept under the horizon: {kept}",
        traces.len(),
        traces.len() - divergent.len(),
        divergent.len()
    );
    assert!(kept > TRACES, "the horizon path is barely exercised: {kept} calls kept");
    assert!(divergent.is_empty(), "lull diverges from lodash in traces {divergent:?}");
    // The fixes must really be exercised, or the comparison proves less than it claims.
    assert!(flush_changed > 0 && stall_changed > 0, "the traces never exercise a documented difference");
    assert!(invocations > 5 * TRACES, "too few invocations to mean much: {invocations}");
}
