//! The lite engine: one per debounced function ([`lull_core::Lite`]: lodash's
//! timing alone, runs ending as they start), for `debounce` and `throttle`.
//!
//! Every export takes the handle `create` gave first; times are
//! `performance.now()` milliseconds.

use lull_core::{Lite, LiteAction};

use crate::table::Table;
use crate::time::{ms, opt};
use crate::{exports, policy};

/// The engines.
static ENGINES: Table<Lite> = Table::new();

pub(crate) fn live() -> u32 {
    ENGINES.live()
}

fn with<R>(h: u32, absent: R, f: impl FnOnce(&mut Lite) -> R) -> R {
    ENGINES.with(h, absent, f)
}

exports! {
    /// A new engine: lodash's timing (see [`policy::timing`]); each run
    /// ends as it starts (the function returns before anything else happens).
    /// Its handle, or a negative [`policy::refusal`] code.
    pub fn create(wait: f64, max_wait: f64, leading: u32, trailing: u32) -> i32 {
        match Lite::new(policy::timing(wait, max_wait, leading, trailing)) {
            Ok(engine) => ENGINES.add(engine).map_or(policy::UNUSABLE, |h| h as i32),
            Err(e) => policy::refusal(&e),
        }
    }

    /// Let the engine go (its owner was collected or destroyed).
    pub fn free(h: u32) {
        ENGINES.free(h)
    }

    /// One event at `now`: its seq. `same_turn`: the event loop has not been
    /// free since the previous event (a synchronous loop), so deadlines that
    /// passed meanwhile wait for the timer, as in lodash.
    pub fn event(h: u32, now: f64, same_turn: u32) -> f64 {
        with(h, -1.0, |e| {
            let seq = if same_turn != 0 { e.event_in_turn(ms(now)) } else { e.event(ms(now)) };
            seq.0 as f64
        })
    }

    /// `count` events the driver kept before the horizon, the last at `last`.
    pub fn recorded(h: u32, count: f64, last: f64) {
        with(h, (), |e| {
            e.recorded(ms(count), ms(last));
        })
    }

    /// Until when (exclusive) calls only add to the open window, or -1: the
    /// driver may keep any number of them and hand them in with `recorded`.
    pub fn horizon(h: u32) -> f64 {
        with(h, -1.0, |e| opt(e.horizon().map(|h| h.until)))
    }

    /// The timer went off at `now`.
    pub fn timeout(h: u32, now: f64) {
        with(h, (), |e| e.handle_timeout(ms(now)))
    }

    /// Fire the open window now.
    pub fn flush(h: u32, now: f64) {
        with(h, (), |e| e.flush(ms(now)))
    }

    /// Drop the open window, overdue or not (lodash's `cancel`).
    pub fn cancel(h: u32, now: f64) {
        with(h, (), |e| e.cancel(ms(now)))
    }

    /// When the one timer must go off next, or -1 for none.
    pub fn deadline(h: u32) -> f64 {
        with(h, -1.0, |e| opt(e.next_deadline()))
    }

    /// lodash's `pending()`: a timer armed or a window waiting (1 or 0).
    pub fn pending(h: u32) -> u32 {
        with(h, 0, |e| e.pending() as u32)
    }

    /// The next action, as the window's last call (its seq): positive to run
    /// the function with that call, negative to let the window's calls go
    /// (dropped), 0 when nothing is left.
    pub fn poll(h: u32) -> f64 {
        match with(h, None, Lite::poll_action) {
            Some(LiteAction::Fire { last, .. }) => last.0 as f64,
            Some(LiteAction::Dropped { last, .. }) => -(last.0 as f64),
            None => 0.0,
        }
    }
}
