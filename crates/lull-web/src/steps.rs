//! The lite engine's two selector arguments, as numbers: what `step` does
//! ([`Step`]) and what `read` answers ([`Read`]). Here, outside the `lite`
//! module, so that the native test holding `lite.js` to them always builds.

/// What the lite engine's `step` does at `now`, once the kept calls are in.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A call: the engine numbers it and may fire.
    Event = 0,
    /// A call in the same turn of the event loop as the one before: a
    /// deadline that passed meanwhile waits for the timer, as in lodash.
    EventInTurn = 1,
    /// The timer went off.
    Timeout = 2,
    /// Fire the open window now.
    Flush = 3,
    /// Drop the open window, overdue or not (lodash's `cancel`).
    Cancel = 4,
}

impl Step {
    /// Every step, for the tests that hold the drivers to these numbers.
    pub const ALL: [Step; 5] = [Step::Event, Step::EventInTurn, Step::Timeout, Step::Flush, Step::Cancel];

    /// The step numbered `n`, if any.
    pub fn from_u32(n: u32) -> Option<Step> {
        Some(match n {
            0 => Step::Event,
            1 => Step::EventInTurn,
            2 => Step::Timeout,
            3 => Step::Flush,
            4 => Step::Cancel,
            _ => return None,
        })
    }
}

/// What the lite engine's `read` answers.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// When the one timer must go off next, or -1 for none.
    Deadline = 0,
    /// Until when (exclusive) calls only add to the open window, or -1: the
    /// driver may keep any number of them and hand them in with the next step.
    Horizon = 1,
    /// lodash's `pending()`: a timer armed or a window waiting (1 or 0).
    Pending = 2,
}

impl Read {
    /// Every reading, for the tests that hold the drivers to these numbers.
    pub const ALL: [Read; 3] = [Read::Deadline, Read::Horizon, Read::Pending];

    /// The reading numbered `n`, if any.
    pub fn from_u32(n: u32) -> Option<Read> {
        Some(match n {
            0 => Read::Deadline,
            1 => Read::Horizon,
            2 => Read::Pending,
            _ => return None,
        })
    }
}
