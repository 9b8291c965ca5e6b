//! The lite engine: one per debounced function ([`lull_core::Lite`]: lodash's
//! timing alone, runs ending as they start), for `debounce` and `throttle`.
//!
//! Every export takes the handle `create` gave first; times are
//! `performance.now()` milliseconds. Three calls drive an engine: [`step`]
//! (one input, with the calls the driver kept), [`poll`] until 0, then
//! [`read`] its deadline and horizon: few crossings, and few exports to ship.

use lull_core::{Lite, LiteAction};

use crate::steps::{Read, Step};
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
        let t = policy::timing(wait, max_wait, leading, trailing);
        match Lite::timing(t.wait, t.max_wait, t.leading, t.trailing) {
            Ok(engine) => ENGINES.add(engine).map_or(policy::UNUSABLE, |h| h as i32),
            Err(e) => policy::refusal(&e),
        }
    }

    /// Let the engine go (its owner was collected or destroyed).
    pub fn free(h: u32) {
        ENGINES.free(h)
    }

    /// Hand in the `kept` calls the driver kept before the horizon (the last
    /// at `kept_at`; 0 for none), then take [`Step`] `kind` at `now`. A
    /// call's seq for the two event steps, else 0; -1 for a bad handle or
    /// kind, or kept calls that were not under the horizon (then nothing changes).
    pub fn step(h: u32, kind: u32, now: f64, kept: f64, kept_at: f64) -> f64 {
        let Some(kind) = Step::from_u32(kind) else { return -1.0 };
        with(h, -1.0, |e| {
            if kept >= 1.0 && e.recorded(ms(kept), ms(kept_at)).is_none() {
                return -1.0;
            }
            let now = ms(now);
            match kind {
                Step::Event => e.event(now).0 as f64,
                Step::EventInTurn => e.event_in_turn(now).0 as f64,
                Step::Timeout => {
                    e.handle_timeout(now);
                    0.0
                }
                Step::Flush => {
                    e.flush(now);
                    0.0
                }
                Step::Cancel => {
                    e.cancel(now);
                    0.0
                }
            }
        })
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

    /// The [`Read`] `what` of the engine; -1 for a bad handle or `what`.
    pub fn read(h: u32, what: u32) -> f64 {
        let Some(what) = Read::from_u32(what) else { return -1.0 };
        with(h, -1.0, |e| match what {
            Read::Deadline => opt(e.next_deadline()),
            Read::Horizon => opt(e.horizon().map(|h| h.until)),
            Read::Pending => f64::from(u8::from(e.pending())),
        })
    }
}
