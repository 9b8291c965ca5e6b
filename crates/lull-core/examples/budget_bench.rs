//! `cargo xtask bench`'s budget table: eight days of one-minute runs
//! (virtual time) over seeded streams of handler durations, for the seed's margin
//! (tolerance × mean) and lull's default (tolerance × the 99.5th percentile of
//! the kept durations). Prints the table and writes JSON to the path given.
//!
//!     cargo run --release -p lull-core --example budget_bench -- target/bench/budget.json

#[path = "../tests/support/mod.rs"]
mod support;

use lull_core::{BudgetConfig, Margin};
use support::schedule::{heavy_tail, scheduled};

/// One scheduled run a minute, for a day ...
const RUNS: usize = 1_440;
/// ... for eight days, each with its own seed.
const DAYS: u64 = 8;
const PERIOD_MS: u64 = 60_000;
/// A pull's round trip.
const PULL_MS: u64 = 50;
/// lull pull's default handler timeout: a handler still running then is
/// stopped and its window retried (a cut), so the margin never needs more.
const HANDLER_TIMEOUT_MS: u64 = 30_000;
/// The goal on the constant stream: the seed's 55 of 60 s.
const SHARE_GOAL: f64 = 0.92;

/// A stream of handler durations (ms) for the day with this seed.
type Stream = fn(u64) -> Box<dyn FnMut() -> u64>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1).ok_or("usage: budget_bench OUT.json")?;
    let rules = [
        ("seed: 2 × mean", Margin::Mean, None),
        ("lull: 2 × p99.5 of 1,024 kept, handler timeout 30 s", Margin::default(), Some(HANDLER_TIMEOUT_MS)),
    ];
    let streams: [(&str, Stream); 2] = [
        ("constant 2 s", |_| Box::new(|| 2_000)),
        ("heavy tail: log-normal 2 s, 1 in 50 10× slower", |seed| Box::new(heavy_tail(seed))),
    ];
    let mut rows = Vec::new();
    println!(
        "{:<50} {:<52} {:>8} {:>8} {:>9} {:>8} {:>5}",
        "stream", "margin", "share", "lowest", "overruns", "windows", "cut"
    );
    for (stream, make) in streams {
        for (rule, margin, ceiling_ms) in rules {
            let config = BudgetConfig { stop_before: PERIOD_MS, margin, ceiling_ms, ..BudgetConfig::default() };
            let runs: Vec<_> =
                (0..DAYS).flat_map(|day| scheduled(config, RUNS, PERIOD_MS, PULL_MS, &mut make(day))).collect();
            // The runs past the minute: which day and run, when their last message began and how long it took.
            let overran: Vec<_> = (runs.iter().enumerate())
                .filter(|(_, r)| r.overran(PERIOD_MS))
                .map(|(i, r)| {
                    let (at, took) = r.begun.last().copied().unwrap_or_default();
                    serde_json::json!({ "day": i / RUNS, "run": i % RUNS, "last_began_ms": at - r.start, "last_took_ms": took })
                })
                .collect();
            let shares: Vec<f64> = runs.iter().map(|r| r.used(PERIOD_MS)).collect();
            let share = shares.iter().sum::<f64>() / shares.len() as f64;
            let lowest = shares.iter().copied().fold(f64::INFINITY, f64::min);
            let overruns = overran.len();
            let worst = runs.iter().map(|r| r.end - r.start).max().unwrap_or(0);
            let cut = runs.iter().map(|r| u64::from(r.cut)).sum::<u64>();
            let windows = runs.iter().map(|r| u64::from(r.handled)).sum::<u64>() as f64 / runs.len() as f64;
            println!("{stream:<50} {rule:<52} {share:>8.3} {lowest:>8.3} {overruns:>9} {windows:>8.1} {cut:>5}");
            rows.push(serde_json::json!({
                "stream": stream, "margin": rule, "runs": runs.len(), "share": share, "lowest_share": lowest,
                "overruns": overruns, "longest_run_ms": worst, "windows_per_run": windows, "cut": cut,
                "overran": &overran[..overruns.min(20)],
            }));
        }
    }
    let report = serde_json::json!({
        "goal": format!("0 runs past the minute on both streams; a share of each minute used ≥ {SHARE_GOAL} on the constant stream"),
        "runs": RUNS as u64 * DAYS, "period_ms": PERIOD_MS, "pull_ms": PULL_MS, "tolerance": 2, "rows": rows,
    });
    std::fs::write(&out, serde_json::to_string_pretty(&report)?)?;
    Ok(())
}
