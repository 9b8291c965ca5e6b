//! The action `keyed_poll` took last, field by field: `keyed_poll` answers
//! its [`Kind`], the `action_*` exports its fields (valid until the next poll).

use lull_core::Action;
use spin::mutex::SpinMutex;

use crate::exports;

/// What `poll` answers (as a number).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Nothing left to do.
    None = 0,
    /// A window fires: run the function with the window's last call.
    Fire = 1,
    /// A window is dropped (cancelled, or no trailing edge): let its calls go.
    Dropped = 2,
    /// A run failed for good.
    DeadLettered = 3,
    /// A failed run will be tried again.
    RetryScheduled = 4,
    /// A run did not end within its timeout.
    TimedOut = 5,
    /// A window waits for the run in flight.
    Queued = 6,
}

/// The fields of the last action: window, last seq, superseded window, key.
#[derive(Clone, Copy)]
struct Fields {
    window: f64,
    last: f64,
    supersedes: f64,
    key: u32,
}

static LAST: SpinMutex<Fields> = SpinMutex::new(Fields { window: -1.0, last: -1.0, supersedes: -1.0, key: 0 });

/// Note `action` (of `key`) as the last one polled; its kind.
pub(crate) fn note(action: Option<Action>, key: u32) -> u32 {
    let Some(action) = action else { return Kind::None as u32 };
    let (kind, window, last, supersedes) = match action {
        Action::Fire(f) => (Kind::Fire, f.window, f.span.last.0, f.supersedes),
        Action::Dropped(d) => (Kind::Dropped, d.window, d.span.last.0, None),
        Action::DeadLettered(d) => (Kind::DeadLettered, d.window, d.span.last.0, None),
        Action::RetryScheduled { window, .. } => (Kind::RetryScheduled, window, 0, None),
        Action::TimedOut { window, .. } => (Kind::TimedOut, window, 0, None),
        Action::Queued(q) => (Kind::Queued, q.window, q.span.last.0, None),
    };
    let fields =
        Fields { window: window.0 as f64, last: last as f64, supersedes: supersedes.map_or(-1.0, |w| w.0 as f64), key };
    if let Some(mut noted) = LAST.try_lock() {
        *noted = fields; // (taken only if a trap left it so: see `Table`)
    }
    kind as u32
}

exports! {
    /// The last action's window id.
    pub fn action_window() -> f64 {
        LAST.try_lock().map_or(-1.0, |l| l.window)
    }

    /// The last action's last event (its seq): the call whose `this`/arguments it runs with.
    pub fn action_last() -> f64 {
        LAST.try_lock().map_or(-1.0, |l| l.last)
    }

    /// The window a fire supersedes (its run is over), or -1.
    pub fn action_supersedes() -> f64 {
        LAST.try_lock().map_or(-1.0, |l| l.supersedes)
    }

    /// The key of the last action of a keyed group.
    pub fn action_key() -> u32 {
        LAST.try_lock().map_or(0, |l| l.key)
    }
}
