//! One key's state machine: lodash's debounce timing, windows, and the run slot.
//!
//! The timing fields are lodash's own variables under clearer names, so the
//! engine can be checked against lodash step for step:
//!
//! | lodash           | here            |
//! |------------------|-----------------|
//! | `lastCallTime`   | `last_event_at` |
//! | `lastInvokeTime` | `anchor`        |
//! | `timerId` (+ due)| `timer`         |
//! | `lastArgs`       | `open`          |
//!
//! `timer` is lazy: an event never moves it later; when it is reached the
//! lane re-checks and, if the burst is still going, re-arms for the rest.
//! Wrappers clamp time to be monotonic and process deadlines strictly before
//! `now` ahead of every operation, so a late timer never swallows a new burst.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::action::{
    Accepted, Action, DeadLetter, DropCause, Dropped, Fire, QueuedWindow, Reason, Seq, Span, WindowId,
};
use crate::adaptive::Gaps;
use crate::error::{DeadLetterError, RunError};
use crate::jitter::Jitter;
use crate::policy::{JitterMode, Overlap, Policy, Retry, Wait};
use crate::rules::{Burst, EventEdge};
use crate::stats::Stats;
use crate::status::{Backlog, OpenWindow, RunStatus, Status};

/// What a lane needs from the group it lives in.
pub(crate) struct Env<'a> {
    pub(crate) policy: &'a Policy,
    pub(crate) next_window: &'a mut u64,
    pub(crate) jitter: &'a mut Jitter,
    pub(crate) out: &'a mut dyn FnMut(Action),
}

impl Env<'_> {
    fn new_window(&mut self) -> WindowId {
        *self.next_window += 1;
        WindowId(*self.next_window)
    }

    fn emit(&mut self, action: Action) {
        (self.out)(action);
    }
}

/// Whether an operation comes before or after the deadlines it finds passed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Deadlines before `now` first: an event after a missed deadline starts a new window.
    DeadlinesFirst,
    /// The operation first: a run's end is applied to the run it names, before
    /// an overdue deadline could fire (or supersede) another.
    OperationFirst,
    /// The operation alone: the event loop has not been free since the
    /// deadlines passed, so (as in lodash) they wait for the driver's timer.
    Unserved,
}

/// Which deadlines [`Lane::expire`] processes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reached {
    /// Deadlines before `now` (ahead of an operation at `now`).
    Before,
    /// Deadlines at or before `now` (the driver's timer went off).
    AtOrBefore,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Lane {
    next_seq: u64,
    wait_ms: u64,
    gaps: Gaps,
    last_event_at: Option<u64>,
    anchor: u64,
    timer: Option<u64>,
    open: Option<OpenWindow>,
    queue: VecDeque<QueuedWindow>,
    run: Option<RunStatus>,
    dead: Vec<DeadLetter>,
    stats: Stats,
    /// The retry and timeout the run in flight started with (absent in older
    /// snapshots: the policy's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run_terms: Option<RunTerms>,
    /// The run waiting for its retry was deferred ([`Lane::deferred`]): it
    /// runs again as the same attempt.
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    deferred: bool,
}

/// What a run keeps of the policy it started under, whatever changes later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RunTerms {
    retry: Retry,
    run_timeout: Option<u64>,
}

impl RunTerms {
    fn of(policy: &Policy) -> Self {
        RunTerms { retry: policy.config().retry, run_timeout: policy.config().run_timeout }
    }
}

impl Lane {
    pub(crate) fn new(policy: &Policy) -> Self {
        let wait_ms = policy.config().wait.initial();
        Lane {
            next_seq: 0,
            wait_ms,
            gaps: Gaps::default(),
            last_event_at: None,
            anchor: 0,
            timer: None,
            open: None,
            queue: VecDeque::new(),
            run: None,
            dead: Vec::new(),
            stats: Stats::default(),
            run_terms: None,
            deferred: false,
        }
    }

    /// No burst is going: no window open and no timer armed. A new policy may start here.
    pub(crate) fn burst_over(&self) -> bool {
        self.open.is_none() && self.timer.is_none()
    }

    /// Switch from `old` to `new` between bursts: a changed quiet period
    /// starts afresh (what was learned under the old one is dropped).
    pub(crate) fn adopt(&mut self, old: &Policy, new: &Policy) {
        if old.config().wait != new.config().wait {
            self.gaps = Gaps::default();
            self.wait_ms = new.config().wait.initial();
        }
    }

    /// Until when (exclusive) and for how many more events an event only adds
    /// to the open window: no fire, no deadline moved. `clock` is the latest time seen.
    ///
    /// Why it holds: before `last_event_at + wait` and `anchor + max_wait` an
    /// event is neither a leading nor a `max_wait` edge; with a fixed wait the
    /// lazy timer stays where it is (it is never later than `now + wait`);
    /// before every deadline nothing is due; a full batch bounds the count.
    pub(crate) fn horizon(&self, clock: u64, policy: &Policy) -> Option<(u64, u64)> {
        let open = self.open.filter(|o| o.due.is_none())?;
        if !matches!(policy.config().wait, Wait::Fixed(_)) {
            return None; // an adaptive wait learns from each gap and may move the timer
        }
        let until = self.burst(policy).quiet_until(self.deadline()?)?;
        let events = policy.config().max_batch.map_or(u64::MAX, |m| m.saturating_sub(open.span.count() + 1));
        (until > clock && events > 0 && self.timer.is_some()).then_some((until, events))
    }

    /// The terms of the run in flight.
    fn terms(&self, policy: &Policy) -> RunTerms {
        self.run_terms.unwrap_or_else(|| RunTerms::of(policy))
    }

    /// The earliest time this lane needs `expire`.
    pub(crate) fn deadline(&self) -> Option<u64> {
        match (self.timer, self.run_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn run_deadline(&self) -> Option<u64> {
        self.run.as_ref().and_then(|r| r.retry_at.or(r.timeout_at))
    }

    /// Process every deadline `reached` by `now`, earliest first, each at `now`.
    pub(crate) fn expire(&mut self, now: u64, reached: Reached, env: &mut Env<'_>) {
        let is_due = |t: &u64| match reached {
            Reached::Before => *t < now,
            Reached::AtOrBefore => *t <= now,
        };
        // Each step clears its deadline or moves it past `now`, so this ends.
        loop {
            match (self.timer.filter(is_due), self.run_deadline().filter(is_due)) {
                (None, None) => return,
                (Some(t), Some(r)) if t < r => self.timer_reached(now, env),
                (_, Some(_)) => self.run_deadline_reached(now, env),
                (Some(_), None) => self.timer_reached(now, env),
            }
        }
    }

    /// Run `op` at `now`, in `order` with the deadlines that passed before `now`.
    pub(crate) fn apply<R>(
        &mut self,
        now: u64,
        order: Order,
        env: &mut Env<'_>,
        op: impl FnOnce(&mut Lane, u64, &mut Env<'_>) -> R,
    ) -> R {
        if order == Order::DeadlinesFirst {
            self.expire(now, Reached::Before, env);
        }
        let result = op(self, now, env);
        if order == Order::OperationFirst {
            self.expire(now, Reached::Before, env);
        }
        result
    }

    /// Accept one event at `now`.
    pub(crate) fn event(&mut self, now: u64, env: &mut Env<'_>) -> Accepted {
        let invoking = self.burst(env.policy).should_invoke(now);
        if let (Some(prev), Wait::Auto(settings)) = (self.last_event_at, &env.policy.config().wait) {
            self.wait_ms = self.gaps.learn(now.saturating_sub(prev), settings);
        }
        self.last_event_at = Some(now);
        self.next_seq += 1;
        let seq = Seq(self.next_seq);
        self.stats.events += 1;
        let window = match &mut self.open {
            Some(open) => {
                open.span.push(seq, now);
                open.window
            }
            None => {
                let window = env.new_window();
                self.open = Some(OpenWindow { window, span: Span::one(seq, now), due: None });
                window
            }
        };
        let absorbing = self.open.as_ref().is_some_and(|o| o.due.is_some());
        if !absorbing {
            let deadline = now.saturating_add(self.wait_ms);
            match self.burst(env.policy).event_edge(invoking, self.timer) {
                EventEdge::Leading => self.leading_edge(now, env),
                EventEdge::MaxWait => {
                    // lodash: "handle invocations in a tight loop"
                    self.timer = Some(deadline);
                    self.invoke(now, Reason::MaxWait, env);
                }
                // Lazy: never later. (Only an adaptive wait that just shrank moves it earlier.)
                EventEdge::Extends => self.timer = Some(self.timer.map_or(deadline, |t| t.min(deadline))),
            }
        }
        self.fire_if_full(now, env);
        Accepted { seq, window }
    }

    /// Fire the open window now (lodash's `flush`, but the timer is disarmed).
    pub(crate) fn flush(&mut self, now: u64, env: &mut Env<'_>) {
        if let Some(open) = self.open.as_mut().filter(|o| o.due.is_some()) {
            open.due = Some(Reason::Flush);
        } else if self.timer.is_some() || self.open.is_some() {
            self.trailing_edge(now, true, env);
        }
    }

    /// Drop the open window and queued (never-fired) windows; reset the burst.
    /// A run in flight and queued replays are left alone.
    pub(crate) fn cancel(&mut self, env: &mut Env<'_>) {
        self.timer = None;
        self.anchor = 0;
        self.last_event_at = None;
        let open = self.open.take().map(|o| (o.window, o.span));
        let queued: Vec<_> =
            self.queue.iter().filter(|q| q.reason != Reason::Replay).map(|q| (q.window, q.span)).collect();
        self.queue.retain(|q| q.reason == Reason::Replay);
        for (window, span) in open.into_iter().chain(queued) {
            self.stats.cancelled += span.count();
            env.emit(Action::Dropped(Dropped { window, span, cause: DropCause::Cancelled }));
        }
    }

    /// Whether `window`'s run is in flight at `now` (a passed timeout ended it).
    pub(crate) fn check_in_flight(&self, window: WindowId, now: u64) -> Result<(), RunError> {
        match &self.run {
            Some(run) if run.window == window && run.retry_at.is_none() && run.timeout_at.is_none_or(|t| t >= now) => {
                Ok(())
            }
            _ => Err(RunError::NotInFlight(window)),
        }
    }

    /// The run of `window` ended well. Call [`Lane::check_in_flight`] first.
    pub(crate) fn succeeded(&mut self, now: u64, env: &mut Env<'_>) {
        self.run = None;
        self.run_terms = None;
        self.deferred = false;
        self.stats.succeeded += 1;
        self.start_next(now, env);
    }

    /// The run of `window` failed. Call [`Lane::check_in_flight`] first.
    pub(crate) fn failed(&mut self, now: u64, env: &mut Env<'_>) {
        self.fail(now, env);
    }

    /// The run of `window` did not reach its work: the same attempt again at
    /// `until` (not before `now`). Call [`Lane::check_in_flight`] first.
    pub(crate) fn deferred(&mut self, now: u64, until: u64, env: &mut Env<'_>) {
        let Some(run) = self.run.as_mut() else { return };
        let at = until.max(now);
        run.retry_at = Some(at);
        run.timeout_at = None;
        self.deferred = true;
        env.emit(Action::RetryScheduled { window: run.window, attempt: run.attempt, at });
    }

    fn dead_letter_index(&self, window: WindowId) -> Result<usize, DeadLetterError> {
        self.dead.iter().position(|d| d.window == window).ok_or(DeadLetterError::NotFound(window))
    }

    /// Whether `window` is a dead letter.
    pub(crate) fn check_dead_letter(&self, window: WindowId) -> Result<(), DeadLetterError> {
        self.dead_letter_index(window).map(drop)
    }

    /// Queue a dead letter to run again (after any run in flight).
    pub(crate) fn replay(&mut self, window: WindowId, now: u64, env: &mut Env<'_>) -> Result<(), DeadLetterError> {
        let letter = self.dead.remove(self.dead_letter_index(window)?);
        self.enqueue(QueuedWindow { window, span: letter.span, reason: Reason::Replay }, env);
        if self.run.is_none() {
            self.start_next(now, env);
        }
        Ok(())
    }

    /// Forget a dead letter for good; the driver may release its payloads.
    pub(crate) fn discard(&mut self, window: WindowId) -> Result<DeadLetter, DeadLetterError> {
        Ok(self.dead.remove(self.dead_letter_index(window)?))
    }

    /// lodash's `pending()`: a timer armed or a window waiting.
    pub(crate) fn pending(&self) -> bool {
        self.timer.is_some() || self.open.is_some() || !self.queue.is_empty()
    }

    /// Since when the lane has had nothing to do (no timer, window, run or dead
    /// letter): the time of its last event. An adaptive lane keeps what it
    /// learned while idle; a fixed one is [dormant](Self::is_dormant) and goes.
    pub(crate) fn idle_since(&self) -> Option<u64> {
        let idle = !self.pending() && self.run.is_none() && self.dead.is_empty();
        idle.then(|| self.last_event_at.unwrap_or(0))
    }

    /// True when the lane holds nothing a fresh lane would not: it can be forgotten.
    pub(crate) fn is_dormant(&self, now: u64, policy: &Policy) -> bool {
        let burst_over = self.last_event_at.is_none_or(|last| now.saturating_sub(last) >= self.wait_ms);
        matches!(policy.config().wait, Wait::Fixed(_)) && burst_over && self.idle_since().is_some()
    }

    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }

    pub(crate) fn wait_ms(&self) -> u64 {
        self.wait_ms
    }

    pub(crate) fn learned_gap_ms(&self) -> Option<u64> {
        self.gaps.median()
    }

    pub(crate) fn last_seq(&self) -> Seq {
        Seq(self.next_seq)
    }

    pub(crate) fn queued(&self) -> &VecDeque<QueuedWindow> {
        &self.queue
    }

    pub(crate) fn dead_letters(&self) -> &[DeadLetter] {
        &self.dead
    }

    pub(crate) fn run(&self) -> Option<&RunStatus> {
        self.run.as_ref()
    }

    pub(crate) fn open(&self) -> Option<&OpenWindow> {
        self.open.as_ref()
    }

    pub(crate) fn take_backlog(&mut self) -> Backlog {
        Backlog { queued: core::mem::take(&mut self.queue), dead: core::mem::take(&mut self.dead) }
    }

    pub(crate) fn restore_backlog(&mut self, backlog: Backlog) {
        let Backlog { mut queued, mut dead } = backlog;
        queued.append(&mut self.queue);
        dead.append(&mut self.dead);
        self.queue = queued;
        self.dead = dead;
    }

    pub(crate) fn status(&self) -> Status {
        Status {
            wait_ms: self.wait_ms,
            learned_gap_ms: self.gaps.median(),
            next_deadline: self.deadline(),
            open: self.open,
            queued: self.queue.iter().copied().collect(),
            run: self.run,
            dead_letters: self.dead.clone(),
            stats: self.stats.clone(),
        }
    }

    // ---- lodash's timing ------------------------------------------------

    /// lodash's variables, for the rules (see [`crate::rules`]).
    fn burst(&self, policy: &Policy) -> Burst {
        Burst {
            last_event_at: self.last_event_at,
            anchor: self.anchor,
            wait_ms: self.wait_ms,
            max_wait: policy.config().max_wait,
        }
    }

    fn leading_edge(&mut self, now: u64, env: &mut Env<'_>) {
        self.anchor = now;
        self.timer = Some(now.saturating_add(self.wait_ms));
        if env.policy.config().leading {
            self.invoke(now, Reason::Leading, env);
        }
    }

    fn timer_reached(&mut self, now: u64, env: &mut Env<'_>) {
        match self.burst(env.policy).timer_reached(now) {
            None => self.trailing_edge(now, false, env),
            Some(rearm) => self.timer = Some(rearm),
        }
    }

    fn trailing_edge(&mut self, now: u64, flushing: bool, env: &mut Env<'_>) {
        self.timer = None;
        let Some(open) = self.open.filter(|o| o.due.is_none()) else {
            return;
        };
        if env.policy.config().trailing {
            let reason = self.burst(env.policy).trailing_reason(now, flushing);
            self.invoke(now, reason, env);
        } else {
            self.open = None;
            self.stats.dropped += open.span.count();
            env.emit(Action::Dropped(Dropped {
                window: open.window,
                span: open.span,
                cause: DropCause::NoTrailingEdge,
            }));
        }
    }

    /// lodash's `invokeFunc`: the open window fires now, or, if the run slot
    /// is taken (and overlap is `Queue`), becomes due and waits for it.
    fn invoke(&mut self, now: u64, reason: Reason, env: &mut Env<'_>) {
        self.anchor = now;
        let Some(open) = self.open.take() else { return };
        let slot_taken = self.run.is_some() && env.policy.config().overlap == Overlap::Queue;
        if !slot_taken {
            self.start(open.window, open.span, reason, now, env);
        } else if reason == Reason::Full {
            self.enqueue(QueuedWindow { window: open.window, span: open.span, reason }, env);
        } else {
            // Due: it keeps absorbing events and fires when the slot frees.
            // lodash's timing goes on untouched, as if it had fired now.
            self.open = Some(OpenWindow { due: Some(reason), ..open });
        }
    }

    fn fire_if_full(&mut self, now: u64, env: &mut Env<'_>) {
        if self.open.is_some_and(|open| env.policy.config().max_batch.is_some_and(|m| open.span.count() >= m)) {
            self.seal(now, env);
        }
    }

    /// Fire the open window now as full (or, if it already waits to fire,
    /// queue it with its reason): the next event opens a new window.
    pub(crate) fn seal(&mut self, now: u64, env: &mut Env<'_>) {
        let Some(open) = self.open else { return };
        match open.due {
            None => self.invoke(now, Reason::Full, env),
            Some(reason) => {
                self.open = None;
                self.enqueue(QueuedWindow { window: open.window, span: open.span, reason }, env);
            }
        }
    }

    // ---- the run slot ---------------------------------------------------

    fn start(&mut self, window: WindowId, span: Span, reason: Reason, now: u64, env: &mut Env<'_>) {
        let supersedes = self.run.take().map(|r| r.window);
        self.deferred = false;
        if supersedes.is_some() {
            self.stats.superseded += 1;
        }
        let terms = RunTerms::of(env.policy);
        self.run_terms = Some(terms);
        self.run = Some(RunStatus {
            window,
            span,
            reason,
            attempt: 1,
            fired_at: now,
            timeout_at: terms.run_timeout.map(|t| now.saturating_add(t)),
            retry_at: None,
        });
        let fire = Fire { window, reason, attempt: 1, at: now, span, supersedes };
        self.stats.record_fire(&fire);
        env.emit(Action::Fire(fire));
    }

    fn enqueue(&mut self, queued: QueuedWindow, env: &mut Env<'_>) {
        self.queue.push_back(queued);
        env.emit(Action::Queued(queued));
    }

    /// The slot is free: run the oldest queued window, else a due open one.
    fn start_next(&mut self, now: u64, env: &mut Env<'_>) {
        if let Some(next) = self.queue.pop_front() {
            self.start(next.window, next.span, next.reason, now, env);
        } else if let Some(OpenWindow { window, span, due: Some(reason) }) = self.open {
            self.open = None;
            self.anchor = now;
            self.start(window, span, reason, now, env);
        }
    }

    fn run_deadline_reached(&mut self, now: u64, env: &mut Env<'_>) {
        let timeout = self.terms(env.policy).run_timeout;
        let Some(run) = self.run.as_mut() else { return };
        if run.retry_at.take().is_some() {
            // A deferred run goes again as the attempt it was, and is no new fire in the stats.
            let deferred = core::mem::take(&mut self.deferred);
            if !deferred {
                run.attempt += 1;
            }
            run.fired_at = now;
            run.timeout_at = timeout.map(|t| now.saturating_add(t));
            let fire = Fire {
                window: run.window,
                reason: if run.attempt == 1 { run.reason } else { Reason::Retry },
                attempt: run.attempt,
                at: now,
                span: run.span,
                supersedes: None,
            };
            if !deferred {
                self.stats.record_fire(&fire);
            }
            env.emit(Action::Fire(fire));
        } else {
            env.emit(Action::TimedOut { window: run.window, attempt: run.attempt });
            self.fail(now, env);
        }
    }

    fn fail(&mut self, now: u64, env: &mut Env<'_>) {
        self.deferred = false;
        let retry = self.terms(env.policy).retry;
        let Some(run) = self.run.as_mut() else { return };
        self.stats.failures += 1;
        if run.attempt < retry.max_attempts {
            let ceiling = retry.ceiling(run.attempt);
            let delay = match retry.jitter {
                JitterMode::Full => env.jitter.up_to(ceiling),
                JitterMode::None => ceiling,
            };
            let at = now.saturating_add(delay);
            run.retry_at = Some(at);
            run.timeout_at = None;
            env.emit(Action::RetryScheduled { window: run.window, attempt: run.attempt + 1, at });
            return;
        }
        let letter = DeadLetter {
            window: run.window,
            span: run.span,
            reason: run.reason,
            attempts: run.attempt,
            failed_at: now,
        };
        self.run = None;
        self.run_terms = None;
        self.dead.push(letter);
        self.stats.dead_lettered += 1;
        env.emit(Action::DeadLettered(letter));
        self.start_next(now, env);
    }
}
