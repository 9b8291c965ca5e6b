//! [`Debouncer`]: one key's engine (one debounced function, one Durable Object).

use alloc::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::action::{Accepted, Action, DeadLetter, QueuedWindow, Seq, WindowId};
use crate::error::{DeadLetterError, RunError};
use crate::jitter::Jitter;
use crate::lane::{Env, Lane, Order, Reached};
use crate::policy::Policy;
use crate::stats::Stats;
use crate::status::{Backlog, OpenWindow, RunStatus, Status};

/// How far a driver may count events on its own (see [`Debouncer::horizon`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Horizon {
    /// Events strictly before this time (ms)…
    pub until: u64,
    /// …and at most this many of them only add to the open window.
    pub events: u64,
}

/// The engine for one key: told the time, asked what to do.
///
/// Drive it like quinn-proto's connection: feed inputs with a `now` in ms
/// from a monotonic-enough clock; after each call, drain
/// [`poll_action`](Self::poll_action) and arm one timer at
/// [`next_deadline`](Self::next_deadline), calling
/// [`handle_timeout`](Self::handle_timeout) when it is reached (early or
/// spurious calls are harmless; late ones fire late, never lose events).
///
/// Guarantees:
/// - **Time**: a `now` earlier than one already seen counts as that one.
///   Deadlines that passed before an operation are processed first, so a
///   late timer never swallows the start of a new burst; only a run's end
///   (`run_succeeded` / `run_failed`) is applied before them, to the run it names.
/// - **Lazy timer**: an event never moves the deadline later; re-arm only
///   when `next_deadline` changes.
/// - **Singleton**: at most one run in flight ([`Overlap::Queue`](crate::Overlap));
///   events meanwhile gather in the next window, which fires when the run ends.
/// - **Accounting**: every accepted event is covered by exactly one first
///   `Fire` or one `Dropped` (cancel, or no trailing edge); retries and
///   replays re-run the same window id and span.
/// - **Policy changes** ([`set_policy`](Self::set_policy)) take effect between
///   bursts: a window never mixes two policies, and a run keeps the retry
///   and timeout it started with.
/// - **Snapshots**: the whole state (`serde`) restores to exactly the same future.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Debouncer {
    policy: Policy,
    /// A policy waiting for the burst going on to end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pending: Option<Policy>,
    clock: u64,
    next_window: u64,
    jitter: Jitter,
    lane: Lane,
    actions: VecDeque<Action>,
}

impl Debouncer {
    /// A new engine. `seed` feeds the retry jitter: pass real randomness in
    /// production (`crypto.getRandomValues`), a constant in tests.
    pub fn new(policy: Policy, seed: u64) -> Self {
        Debouncer {
            lane: Lane::new(&policy),
            policy,
            pending: None,
            clock: 0,
            next_window: 0,
            jitter: Jitter::new(seed),
            actions: VecDeque::new(),
        }
    }

    /// The policy in force: the open window and the next one run it.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// A policy set with [`set_policy`](Self::set_policy) that waits for the
    /// burst going on to end.
    pub fn pending_policy(&self) -> Option<&Policy> {
        self.pending.as_ref()
    }

    /// Run `policy` from the next burst: at once when no window is open and no
    /// timer is armed, else as soon as that is so. The window open now keeps
    /// the old timing; a run in flight (its retries included) keeps the retry
    /// and timeout it started with; queued windows run under the policy in
    /// force when they start. The policy in force drops any pending change.
    pub fn set_policy(&mut self, policy: Policy, now: u64) {
        self.pending = (policy != self.policy).then_some(policy);
        self.step(now, Order::DeadlinesFirst, |_, _, _| ());
    }

    /// Run `op` on the lane at the clamped `now`, in `order` with the deadlines
    /// before it; then start a pending policy if the burst is over.
    fn step<R>(&mut self, now: u64, order: Order, op: impl FnOnce(&mut Lane, u64, &mut Env<'_>) -> R) -> R {
        let now = now.max(self.clock);
        self.clock = now;
        let Debouncer { policy, next_window, jitter, lane, actions, .. } = self;
        let mut push = |action| actions.push_back(action);
        let mut env = Env { policy, next_window, jitter, out: &mut push };
        let result = lane.apply(now, order, &mut env, op);
        if self.lane.burst_over()
            && let Some(new) = self.pending.take()
        {
            self.lane.adopt(&self.policy, &new);
            self.policy = new;
        }
        result
    }

    /// Accept one event at `now`; it may fire at once (leading edge, `max_wait`
    /// in a tight loop, or a full batch).
    pub fn event(&mut self, now: u64) -> Accepted {
        if self.pending.is_some() {
            // A burst that ended before `now` lets the pending policy in first.
            self.step(now, Order::DeadlinesFirst, |_, _, _| ());
        }
        self.step(now, Order::DeadlinesFirst, |lane, now, env| lane.event(now, env))
    }

    /// Accept one event at `now` made in the same turn of the event loop as the
    /// driver's previous call (say, a synchronous loop of calls): deadlines
    /// that passed since could not have been served — the driver's timer
    /// cannot run before the turn ends — so none is served first, and the
    /// event joins the burst as in lodash. The timer serves them when it runs.
    /// ([`event`](Self::event) serves them first: after the event loop was
    /// free, an overdue timer counts as fired, lodash#6003.)
    pub fn event_in_turn(&mut self, now: u64) -> Accepted {
        self.step(now, Order::Unserved, |lane, now, env| lane.event(now, env))
    }

    /// Until when further events need nothing but counting, if they do now.
    /// A driver may keep events made before [`Horizon::until`] (at most
    /// [`Horizon::events`] of them) on its side and hand them in later with
    /// [`recorded`](Self::recorded), before any other call: nothing would
    /// have fired and no deadline would have moved in between.
    pub fn horizon(&self) -> Option<Horizon> {
        let (until, events) = self.lane.horizon(self.clock, &self.policy)?;
        Some(Horizon { until, events })
    }

    /// Hand in `count` events kept under the [`horizon`](Self::horizon), the
    /// last one at `last`: the same as `count` calls of [`event`](Self::event)
    /// at their own times. Returns the last one's [`Accepted`] (`None` for 0).
    pub fn recorded(&mut self, count: u64, last: u64) -> Option<Accepted> {
        (0..count).map(|_| self.event(last)).last()
    }

    /// The deadline from [`next_deadline`](Self::next_deadline) is reached.
    pub fn handle_timeout(&mut self, now: u64) {
        self.step(now, Order::DeadlinesFirst, |lane, now, env| lane.expire(now, Reached::AtOrBefore, env));
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next, if ever (ms).
    pub fn next_deadline(&self) -> Option<u64> {
        self.lane.deadline()
    }

    /// The next action to carry out, oldest first.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Fire the open window now (reason `Flush`), disarming its timer. With
    /// the slot taken it fires as soon as the run ends.
    pub fn flush(&mut self, now: u64) {
        self.step(now, Order::DeadlinesFirst, |lane, now, env| lane.flush(now, env));
    }

    /// Fire the open window now as full (reason `Full`), as a batch that
    /// reached `max_batch` does: the driver's own bound on a window (its
    /// bytes, say) was reached, and the next event opens a new window. With
    /// the slot taken it is queued. Nothing if no window is open.
    pub fn seal(&mut self, now: u64) {
        self.step(now, Order::DeadlinesFirst, |lane, now, env| lane.seal(now, env));
    }

    /// Drop the open window (and queued, never-fired windows) and end the
    /// burst, overdue or not (like lodash: a timer the event loop could not
    /// serve in time does not fire inside `cancel`). A run in flight and
    /// queued replays are not touched.
    pub fn cancel(&mut self, now: u64) {
        self.step(now, Order::OperationFirst, |lane, _, env| lane.cancel(env));
    }

    /// The run of `window` succeeded; the next due window may fire at once.
    ///
    /// # Errors
    ///
    /// [`RunError::NotInFlight`] unless that run is in flight; nothing changes.
    pub fn run_succeeded(&mut self, window: WindowId, now: u64) -> Result<(), RunError> {
        self.check_run(window, now)?;
        self.step(now, Order::OperationFirst, |lane, now, env| lane.succeeded(now, env));
        Ok(())
    }

    /// The run of `window` failed: a retry is scheduled, or it is dead-lettered.
    ///
    /// # Errors
    ///
    /// [`RunError::NotInFlight`] unless that run is in flight; nothing changes.
    pub fn run_failed(&mut self, window: WindowId, now: u64) -> Result<(), RunError> {
        self.check_run(window, now)?;
        self.step(now, Order::OperationFirst, |lane, now, env| lane.failed(now, env));
        Ok(())
    }

    /// The run of `window` did not reach its work (the driver held it back,
    /// or the work's target said *not now*): it runs again at `until` as the
    /// same attempt, spending none of the retries. A [`Action::RetryScheduled`]
    /// names that attempt and time; the [`Fire`] at `until` carries the
    /// attempt unchanged (and the run's first reason, for the first attempt).
    ///
    /// # Errors
    ///
    /// [`RunError::NotInFlight`] unless that run is in flight; nothing changes.
    pub fn run_deferred(&mut self, window: WindowId, now: u64, until: u64) -> Result<(), RunError> {
        self.check_run(window, now)?;
        self.step(now, Order::OperationFirst, |lane, now, env| lane.deferred(now, until, env));
        Ok(())
    }

    fn check_run(&self, window: WindowId, now: u64) -> Result<(), RunError> {
        self.lane.check_in_flight(window, now.max(self.clock))
    }

    /// Run a dead-lettered window again (reason `Replay`), after any run in flight.
    ///
    /// # Errors
    ///
    /// [`DeadLetterError::NotFound`] if `window` is not a dead letter; nothing changes.
    pub fn replay(&mut self, window: WindowId, now: u64) -> Result<(), DeadLetterError> {
        self.lane.check_dead_letter(window)?;
        self.step(now, Order::DeadlinesFirst, |lane, now, env| lane.replay(window, now, env))
    }

    /// Forget a dead letter and return it (its payloads can go).
    ///
    /// # Errors
    ///
    /// [`DeadLetterError::NotFound`] if `window` is not a dead letter; nothing changes.
    pub fn discard(&mut self, window: WindowId) -> Result<DeadLetter, DeadLetterError> {
        self.lane.discard(window)
    }

    /// lodash's `pending()`: a timer is armed or a window waits to fire.
    pub fn pending(&self) -> bool {
        self.lane.pending()
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        self.lane.stats()
    }

    /// A full view of the state.
    pub fn status(&self) -> Status {
        self.lane.status()
    }

    /// The quiet period in force (ms): fixed, or as learned.
    pub fn wait_ms(&self) -> u64 {
        self.lane.wait_ms()
    }

    /// The median gap learned so far (adaptive wait only).
    pub fn learned_gap_ms(&self) -> Option<u64> {
        self.lane.learned_gap_ms()
    }

    /// The id of the newest window (`WindowId(0)` before the first).
    pub fn last_window(&self) -> WindowId {
        WindowId(self.next_window)
    }

    /// The seq of the last event accepted (`Seq(0)` before the first).
    pub fn last_seq(&self) -> Seq {
        self.lane.last_seq()
    }

    /// The window gathering events, if any.
    pub fn open_window(&self) -> Option<&OpenWindow> {
        self.lane.open()
    }

    /// The run holding the slot, if any.
    pub fn run(&self) -> Option<&RunStatus> {
        self.lane.run()
    }

    /// Windows waiting for the run slot, oldest first.
    pub fn queued(&self) -> &VecDeque<QueuedWindow> {
        self.lane.queued()
    }

    /// Dead letters, oldest first.
    pub fn dead_letters(&self) -> &[DeadLetter] {
        self.lane.dead_letters()
    }

    /// Move the backlog (queued windows, dead letters) out, leaving the rest
    /// of the state small enough to snapshot at every change; put it back with
    /// [`restore_backlog`](Self::restore_backlog).
    pub fn take_backlog(&mut self) -> Backlog {
        self.lane.take_backlog()
    }

    /// Put back a backlog taken with [`take_backlog`](Self::take_backlog) (or
    /// read from storage), ahead of anything queued or dead-lettered since.
    pub fn restore_backlog(&mut self, backlog: Backlog) {
        self.lane.restore_backlog(backlog);
    }
}
