//! A time budget for a consumer that a scheduler starts once a period and that
//! should behave like one running all the time: take work while it fits, nap
//! when the queue is empty, and stop with a margin before the next start.
//!
//! [`Budget`] decides; its driver pulls, runs handlers, sleeps and tells the
//! time, as with the rest of the core (no clock, no I/O). Times are
//! milliseconds on the driver's clock.
//!
//! ```
//! use core::num::NonZeroU32;
//! use lull_core::{Budget, BudgetConfig, Step};
//!
//! // A one-minute run: stop before 60 s, 2 s per message expected, 2× margin.
//! let mut budget = Budget::new(BudgetConfig { stop_before: 60_000, ..BudgetConfig::default() }, &[])?;
//! assert_eq!(budget.next(0), Step::Pull { max: 10 });
//! budget.pulled(NonZeroU32::MIN); // one message came
//! assert_eq!(budget.next(10), Step::Begin);
//! budget.handled(2_000); // it took 2 s
//! assert_eq!(budget.margin(), 4_000);
//! budget.empty(); // the next pull found nothing
//! assert_eq!(budget.next(2_100), Step::Idle { until: 7_100 });
//! assert_eq!(budget.next(56_000), Step::Exit { release: 0 }); // 56 s + 4 s is not before 60 s
//! # Ok::<(), lull_core::BudgetError>(())
//! ```

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::num::NonZeroU32;

/// How many recent durations the margin looks at, across runs when the
/// driver keeps them ([`Budget::durations`], [`Budget::new`]'s `history`).
pub const DURATION_WINDOW: usize = 1024;

/// Durations known before the margin trusts them over the ceiling
/// ([`BudgetConfig::ceiling_ms`]): from 200 on, the 99.5th percentile is no
/// longer simply the longest seen.
pub const WARM_DURATIONS: usize = 200;

/// The longest margin, as a share of the run: a run always has its first
/// quarter to begin messages in.
pub const MAX_MARGIN_PERCENT: u64 = 75;

/// The largest batch a budget asks for (Cloudflare's pull API takes 1–100).
pub const MAX_BATCH: u32 = 100;

/// The statistic of measured durations the margin multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Margin {
    /// The mean of the durations measured in this run (the seed's rule:
    /// tolerance × mean). A rare slow message begun near the end overruns.
    Mean,
    /// A high percentile (nearest rank, in per mille) of the last
    /// [`DURATION_WINDOW`] durations, this run's and those the driver kept
    /// from earlier runs.
    ///
    /// The default is the 99.5th: below 200 kept, the longest; with 1,024
    /// kept, the sixth longest. A single slow message is forgotten once 200
    /// durations are kept, while a tail that recurs (one in fifty 10× slower)
    /// keeps the margin above it. Chosen in `cargo xtask bench` (eight seeded
    /// days of one-minute runs, `BENCH.md`): with a ceiling (the handler
    /// timeout) it overran no run on a constant or a heavy-tailed stream and
    /// used the mean's share of the minute on the constant one, where the
    /// mean overran about one run in eight on the heavy tail. Over 512 kept,
    /// or without the ceiling's warm-up, runs overran that had not yet met
    /// (or no longer held three of) the slow messages.
    Percentile {
        /// 1..=1000: 995 is the 99.5th percentile.
        per_mille: u16,
    },
}

impl Default for Margin {
    /// The 99.5th percentile of the kept durations.
    fn default() -> Self {
        Margin::Percentile { per_mille: 995 }
    }
}

/// The settings of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetConfig {
    /// The time by which the run must have ended: its start + its timeout.
    pub stop_before: u64,
    /// A message's expected duration (ms), until one is measured.
    pub estimate_ms: u64,
    /// The margin as a percentage of the statistic (200 = 2×); at least 100.
    pub tolerance_percent: u32,
    /// How long to nap on an empty queue (ms); at least 1.
    pub idle_ms: u64,
    /// The most messages one pull asks for: 1..=[`MAX_BATCH`].
    pub max_batch: u32,
    /// The statistic the margin multiplies.
    pub margin: Margin,
    /// The longest a message can take, if something stops it then (the
    /// handler timeout). The margin never exceeds it, and until
    /// [`WARM_DURATIONS`] are known it is the margin: a run assumes the worst
    /// its handlers may do until it has seen enough of them to know better.
    pub ceiling_ms: Option<u64>,
}

impl Default for BudgetConfig {
    /// `stop_before` 0 (set it), 2 s estimate, 2× tolerance, 5 s idle,
    /// batches of 10, the 99.5th percentile, no ceiling.
    fn default() -> Self {
        BudgetConfig {
            stop_before: 0,
            estimate_ms: 2_000,
            tolerance_percent: 200,
            idle_ms: 5_000,
            max_batch: 10,
            margin: Margin::default(),
            ceiling_ms: None,
        }
    }
}

/// A [`BudgetConfig`] the budget cannot run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetError {
    /// `tolerance_percent` below 100: the margin would be shorter than a message.
    Tolerance(u32),
    /// `idle_ms` of 0: a nap that lets no time pass.
    Idle,
    /// `estimate_ms` of 0.
    Estimate,
    /// `ceiling_ms` of 0.
    Ceiling,
    /// `max_batch` outside 1..=[`MAX_BATCH`].
    Batch(u32),
    /// A percentile outside 1..=1000 per mille.
    Percentile(u16),
}

impl core::fmt::Display for BudgetError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BudgetError::Tolerance(t) => write!(f, "tolerance {t}% is below 100%: the margin must cover a message"),
            BudgetError::Idle => f.write_str("idle must be at least 1 ms"),
            BudgetError::Estimate => f.write_str("estimate must be at least 1 ms"),
            BudgetError::Ceiling => f.write_str("the ceiling (handler timeout) must be at least 1 ms"),
            BudgetError::Batch(b) => write!(f, "batch {b} is outside 1..={MAX_BATCH}"),
            BudgetError::Percentile(p) => write!(f, "percentile {p}‰ is outside 1..=1000"),
        }
    }
}

impl core::error::Error for BudgetError {}

/// What the driver does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Pull up to `max` messages (never more than fit before `stop_before`,
    /// each counted at the margin), then tell [`Budget::pulled`] or
    /// [`Budget::empty`].
    Pull {
        /// At least 1.
        max: u32,
    },
    /// Begin the next message in hand, then tell [`Budget::handled`].
    Begin,
    /// The queue was empty: sleep until then (before `stop_before`), then ask again.
    Idle {
        /// Driver time to wake at.
        until: u64,
    },
    /// The run is over: release the `release` messages still in hand (they
    /// would begin too late) so they are available again at once. Final.
    Exit {
        /// Messages pulled and not begun.
        release: u32,
    },
}

/// What set the margin ([`Budget::limited_by`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Tolerance × the statistic.
    Statistic,
    /// The ceiling (the handler timeout): the statistic asked for more, or
    /// too few durations are known yet.
    Ceiling,
    /// [`MAX_MARGIN_PERCENT`] of the run.
    Run,
}

/// Where the current margin came from (for a run's summary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// No duration measured yet: the estimate.
    Estimate,
    /// The mean of `samples` durations.
    Mean {
        /// Durations measured this run.
        samples: usize,
    },
    /// A percentile of `samples` kept durations.
    Percentile {
        /// 1..=1000.
        per_mille: u16,
        /// Durations kept (this run's and earlier ones).
        samples: usize,
    },
}

/// The decisions of one budgeted run (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Budget {
    config: BudgetConfig,
    /// The last [`DURATION_WINDOW`] durations, oldest first.
    recent: VecDeque<u64>,
    /// This run's durations: their sum and count (for [`Margin::Mean`]).
    run_total: u64,
    run_count: usize,
    /// The statistic the margin multiplies, and where it came from.
    statistic: u64,
    basis: Basis,
    /// Messages pulled and not begun.
    held: u32,
    /// The last pull was empty: nap before the next.
    nap: bool,
    /// The first time asked: the run's start.
    start: Option<u64>,
    /// The latest time seen (time never goes backwards).
    now: u64,
    over: bool,
}

impl Budget {
    /// A run with `config`, learning from `history` (durations kept from
    /// earlier runs, oldest first; only the last [`DURATION_WINDOW`] count;
    /// [`Margin::Mean`] keeps them for later runs but measures this one afresh).
    pub fn new(config: BudgetConfig, history: &[u64]) -> Result<Budget, BudgetError> {
        if config.tolerance_percent < 100 {
            return Err(BudgetError::Tolerance(config.tolerance_percent));
        }
        if config.idle_ms == 0 {
            return Err(BudgetError::Idle);
        }
        if config.estimate_ms == 0 {
            return Err(BudgetError::Estimate);
        }
        if config.ceiling_ms == Some(0) {
            return Err(BudgetError::Ceiling);
        }
        if !(1..=MAX_BATCH).contains(&config.max_batch) {
            return Err(BudgetError::Batch(config.max_batch));
        }
        if let Margin::Percentile { per_mille } = config.margin
            && !(1..=1000).contains(&per_mille)
        {
            return Err(BudgetError::Percentile(per_mille));
        }
        let keep = history.len().saturating_sub(DURATION_WINDOW);
        let mut budget = Budget {
            config,
            recent: VecDeque::with_capacity(DURATION_WINDOW),
            run_total: 0,
            run_count: 0,
            statistic: config.estimate_ms,
            basis: Basis::Estimate,
            held: 0,
            nap: false,
            start: None,
            now: 0,
            over: false,
        };
        budget.recent.extend(history.iter().skip(keep).copied());
        budget.relearn();
        Ok(budget)
    }

    /// What to do at `now`.
    pub fn next(&mut self, now: u64) -> Step {
        self.now = self.now.max(now);
        let now = self.now;
        self.start.get_or_insert(now);
        if self.over || now.saturating_add(self.margin()) >= self.config.stop_before {
            return self.exit();
        }
        if self.held > 0 {
            self.held -= 1;
            return Step::Begin;
        }
        if self.nap {
            self.nap = false;
            // Until the latest time a message may still begin (when that is
            // now, no nap: a last pull).
            let last_begin = self.config.stop_before - self.margin() - 1;
            let until = now.saturating_add(self.config.idle_ms).min(last_begin);
            if until > now {
                return Step::Idle { until };
            }
        }
        let fit = (self.config.stop_before - now) / self.margin();
        Step::Pull { max: u32::try_from(fit).unwrap_or(u32::MAX).clamp(1, self.config.max_batch) }
    }

    /// A pull brought `count` messages: [`Step::Begin`] each while they fit.
    pub fn pulled(&mut self, count: NonZeroU32) {
        self.held = self.held.saturating_add(count.get());
        self.nap = false;
    }

    /// A pull found the queue empty: the next step naps.
    pub fn empty(&mut self) {
        self.nap = true;
    }

    /// The message begun last took `duration_ms` (whether it succeeded or not).
    pub fn handled(&mut self, duration_ms: u64) {
        if self.recent.len() == DURATION_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(duration_ms);
        self.run_total = self.run_total.saturating_add(duration_ms);
        self.run_count += 1;
        self.relearn();
    }

    /// The time kept free before `stop_before`: no message begins later
    /// than `stop_before - margin`. Tolerance × the statistic, bounded by the
    /// ceiling (and, for a percentile, the ceiling itself until
    /// [`WARM_DURATIONS`] are known);
    /// at least 1 ms, and at most [`MAX_MARGIN_PERCENT`] of the run (from the
    /// first [`Budget::next`]): a margin as long as the run would begin
    /// nothing, and so never learn that messages got quicker.
    pub fn margin(&self) -> u64 {
        self.bounded_margin().0
    }

    /// What set the margin now: tolerance × the statistic, the ceiling, or
    /// the run's length.
    pub fn limited_by(&self) -> Limit {
        self.bounded_margin().1
    }

    fn bounded_margin(&self) -> (u64, Limit) {
        let mut margin =
            (self.statistic.saturating_mul(u64::from(self.config.tolerance_percent)) / 100, Limit::Statistic);
        if let Some(ceiling) = self.config.ceiling_ms {
            let warming = matches!(self.config.margin, Margin::Percentile { .. }) && self.recent.len() < WARM_DURATIONS;
            if warming || margin.0 > ceiling {
                margin = (ceiling, Limit::Ceiling);
            }
        }
        let most = self
            .start
            .map_or(u64::MAX, |start| self.config.stop_before.saturating_sub(start) / 100 * MAX_MARGIN_PERCENT);
        if margin.0 > most {
            margin = (most, Limit::Run);
        }
        (margin.0.max(1), margin.1)
    }

    /// The statistic the margin multiplies (ms), and where it came from.
    pub fn statistic(&self) -> (u64, Basis) {
        (self.statistic, self.basis)
    }

    /// The durations to keep for the next run, oldest first (at most
    /// [`DURATION_WINDOW`]: earlier runs' and this one's, whatever the rule,
    /// so a run with [`Margin::Mean`] does not lose them).
    pub fn durations(&self) -> Vec<u64> {
        self.recent.iter().copied().collect()
    }

    /// This run's settings.
    pub fn config(&self) -> &BudgetConfig {
        &self.config
    }

    fn exit(&mut self) -> Step {
        self.over = true;
        Step::Exit { release: core::mem::take(&mut self.held) }
    }

    /// The statistic from what is known now.
    fn relearn(&mut self) {
        (self.statistic, self.basis) = match self.config.margin {
            Margin::Mean if self.run_count > 0 => {
                (self.run_total / self.run_count as u64, Basis::Mean { samples: self.run_count })
            }
            Margin::Percentile { per_mille } if !self.recent.is_empty() => {
                let mut kept: Vec<u64> = self.recent.iter().copied().collect();
                let n = kept.len();
                // Nearest rank: the smallest value with at least p of them at or below it.
                let rank = (n * usize::from(per_mille)).div_ceil(1000).clamp(1, n);
                let (_, &mut value, _) = kept.select_nth_unstable(rank - 1);
                (value, Basis::Percentile { per_mille, samples: n })
            }
            _ => (self.config.estimate_ms, Basis::Estimate),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(margin: Margin, history: &[u64]) -> Budget {
        let config = BudgetConfig { stop_before: 60_000, margin, ..BudgetConfig::default() };
        Budget::new(config, history).expect("a valid budget")
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        let bad = |config: BudgetConfig| Budget::new(config, &[]).err();
        let ok = BudgetConfig { stop_before: 1, ..BudgetConfig::default() };
        assert_eq!(bad(BudgetConfig { tolerance_percent: 99, ..ok }), Some(BudgetError::Tolerance(99)));
        assert_eq!(bad(BudgetConfig { idle_ms: 0, ..ok }), Some(BudgetError::Idle));
        assert_eq!(bad(BudgetConfig { estimate_ms: 0, ..ok }), Some(BudgetError::Estimate));
        assert_eq!(bad(BudgetConfig { max_batch: 0, ..ok }), Some(BudgetError::Batch(0)));
        assert_eq!(bad(BudgetConfig { max_batch: 101, ..ok }), Some(BudgetError::Batch(101)));
        let p = |per_mille| BudgetConfig { margin: Margin::Percentile { per_mille }, ..ok };
        assert_eq!(bad(p(0)), Some(BudgetError::Percentile(0)));
        assert_eq!(bad(p(1001)), Some(BudgetError::Percentile(1001)));
        assert!(bad(p(1000)).is_none());
    }

    #[test]
    fn the_estimate_until_a_duration_is_measured_then_the_statistic() {
        let mut mean = budget(Margin::Mean, &[9_000]);
        assert_eq!((mean.margin(), mean.statistic().1), (4_000, Basis::Estimate), "the mean measures each run afresh");
        assert_eq!(mean.durations(), [9_000], "but keeps the history for later runs");
        mean.handled(1_000);
        mean.handled(3_000);
        assert_eq!((mean.margin(), mean.statistic().1), (4_000, Basis::Mean { samples: 2 }));
        let mut high = budget(Margin::default(), &[]);
        assert_eq!(high.statistic(), (2_000, Basis::Estimate));
        for d in [1_000, 3_000, 2_000] {
            high.handled(d);
        }
        assert_eq!(high.statistic(), (3_000, Basis::Percentile { per_mille: 995, samples: 3 }));
        assert_eq!(high.durations(), [1_000, 3_000, 2_000]);
    }

    #[test]
    fn the_percentile_keeps_a_recurring_tail_and_forgets_one_slow_message() {
        // One 20 s message among 2 s ones: once 200 are kept it is past the 99.5th percentile.
        let mut history = alloc::vec![2_000; 198];
        history.push(20_000);
        assert_eq!(budget(Margin::default(), &history).statistic().0, 20_000, "199 kept: still the top rank");
        history.insert(0, 2_000);
        assert_eq!(budget(Margin::default(), &history).statistic().0, 2_000, "200 kept: forgotten");
        // One in 150 is a tail: kept with a full window.
        let mut tail = alloc::vec![2_000; DURATION_WINDOW + 100];
        for slow in tail.iter_mut().step_by(150) {
            *slow = 20_000;
        }
        let b = budget(Margin::default(), &tail);
        assert_eq!(b.durations().len(), DURATION_WINDOW, "only the window is kept");
        assert_eq!(b.statistic().0, 20_000);
        assert_eq!(b.margin(), 40_000);
    }

    #[test]
    fn the_ceiling_is_the_margin_until_enough_is_known_then_bounds_it() {
        let config = BudgetConfig { stop_before: 60_000, ceiling_ms: Some(10_000), ..BudgetConfig::default() };
        let warm = alloc::vec![2_000; WARM_DURATIONS - 1];
        let mut b = Budget::new(config, &warm).expect("valid");
        assert_eq!((b.margin(), b.limited_by()), (10_000, Limit::Ceiling), "199 known: the ceiling");
        b.handled(2_000);
        assert_eq!(b.margin(), 4_000, "200 known: 2 × the 99.5th percentile");
        for _ in 0..10 {
            b.handled(30_000);
        }
        assert_eq!(
            (b.margin(), b.limited_by()),
            (10_000, Limit::Ceiling),
            "never above the ceiling: nothing runs longer"
        );
        let mut mean = Budget::new(BudgetConfig { margin: Margin::Mean, ..config }, &[]).expect("valid");
        mean.handled(2_000);
        assert_eq!((mean.margin(), mean.limited_by()), (4_000, Limit::Statistic), "the mean has no warm-up");
        assert_eq!(Budget::new(BudgetConfig { ceiling_ms: Some(0), ..config }, &[]).err(), Some(BudgetError::Ceiling));
    }

    #[test]
    fn a_pull_asks_only_for_what_fits_and_at_least_one() {
        let mut b = budget(Margin::default(), &[]); // margin 4 s
        assert_eq!(b.next(0), Step::Pull { max: 10 });
        assert_eq!(b.next(40_000), Step::Pull { max: 5 }, "20 s left: five messages at the margin");
        assert_eq!(b.next(55_999), Step::Pull { max: 1 });
        assert_eq!(b.next(56_000), Step::Exit { release: 0 });
        assert_eq!(b.next(0), Step::Exit { release: 0 }, "exit is final, and time never goes back");
    }

    #[test]
    fn messages_in_hand_begin_while_they_fit_and_the_rest_are_released() {
        let mut b = budget(Margin::default(), &[]);
        b.pulled(NonZeroU32::new(3).expect("3"));
        assert_eq!(b.next(50_000), Step::Begin);
        b.handled(3_000); // margin now 6 s
        assert_eq!(b.next(53_000), Step::Begin);
        b.handled(1_000);
        assert_eq!(b.next(54_000), Step::Exit { release: 1 }, "54 s + 6 s is not before 60 s");
    }

    #[test]
    fn an_empty_queue_naps_for_idle_and_the_last_nap_ends_when_a_message_may_still_begin() {
        let mut b = budget(Margin::default(), &[]);
        b.empty();
        assert_eq!(b.next(1_000), Step::Idle { until: 6_000 });
        assert_eq!(b.next(6_000), Step::Pull { max: 10 }, "after a nap, a pull");
        b.empty();
        assert_eq!(b.next(53_000), Step::Idle { until: 55_999 }, "stop 60 s - margin 4 s - 1 ms");
        assert_eq!(b.next(55_999), Step::Pull { max: 1 });
        b.empty();
        assert_eq!(b.next(55_999), Step::Pull { max: 1 }, "no time left to nap: a last pull, not a nap of 0 ms");
    }
}
