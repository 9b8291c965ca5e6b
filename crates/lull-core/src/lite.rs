//! [`Lite`]: lodash's timing alone, for a function that runs synchronously.

use crate::action::{DropCause, Reason, Seq};
use crate::adaptive::{Adaptive, Gaps};
use crate::debouncer::Horizon;
use crate::policy::{PolicyConfig, PolicyError, Retry, Wait, check_timing};
use crate::rules::{Burst, EventEdge};

/// What a [`Lite`] engine asks of its driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiteAction {
    /// Run the function now, with the call numbered `last` (the window's last).
    Fire {
        /// The window's last call.
        last: Seq,
        /// Why it fires now.
        reason: Reason,
    },
    /// The window ending with call `last` will not run: let its calls go.
    Dropped {
        /// The window's last call.
        last: Seq,
        /// Why.
        cause: DropCause,
    },
}

/// One debounced function whose runs end as they start: lull-web's
/// `debounce` and `throttle`.
///
/// The [`Debouncer`](crate::Debouncer)'s timing without its run lifecycle
/// (no run slot, retries, timeouts, dead letters, batches, snapshots), so a
/// page that only debounces ships a fraction of the code, and no heap.
/// Guarantee: for the same policy and inputs it fires and drops exactly what a
/// `Debouncer` does when each run is ended as it is polled (a property test
/// holds the two together; both take their timing rules from one place). One
/// difference: [`recorded`](Self::recorded) refuses calls that were not
/// under the horizon, where a `Debouncer` takes them one by one.
///
/// Drive it as a `Debouncer`: inputs [`event`](Self::event),
/// [`event_in_turn`](Self::event_in_turn), [`handle_timeout`](Self::handle_timeout),
/// [`flush`](Self::flush), [`cancel`](Self::cancel); outputs
/// [`poll_action`](Self::poll_action) and [`next_deadline`](Self::next_deadline);
/// the fast path [`horizon`](Self::horizon) / [`recorded`](Self::recorded).
/// **Poll until `None` after every input**: an input leaves at most
/// [`LITE_MAX_ACTIONS`], and that is all a `Lite` holds (an action left
/// unpolled past the next input is overwritten).
#[derive(Clone, Debug)]
pub struct Lite {
    max_wait: Option<u64>,
    leading: bool,
    trailing: bool,
    adaptive: Option<Adaptive>,
    wait_ms: u64,
    gaps: Gaps,
    clock: u64,
    last_event_at: Option<u64>,
    anchor: u64,
    timer: Option<u64>,
    /// The open window's last call.
    open: Option<Seq>,
    next_seq: u64,
    /// Actions not yet polled, oldest first (see [`LITE_MAX_ACTIONS`]).
    actions: [Option<LiteAction>; LITE_MAX_ACTIONS],
}

/// The most actions one input leaves to poll: the window it ends and the one
/// it fires at once. A driver polls them all before its next input (each
/// does), so a [`Lite`] holds no more and needs no heap.
pub const LITE_MAX_ACTIONS: usize = 2;

impl Lite {
    /// An engine for `config`'s timing (`wait`, `max_wait`, `leading`,
    /// `trailing`: see [`timing`](Self::timing)). Refused with
    /// [`PolicyError::NotInLite`] if it asks for the run lifecycle
    /// (`max_batch`, retries, `run_timeout`); `overlap` does not matter, a run
    /// ending as it starts.
    pub fn new(config: PolicyConfig) -> Result<Lite, PolicyError> {
        if config.max_batch.is_some() || config.retry != Retry::NONE || config.run_timeout.is_some() {
            return Err(PolicyError::NotInLite);
        }
        Lite::timing(config.wait, config.max_wait, config.leading, config.trailing)
    }

    /// An engine for this timing, checked by the same rules as in
    /// [`PolicyConfig::build`] (a lodash-compatible driver first raises
    /// `max_wait` with [`Wait::raise_max_wait`]).
    pub fn timing(wait: Wait, max_wait: Option<u64>, leading: bool, trailing: bool) -> Result<Lite, PolicyError> {
        check_timing(&wait, max_wait, &[])?;
        Ok(Lite {
            max_wait,
            leading,
            trailing,
            adaptive: match wait {
                Wait::Auto(a) => Some(a),
                Wait::Fixed(_) => None,
            },
            wait_ms: wait.initial(),
            gaps: Gaps::default(),
            clock: 0,
            last_event_at: None,
            anchor: 0,
            timer: None,
            open: None,
            next_seq: 0,
            actions: [None; LITE_MAX_ACTIONS],
        })
    }

    /// lodash's variables, for the rules.
    fn burst(&self) -> Burst {
        Burst { last_event_at: self.last_event_at, anchor: self.anchor, wait_ms: self.wait_ms, max_wait: self.max_wait }
    }

    /// `now`, never before a time already seen.
    fn tick(&mut self, now: u64) -> u64 {
        self.clock = self.clock.max(now);
        self.clock
    }

    /// Serve the timer if it is due: strictly before `now`, or also at `now`.
    fn expire(&mut self, now: u64, at_now_too: bool) {
        // Each step clears the timer or moves it past `now`, so this ends.
        while self.timer.is_some_and(|t| t < now || (at_now_too && t == now)) {
            match self.burst().timer_reached(now) {
                None => self.trailing_edge(now, false),
                Some(rearm) => self.timer = Some(rearm),
            }
        }
    }

    /// Accept one call at `now`: its number. A timer that passed before
    /// `now` is served first (an overdue burst ended before this call).
    pub fn event(&mut self, now: u64) -> Seq {
        let now = self.tick(now);
        self.expire(now, false);
        self.accept(now)
    }

    /// Accept one call at `now` made in the same turn of the event loop as
    /// the previous one: a timer that passed meanwhile could not run, so it
    /// is not served first (see [`Debouncer::event_in_turn`](crate::Debouncer::event_in_turn)).
    pub fn event_in_turn(&mut self, now: u64) -> Seq {
        let now = self.tick(now);
        self.accept(now)
    }

    fn accept(&mut self, now: u64) -> Seq {
        let invoking = self.burst().should_invoke(now);
        if let (Some(prev), Some(settings)) = (self.last_event_at, &self.adaptive) {
            self.wait_ms = self.gaps.learn(now.saturating_sub(prev), settings);
        }
        self.last_event_at = Some(now);
        self.next_seq += 1;
        let seq = Seq(self.next_seq);
        self.open = Some(seq);
        let deadline = now.saturating_add(self.wait_ms);
        match self.burst().event_edge(invoking, self.timer) {
            EventEdge::Leading => {
                self.anchor = now;
                self.timer = Some(deadline);
                if self.leading {
                    self.invoke(now, Reason::Leading);
                }
            }
            EventEdge::MaxWait => {
                self.timer = Some(deadline);
                self.invoke(now, Reason::MaxWait);
            }
            EventEdge::Extends => self.timer = Some(self.timer.map_or(deadline, |t| t.min(deadline))),
        }
        seq
    }

    fn invoke(&mut self, now: u64, reason: Reason) {
        self.anchor = now;
        if let Some(last) = self.open.take() {
            self.push(LiteAction::Fire { last, reason });
        }
    }

    fn trailing_edge(&mut self, now: u64, flushing: bool) {
        self.timer = None;
        let Some(last) = self.open else { return };
        if self.trailing {
            let reason = self.burst().trailing_reason(now, flushing);
            self.invoke(now, reason);
        } else {
            self.open = None;
            self.push(LiteAction::Dropped { last, cause: DropCause::NoTrailingEdge });
        }
    }

    /// Until when calls only add to the open window, and how many may (see
    /// [`Debouncer::horizon`](crate::Debouncer::horizon)).
    #[inline(never)] // one copy for the two exports that read it (wasm size)
    pub fn horizon(&self) -> Option<Horizon> {
        if self.open.is_none() || self.adaptive.is_some() {
            return None; // an adaptive wait learns from each gap and may move the timer
        }
        let until = self.burst().quiet_until(self.timer?)?;
        (until > self.clock).then_some(Horizon { until, events: u64::MAX })
    }

    /// Hand in `count` calls kept under the [`horizon`](Self::horizon), the
    /// last at `last`: the same as `count` calls of [`event`](Self::event),
    /// and, being under the horizon, they leave no action. The last one's
    /// number (`None` for 0). Calls that were not under the horizon (none
    /// now, or `last` at or past it) are refused: `None`, nothing changes.
    pub fn recorded(&mut self, count: u64, last: u64) -> Option<Seq> {
        if count == 0 || self.horizon().is_none_or(|h| last >= h.until) {
            return None;
        }
        // In one step, however many: before the horizon a call is no edge
        // (lodash's `shouldInvoke` is false), no timer is due, and the timer
        // already comes no later than the call's own deadline, so each call
        // only becomes the open window's last.
        let now = self.tick(last);
        self.last_event_at = Some(now);
        self.next_seq = self.next_seq.saturating_add(count);
        self.open = Some(Seq(self.next_seq));
        self.open
    }

    /// The timer from [`next_deadline`](Self::next_deadline) went off at `now`.
    pub fn handle_timeout(&mut self, now: u64) {
        let now = self.tick(now);
        self.expire(now, true);
    }

    /// When the one timer must go off next, if ever.
    pub fn next_deadline(&self) -> Option<u64> {
        self.timer
    }

    /// The next action to carry out, oldest first.
    pub fn poll_action(&mut self) -> Option<LiteAction> {
        let [first, second] = &mut self.actions;
        let action = first.take();
        *first = second.take();
        action
    }

    /// Queue `action` behind those not yet polled. One input leaves at most
    /// [`LITE_MAX_ACTIONS`] (each step ends the window it serves), and the
    /// input before it left its own polled (the driving contract).
    fn push(&mut self, action: LiteAction) {
        let [first, second] = &mut self.actions;
        debug_assert!(second.is_none(), "an action was left unpolled past the next input");
        *(if first.is_none() { first } else { second }) = Some(action);
    }

    /// Fire the open window now (reason `Flush`), disarming the timer.
    pub fn flush(&mut self, now: u64) {
        let now = self.tick(now);
        self.expire(now, false);
        if self.timer.is_some() || self.open.is_some() {
            self.trailing_edge(now, true);
        }
    }

    /// Drop the open window and end the burst, overdue or not (lodash's `cancel`).
    pub fn cancel(&mut self, now: u64) {
        self.tick(now);
        self.timer = None;
        self.anchor = 0;
        self.last_event_at = None;
        if let Some(last) = self.open.take() {
            self.push(LiteAction::Dropped { last, cause: DropCause::Cancelled });
        }
    }

    /// lodash's `pending()`: a timer armed or a window open.
    pub fn pending(&self) -> bool {
        self.timer.is_some() || self.open.is_some()
    }

    /// The quiet period now (ms): fixed, or learned so far with an adaptive wait.
    pub fn wait_ms(&self) -> u64 {
        self.wait_ms
    }
}
