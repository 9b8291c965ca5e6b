//! The budget of a scheduled consumer, in virtual time: its promises as
//! properties over random settings and streams, and ten one-minute runs
//! whose log reads like the seed's.

mod support;

use lull_core::{Basis, BudgetConfig, Margin, Step};
use proptest::prelude::*;
use support::Rng;
use support::schedule::{Queue, RunLog, run_once, scheduled};

fn config() -> impl Strategy<Value = BudgetConfig> {
    let margin = prop_oneof![Just(Margin::Mean), (1..=1000u16).prop_map(|per_mille| Margin::Percentile { per_mille })];
    let ceiling = prop::option::of(1..60_000u64);
    (1_000..120_000u64, 1..5_000u64, 100..400u32, 1..10_000u64, 1..=100u32, margin, ceiling).prop_map(
        |(stop_before, estimate_ms, tolerance_percent, idle_ms, max_batch, margin, ceiling_ms)| BudgetConfig {
            stop_before,
            estimate_ms,
            tolerance_percent,
            idle_ms,
            max_batch,
            margin,
            ceiling_ms,
        },
    )
}

/// The promises every run keeps, whatever its settings and stream.
fn keeps_its_promises(log: &RunLog, stop_before: u64) -> Result<(), TestCaseError> {
    for &(now, margin, step) in &log.steps {
        match step {
            Step::Begin => prop_assert!(now + margin < stop_before, "began at {now} with margin {margin}"),
            Step::Idle { until } => {
                prop_assert!(until > now && until + margin < stop_before, "napped from {now} to {until}")
            }
            Step::Pull { max } => prop_assert!(max >= 1 && u64::from(max) * margin <= stop_before - now),
            Step::Exit { .. } => {}
        }
    }
    prop_assert!(matches!(log.steps.last(), Some((_, _, Step::Exit { .. }))), "ends in Exit");
    let exits = log.steps.iter().filter(|(_, _, s)| matches!(s, Step::Exit { .. })).count();
    prop_assert_eq!(exits, 1);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Over a backlog or messages arriving now and then: it never begins a
    /// message when `now + margin ≥ stop_before`, never sleeps past
    /// `stop_before`, pulls only what fits, and always ends in one `Exit`.
    #[test]
    fn a_run_never_begins_late_never_oversleeps_and_ends(
        config in config(),
        durations in prop::collection::vec(0..10_000u64, 1..40),
        history in prop::collection::vec(0..20_000u64, 0..40),
        arrivals in prop::option::of(prop::collection::vec(0..120_000u64, 0..60)),
        pull_ms in 1..500u64,
    ) {
        let mut stream = durations.iter().copied().cycle();
        let mut queue = match arrivals {
            Some(mut at) => { at.sort_unstable(); Queue::Arrivals(at) }
            None => Queue::Backlog,
        };
        let (log, kept) = run_once(config, &history, 0, pull_ms, &mut queue, &mut || stream.next().unwrap_or(0));
        keeps_its_promises(&log, config.stop_before)?;
        prop_assert!(kept.len() <= lull_core::DURATION_WINDOW);
        if let Some(ceiling) = config.ceiling_ms
            && ceiling <= config.stop_before * lull_core::MAX_MARGIN_PERCENT / 100
        {
            // Each message ends within the ceiling of its begin; only a pull begun just before may end later.
            prop_assert!(log.end <= config.stop_before + ceiling + pull_ms, "past stop and ceiling: {}", log.end);
            // While the ceiling is the margin (a percentile warming up), no run ends past its stop.
            if matches!(config.margin, Margin::Percentile { .. }) && history.len() + log.begun.len() < lull_core::WARM_DURATIONS {
                prop_assert!(log.end <= config.stop_before + pull_ms, "warming up, past its stop: {}", log.end);
            }
        }
        if let Queue::Backlog = queue {
            prop_assert!(log.end + log.margin >= config.stop_before, "a backlog run stops only when no message fits");
        }
    }

    /// With constant durations, a backlog run handles within one duration (and
    /// its pulls) of what the budget allows: messages begin until
    /// `stop_before - margin`. (A ceiling stops longer ones there.)
    #[test]
    fn constant_durations_use_what_the_budget_allows(
        config in config(),
        duration in 1..8_000u64,
        pull_ms in 1..200u64,
    ) {
        let (log, _) = run_once(config, &[], 0, pull_ms, &mut Queue::Backlog, &mut || duration);
        keeps_its_promises(&log, config.stop_before)?;
        let allowed = config.stop_before.saturating_sub(log.margin);
        let duration = config.ceiling_ms.map_or(duration, |ceiling| duration.min(ceiling));
        let handled = log.begun.len() as u64 * duration;
        prop_assert!(
            handled + duration + u64::from(log.pulls) * pull_ms >= allowed,
            "handled {handled} ms with {} pulls of {pull_ms} ms; the budget allowed {allowed} ms", log.pulls
        );
    }
}

/// The seed's log: ten one-minute runs with 1–3 s handlers, each ending
/// within [60 s − margin, 60 s], none past 60 s.
#[test]
fn ten_one_minute_runs_read_like_the_seed() {
    let mut rng = Rng(3);
    let config = BudgetConfig { stop_before: 60_000, ..BudgetConfig::default() };
    let runs = scheduled(config, 10, 60_000, 50, &mut || 1_000 + rng.below(2_001));
    for (i, run) in runs.iter().enumerate() {
        let took = run.end - run.start;
        println!(
            "run {i}: {} windows, ended after {:.1} s, margin {:.1} s, released {}",
            run.handled,
            took as f64 / 1e3,
            run.margin as f64 / 1e3,
            run.released
        );
        assert!(!run.overran(60_000), "run {i} ended past 60 s: {took} ms");
        assert!(took >= 60_000 - run.margin, "run {i} stopped early: {took} ms, margin {}", run.margin);
        assert!(run.margin <= 6_000, "2 × the longest of 1–3 s: {}", run.margin);
        assert!(run.handled >= 18, "about 27 windows of 2 s in 54–58 s: {}", run.handled);
    }
}

/// A slow message in a steady stream widens the margin at once, and once 200
/// durations are kept it no longer counts.
#[test]
fn one_slow_message_widens_the_margin_and_is_forgotten() {
    let config = BudgetConfig { stop_before: 60_000, ..BudgetConfig::default() };
    let mut n = 0;
    let runs = scheduled(config, 20, 60_000, 50, &mut || {
        n += 1;
        if n == 5 { 15_000 } else { 2_000 }
    });
    assert_eq!(runs[0].margin, 30_000, "the run that saw it keeps 2 × 15 s");
    let later = runs.iter().position(|r| r.margin == 4_000).expect("forgotten");
    let before: u32 = runs[..later].iter().map(|r| r.handled).sum();
    assert!(before < 200 && before + runs[later].handled >= 200, "forgotten in the run that keeps the 200th: {before}");
    assert!(runs[1..later].iter().all(|r| r.margin == 30_000), "until then it counts");
}

/// The statistic a summary names.
#[test]
fn the_basis_names_the_statistic() {
    let config = BudgetConfig { stop_before: 60_000, margin: Margin::Mean, ..BudgetConfig::default() };
    let (log, kept) = run_once(config, &[7_000], 0, 10, &mut Queue::Backlog, &mut || 2_000);
    assert_eq!(log.margin, 4_000, "the mean of this run's durations, not the history's");
    assert_eq!(kept.len(), 1 + log.begun.len(), "yet it keeps them for later runs");
    let mut budget = lull_core::Budget::new(config, &[]).expect("valid");
    assert_eq!(budget.statistic().1, Basis::Estimate);
    budget.handled(1_000);
    assert_eq!(budget.statistic(), (1_000, Basis::Mean { samples: 1 }));
}
