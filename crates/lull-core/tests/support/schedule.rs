//! Scheduled runs of a [`Budget`] in virtual time: a scheduler starts a run
//! every `period`, each run pulls from a queue that always has work, handles
//! messages whose durations come from a seeded stream, and ends at `Exit`.
//! Shared by the core's budget tests and `cargo xtask bench` (the budget table).

use core::num::NonZeroU32;

use lull_core::{Budget, BudgetConfig, Step};

use super::Rng;

/// What one run did, as its summary line would say.
#[derive(Clone, Debug, PartialEq)]
pub struct RunLog {
    /// When the scheduler started it.
    pub start: u64,
    /// When it exited.
    pub end: u64,
    /// Messages handled.
    pub handled: u32,
    /// Pulled and released at exit.
    pub released: u32,
    /// The margin at exit.
    pub margin: u64,
    /// Pulls, naps.
    pub pulls: u32,
    pub naps: u32,
    /// Every step the budget answered: the time it was asked, the margin then, the step.
    pub steps: Vec<(u64, u64, Step)>,
    /// Message begun at, and its duration.
    pub begun: Vec<(u64, u64)>,
    /// Messages stopped at the ceiling (the handler timeout): retried, not handled.
    pub cut: u32,
}

impl RunLog {
    /// Ran past the next start.
    pub fn overran(&self, period: u64) -> bool {
        self.end > self.start + period
    }

    /// Share of the period spent handling messages.
    pub fn used(&self, period: u64) -> f64 {
        self.begun.iter().map(|(_, d)| d).sum::<u64>() as f64 / period as f64
    }
}

/// A queue: always holding work, or holding messages that arrive at given times.
pub enum Queue {
    Backlog,
    Arrivals(Vec<u64>),
}

impl Queue {
    /// Up to `max` messages visible at `now`.
    fn pull(&mut self, now: u64, max: u32) -> u32 {
        match self {
            Queue::Backlog => max,
            Queue::Arrivals(at) => {
                let ready = at.iter().filter(|&&t| t <= now).count().min(max as usize);
                let mut taken = 0;
                at.retain(|&t| {
                    let take = t <= now && taken < ready;
                    taken += usize::from(take);
                    !take
                });
                ready as u32
            }
        }
    }

    /// Released messages are visible again at once.
    fn release(&mut self, now: u64, count: u32) {
        if let Queue::Arrivals(at) = self {
            at.extend(std::iter::repeat_n(now, count as usize));
            at.sort_unstable();
        }
    }
}

/// One run from `start` with `config` (its `stop_before` relative to `start`),
/// a pull taking `pull_ms`. Durations come from `duration`.
pub fn run_once(
    config: BudgetConfig,
    history: &[u64],
    start: u64,
    pull_ms: u64,
    queue: &mut Queue,
    duration: &mut dyn FnMut() -> u64,
) -> (RunLog, Vec<u64>) {
    let config = BudgetConfig { stop_before: start + config.stop_before, ..config };
    let mut budget = Budget::new(config, history).expect("a valid budget");
    let mut now = start;
    let mut log = RunLog {
        start,
        end: start,
        handled: 0,
        released: 0,
        margin: 0,
        pulls: 0,
        naps: 0,
        steps: Vec::new(),
        begun: Vec::new(),
        cut: 0,
    };
    for _ in 0..1_000_000 {
        let step = budget.next(now);
        log.steps.push((now, budget.margin(), step));
        match step {
            Step::Pull { max } => {
                now += pull_ms;
                log.pulls += 1;
                match NonZeroU32::new(queue.pull(now, max)) {
                    Some(count) => budget.pulled(count),
                    None => budget.empty(),
                }
            }
            Step::Begin => {
                let wanted = duration();
                // A handler still running at the ceiling is stopped there.
                let d = config.ceiling_ms.map_or(wanted, |ceiling| wanted.min(ceiling));
                log.begun.push((now, d));
                now += d;
                if d < wanted {
                    log.cut += 1;
                } else {
                    log.handled += 1;
                }
                budget.handled(d);
            }
            Step::Idle { until } => {
                log.naps += 1;
                now = until;
            }
            Step::Exit { release } => {
                queue.release(now, release);
                log.released = release;
                log.end = now;
                log.margin = budget.margin();
                return (log, budget.durations());
            }
        }
    }
    panic!("a run that never exits: {:?}", log.steps.last());
}

/// `runs` runs started every `period` over a backlog, each keeping the
/// durations the last left (as `lull pull` keeps them in its state file).
pub fn scheduled(
    config: BudgetConfig,
    runs: usize,
    period: u64,
    pull_ms: u64,
    duration: &mut dyn FnMut() -> u64,
) -> Vec<RunLog> {
    let mut history = Vec::new();
    (0..runs as u64)
        .map(|i| {
            let (log, kept) = run_once(config, &history, i * period, pull_ms, &mut Queue::Backlog, duration);
            history = kept;
            log
        })
        .collect()
}

/// The bench's heavy-tailed stream: log-normal around 2 s (sigma 0.25),
/// and one message in fifty 10× slower.
pub fn heavy_tail(seed: u64) -> impl FnMut() -> u64 {
    let mut rng = Rng(seed);
    move || {
        let base = rng.log_normal(2_000.0, 0.25);
        let slow = rng.below(50) == 0;
        (if slow { base * 10.0 } else { base }).round().max(1.0) as u64
    }
}
