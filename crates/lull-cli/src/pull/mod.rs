//! `lull pull`: a run a scheduler starts once a period that behaves like a
//! consumer running all the time. [`lull_core::Budget`] decides when to
//! pull, begin, nap and stop; this shell does the I/O: Cloudflare's pull API
//! ([`lull_client::PullQueue`]), the handler command ([`handler`]), the
//! durations kept between runs ([`state`]) and what it says ([`report`]).
//!
//! Its promises: a message is begun only while it fits the budget; every
//! message pulled and not begun is given back at once when the run ends
//! (never left to its visibility timeout); the visibility asked for outlasts
//! the run and the handler timeout, so no lease expires before its ack; a
//! window handled in this run and delivered again is acked without running
//! the handler; SIGTERM or SIGINT lets the window in hand finish (a second
//! one stops it and gives it back), gives the rest back and ends the run.

pub mod handler;
pub mod report;
pub mod state;

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use lull_client::{LeaseId, Message, PullQueue, Retry, Seen};
use lull_core::{Budget, BudgetConfig, BudgetError, Step};
use serde::de::IgnoredAny;
use tokio::sync::watch;

use crate::exit;
use crate::failure::Failure;
use crate::pull_args::PullArgs;
use handler::{Ended, Handler};
use report::{Counts, EndedBy, Reporter, Summary, WindowLine};

/// Visibility asked for beyond the run's remaining time and the handler
/// timeout: room for the last ack to travel, its retries included
/// (`lull_client::defaults`: a pull API call takes at most 10 s of retries
/// plus a 30 s request).
pub const SETTLE_SLACK: Duration = Duration::from_secs(60);
/// The longest a failed window waits before it is delivered again; the
/// delay doubles from 1 s with the queue's count of its deliveries.
pub const MAX_FAILURE_DELAY: Duration = Duration::from_secs(60 * 60);

/// The delay before a failed window comes back: 1 s on its first delivery,
/// doubling with each, at most [`MAX_FAILURE_DELAY`].
pub fn failure_delay(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(20);
    Duration::from_secs(1u64 << doublings).min(MAX_FAILURE_DELAY)
}

/// Whole milliseconds (saturating).
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Run `lull pull` with `args`: `Ok` when the run ended at its budget with
/// every handled window acked; otherwise the failure and its exit code.
pub async fn run(args: PullArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let config = BudgetConfig {
        stop_before: ms(args.budget),
        estimate_ms: ms(args.estimate),
        tolerance_percent: (args.tolerance * 100.0).round().clamp(0.0, f64::from(u32::MAX)) as u32,
        idle_ms: ms(args.idle),
        max_batch: u32::from(args.batch),
        margin: args.margin,
        ceiling_ms: Some(ms(args.handler_timeout)),
    };
    let history = args.state.as_deref().map(state::load).unwrap_or_default();
    let budget = Budget::new(config, &history).map_err(|e| Failure::usage(format!("{e} ({})", flag_of(e))))?;
    let handler = Handler { command: args.command.clone(), timeout: args.handler_timeout };
    let mut run = Run {
        queue: &args.queue,
        handler,
        budget,
        reporter: Reporter::new(args.json),
        started,
        held: VecDeque::new(),
        seen: Seen::default(),
        counts: Counts::default(),
        interrupts: interrupts(),
    };
    let (ended_by, error) = run.go().await;
    let error = run.release().await.err().or(error);
    if let Some(path) = &args.state {
        state::save(path, run.budget.durations());
    }
    let (statistic_ms, basis) = run.budget.statistic();
    let (margin_from, samples) = Summary::basis(basis);
    let summary = Summary {
        ended_by: if error.is_some() { EndedBy::QueueApi } else { ended_by },
        counts: run.counts.clone(),
        used_ms: ms(started.elapsed()),
        budget_ms: ms(args.budget),
        margin_ms: run.budget.margin(),
        margin_from,
        statistic_ms,
        tolerance: args.tolerance,
        limited_by: run.budget.limited_by(),
        samples,
        error: error.as_ref().map(|f| f.message.clone()),
    };
    run.reporter.summary(&summary);
    match (error, summary.ended_by) {
        (Some(failure), _) => Err(failure),
        _ if run.counts.failed > 0 => Err(Failure {
            code: exit::HANDLER_FAILED,
            message: format!("windows failed: {} (given back for a retry)", run.counts.failed),
        }),
        (None, EndedBy::Signal) => Err(Failure { code: exit::INTERRUPTED, message: "interrupted".into() }),
        _ => Ok(()),
    }
}

/// The flag behind a budget setting it refused.
fn flag_of(error: BudgetError) -> &'static str {
    match error {
        BudgetError::Tolerance(_) => "--tolerance: at least 1",
        BudgetError::Idle => "--idle",
        BudgetError::Estimate => "--estimate",
        BudgetError::Batch(_) => "--batch",
        BudgetError::Percentile(_) => "--margin",
        BudgetError::Ceiling => "--handler-timeout",
    }
}

/// SIGTERM and SIGINT, counted.
fn interrupts() -> watch::Receiver<u32> {
    use tokio::signal::unix::{SignalKind, signal};
    let (count, interrupts) = watch::channel(0);
    if let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                count.send_modify(|n| *n += 1);
            }
        });
    }
    interrupts
}

/// One run's state.
struct Run<'a> {
    queue: &'a PullQueue,
    handler: Handler,
    budget: Budget,
    reporter: Reporter,
    started: Instant,
    /// Pulled and not begun.
    held: VecDeque<Message<IgnoredAny>>,
    seen: Seen,
    counts: Counts,
    interrupts: watch::Receiver<u32>,
}

impl Run<'_> {
    fn now(&self) -> u64 {
        ms(self.started.elapsed())
    }

    /// Resolves once `n` interrupts have come.
    fn interrupted(&self, n: u32) -> impl Future<Output = ()> + use<> {
        let mut interrupts = self.interrupts.clone();
        async move {
            if interrupts.wait_for(|count| *count >= n).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Pull, begin and nap as the budget says, until it says exit (or a
    /// signal, or the queue's API fails).
    async fn go(&mut self) -> (EndedBy, Option<Failure>) {
        loop {
            if *self.interrupts.borrow() > 0 {
                return (EndedBy::Signal, None);
            }
            let step = self.budget.next(self.now());
            let doing = match step {
                Step::Pull { .. } => "pulling",
                Step::Begin => "handling",
                Step::Idle { .. } => "idle",
                Step::Exit { .. } => "done",
            };
            let budget = Duration::from_millis(self.budget.config().stop_before);
            self.reporter.status(&self.counts, self.started.elapsed(), budget, self.budget.margin(), doing);
            let done = match step {
                Step::Pull { max } => self.pull(max).await,
                Step::Begin => self.begin().await,
                Step::Idle { until } => {
                    self.counts.idles += 1;
                    let wake = tokio::time::Instant::from_std(self.started + Duration::from_millis(until));
                    tokio::select! {
                        () = tokio::time::sleep_until(wake) => {}
                        () = self.interrupted(1) => {}
                    }
                    Ok(())
                }
                Step::Exit { .. } => return (EndedBy::Budget, None),
            };
            if let Err(failure) = done {
                return (EndedBy::QueueApi, Some(failure));
            }
        }
    }

    /// Pull up to `max`; ack at once what this run already handled.
    async fn pull(&mut self, max: u32) -> Result<(), Failure> {
        self.counts.pulls += 1;
        let left = Duration::from_millis(self.budget.config().stop_before.saturating_sub(self.now()));
        let visibility = left.saturating_add(self.handler.timeout).saturating_add(SETTLE_SLACK);
        let visibility = visibility.min(lull_client::defaults::MAX_VISIBILITY);
        let max = u8::try_from(max).unwrap_or(u8::MAX);
        // A pull in flight is not abandoned on a signal: what it leased must be given back.
        // The window goes to the handler as text: not decoded here.
        let pulled = self.queue.pull_new::<IgnoredAny>(max, visibility, &self.seen).await?;
        match u32::try_from(pulled.messages.len()).ok().and_then(NonZeroU32::new) {
            Some(fresh) => self.budget.pulled(fresh),
            None if pulled.duplicates.is_empty() => self.budget.empty(),
            None => {} // only duplicates: pull again
        }
        let duplicates = pulled.duplicate_leases();
        for duplicate in &pulled.duplicates {
            self.duplicate(duplicate);
        }
        // In hand before the duplicates' ack: if it fails, these are given back.
        self.held.extend(pulled.messages);
        self.queue.settle(&duplicates, &[]).await?;
        Ok(())
    }

    fn duplicate(&mut self, message: &Message<IgnoredAny>) {
        self.counts.duplicates += 1;
        self.report(message, "duplicate", Duration::ZERO, None, None);
    }

    /// A window's line (`--json`): its outcome, the handler's time, how it
    /// ended, and the retry's delay if it was given back.
    fn report(
        &self,
        message: &Message<IgnoredAny>,
        outcome: &str,
        took: Duration,
        ended: Option<&Ended>,
        retry_in: Option<Duration>,
    ) {
        self.reporter.window(&WindowLine {
            window: message.idempotency_key().unwrap_or(&message.id),
            attempt: message.lull_attempt().unwrap_or(message.attempts),
            outcome,
            took_ms: ms(took),
            exit_code: ended.and_then(Ended::exit_code),
            signal: ended.and_then(Ended::signal),
            retry_in_s: retry_in.map(|delay| delay.as_secs()),
        });
    }

    /// Begin the next message in hand: run its handler, then ack or retry it.
    async fn begin(&mut self) -> Result<(), Failure> {
        let Some(message) = self.held.pop_front() else { return Ok(()) };
        let content = match &message.content {
            Ok(content) => content,
            Err(undecodable) => {
                // Not lull's message: given back with a delay; the queue's
                // retries and dead-letter queue decide its end.
                eprintln!("lull pull: message {} is not a lull window ({})", message.id, undecodable.reason);
                return self.give_back(&message, "undecodable", Duration::ZERO, None).await;
            }
        };
        if self.seen.contains(&content.idempotency_key) {
            self.duplicate(&message);
            self.queue.settle(std::slice::from_ref(&message.lease_id), &[]).await?;
            return Ok(());
        }
        let attempt = content.lull_attempt(message.attempts);
        let stop = self.interrupted(2);
        let (ended, took) = self.handler.run(&content.window_json, &content.idempotency_key, attempt, stop).await;
        // A handler that did not start, or that a second signal stopped, says
        // nothing of how long windows take.
        if !matches!(ended, Ended::Unstartable(_) | Ended::Stopped) {
            self.budget.handled(ms(took));
        }
        self.counts.handled += 1;
        match ended {
            Ended::Succeeded => {
                self.seen.record(&content.idempotency_key);
                self.counts.acked += 1;
                self.report(&message, ended.word(), took, Some(&ended), None);
                self.queue.settle(std::slice::from_ref(&message.lease_id), &[]).await?;
                Ok(())
            }
            Ended::Stopped => {
                // Interrupted twice: given back at once, not a failure.
                self.counts.released += 1;
                self.report(&message, ended.word(), took, Some(&ended), Some(Duration::ZERO));
                let retry = Retry { lease_id: message.lease_id.clone(), delay: Some(Duration::ZERO) };
                self.queue.settle(&[], &[retry]).await?;
                Ok(())
            }
            Ended::Unstartable(ref why) => {
                eprintln!("lull pull: the handler could not start: {why}");
                self.give_back(&message, ended.word(), took, Some(&ended)).await
            }
            Ended::Failed(_) | Ended::Crashed(_) | Ended::TimedOut => {
                self.give_back(&message, ended.word(), took, Some(&ended)).await
            }
        }
    }

    /// A window that failed: back to the queue after [`failure_delay`].
    async fn give_back(
        &mut self,
        message: &Message<IgnoredAny>,
        outcome: &str,
        took: Duration,
        ended: Option<&Ended>,
    ) -> Result<(), Failure> {
        self.counts.failed += 1;
        let delay = failure_delay(message.attempts);
        self.report(message, outcome, took, ended, Some(delay));
        let retry = Retry { lease_id: message.lease_id.clone(), delay: Some(delay) };
        self.queue.settle(&[], &[retry]).await?;
        Ok(())
    }

    /// Give back, at once, every message pulled and not begun.
    async fn release(&mut self) -> Result<(), Failure> {
        let leases: Vec<LeaseId> = self.held.drain(..).map(|m| m.lease_id).collect();
        self.counts.released += u32::try_from(leases.len()).unwrap_or(u32::MAX);
        let retries: Vec<Retry> =
            leases.into_iter().map(|lease_id| Retry { lease_id, delay: Some(Duration::ZERO) }).collect();
        self.queue.settle(&[], &retries).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_window_waits_at_least_a_second_then_longer() {
        assert_eq!(failure_delay(0), Duration::from_secs(1));
        assert_eq!(failure_delay(1), Duration::from_secs(1));
        assert_eq!(failure_delay(2), Duration::from_secs(2));
        assert_eq!(failure_delay(5), Duration::from_secs(16));
        assert_eq!(failure_delay(40), MAX_FAILURE_DELAY);
    }
}
