//! lodash's timing rules, in one place: what [`Lane`](crate::lane) and
//! [`Lite`](crate::Lite) both ask of a burst. They read lodash's variables
//! (here under clearer names) and decide; the engines keep the state.

use crate::action::Reason;

/// lodash's variables for one burst, as the rules read them.
#[derive(Clone, Copy)]
pub(crate) struct Burst {
    /// `lastCallTime`.
    pub(crate) last_event_at: Option<u64>,
    /// `lastInvokeTime`.
    pub(crate) anchor: u64,
    /// `wait` (fixed, or learned so far).
    pub(crate) wait_ms: u64,
    /// `maxWait`, if set.
    pub(crate) max_wait: Option<u64>,
}

/// What an event does, once lodash's `shouldInvoke` is read (before the event counts).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventEdge {
    /// A new burst: anchor it, arm the timer for `wait`, fire if `leading`.
    Leading,
    /// `maxWait` reached in a tight loop: re-arm for `wait` and fire now.
    MaxWait,
    /// The burst goes on: the timer, lazily, is never moved later.
    Extends,
}

impl Burst {
    /// lodash's `shouldInvoke`: the burst is over (`wait` passed since the
    /// last event) or `maxWait` passed since it was anchored.
    pub(crate) fn should_invoke(&self, now: u64) -> bool {
        let Some(last) = self.last_event_at else {
            return true;
        };
        now.saturating_sub(last) >= self.wait_ms || self.max_wait.is_some_and(|m| now.saturating_sub(self.anchor) >= m)
    }

    /// lodash's `remainingWait`.
    fn remaining_wait(&self, now: u64) -> u64 {
        let since_last = self.last_event_at.map_or(0, |last| now.saturating_sub(last));
        let waiting = self.wait_ms.saturating_sub(since_last);
        match self.max_wait {
            Some(m) => waiting.min(m.saturating_sub(now.saturating_sub(self.anchor))),
            None => waiting,
        }
    }

    /// lodash's `debounced()` at an event, `invoking` being `shouldInvoke` read before it.
    pub(crate) fn event_edge(&self, invoking: bool, timer: Option<u64>) -> EventEdge {
        match (invoking, timer) {
            (true, None) => EventEdge::Leading,
            (true, Some(_)) if self.max_wait.is_some() => EventEdge::MaxWait,
            _ => EventEdge::Extends,
        }
    }

    /// lodash's `timerExpired` at `now`: `None` for the trailing edge now, or
    /// when to look again (the burst went on).
    pub(crate) fn timer_reached(&self, now: u64) -> Option<u64> {
        let rearm = now.saturating_add(self.remaining_wait(now));
        // `rearm <= now` only when time saturates at u64::MAX: every burst is over.
        (!self.should_invoke(now) && rearm > now).then_some(rearm)
    }

    /// Why a trailing edge at `now` fires: a flush, the quiet period, or `maxWait`.
    pub(crate) fn trailing_reason(&self, now: u64, flushing: bool) -> Reason {
        let quiet = self.last_event_at.is_some_and(|last| now.saturating_sub(last) >= self.wait_ms);
        match (flushing, quiet) {
            (true, _) => Reason::Flush,
            (false, true) => Reason::Quiet,
            (false, false) => Reason::MaxWait,
        }
    }

    /// Until when (exclusive) an event can be neither a leading nor a
    /// `maxWait` edge, the timer (at `timer`) being armed: before the quiet
    /// period's end, `maxWait`'s bound and the timer.
    pub(crate) fn quiet_until(&self, timer: u64) -> Option<u64> {
        let quiet = self.last_event_at?.saturating_add(self.wait_ms);
        let bound = self.max_wait.map_or(u64::MAX, |m| self.anchor.saturating_add(m));
        Some(timer.min(quiet).min(bound))
    }
}
