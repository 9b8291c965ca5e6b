//! What the engine asks a driver to do: [`Action`]s and the window data they carry.

use core::fmt;

use serde::{Deserialize, Serialize};

/// Sequence number of one accepted event, unique and increasing per key.
///
/// The engine never stores payloads: a driver keeps each event's payload under
/// its `Seq` and a [`Fire`] says which seqs it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Seq(pub u64);

/// Identifier of one window (a set of coalesced events), unique per
/// [`Debouncer`](crate::Debouncer) or [`Keyed`](crate::Keyed) group and stable
/// across retries, replays and snapshots (an idempotency key can use it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WindowId(pub u64);

impl fmt::Display for WindowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The contiguous events a window holds: seqs `first..=last` and their times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// Seq of the window's first event.
    pub first: Seq,
    /// Seq of the window's last event.
    pub last: Seq,
    /// Time (ms) of the first event.
    pub first_at: u64,
    /// Time (ms) of the last event.
    pub last_at: u64,
}

impl Span {
    pub(crate) fn one(seq: Seq, at: u64) -> Self {
        Span { first: seq, last: seq, first_at: at, last_at: at }
    }

    pub(crate) fn push(&mut self, seq: Seq, at: u64) {
        self.last = seq;
        self.last_at = at;
    }

    /// Number of events in the window.
    pub fn count(&self) -> u64 {
        self.last.0 - self.first.0 + 1
    }

    /// Whether the window holds `seq`.
    pub fn contains(&self, seq: Seq) -> bool {
        self.first <= seq && seq <= self.last
    }
}

/// Why a window fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// First event of a burst, with `leading` on.
    Leading,
    /// The quiet period (`wait`) passed with no new event.
    Quiet,
    /// `max_wait` passed since the burst's last fire (or its start).
    MaxWait,
    /// The driver called `flush`.
    Flush,
    /// The window reached `max_batch` events.
    Full,
    /// A failed run is tried again.
    Retry,
    /// A dead-lettered window is run again on request.
    Replay,
}

impl Reason {
    /// Every reason, in the order [`Stats::fires`](crate::Stats::fires) counts them.
    pub const ALL: [Reason; 7] =
        [Reason::Leading, Reason::Quiet, Reason::MaxWait, Reason::Flush, Reason::Full, Reason::Retry, Reason::Replay];

    /// The reason's name as it appears in JSON and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Leading => "leading",
            Reason::Quiet => "quiet",
            Reason::MaxWait => "max_wait",
            Reason::Flush => "flush",
            Reason::Full => "full",
            Reason::Retry => "retry",
            Reason::Replay => "replay",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Start a run now: perform the action for the events in `span`.
///
/// The driver reports the run's end with `run_succeeded` / `run_failed`
/// (same `window`). Until then the key's run slot is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fire {
    /// The window being run.
    pub window: WindowId,
    /// Why it fires now.
    pub reason: Reason,
    /// 1 for a window's first run (and for a replay's), then 2, 3, … for retries.
    pub attempt: u32,
    /// Time (ms) of the fire.
    pub at: u64,
    /// The events covered.
    pub span: Span,
    /// With [`Overlap::Supersede`](crate::Overlap::Supersede): the run this
    /// fire replaces; the driver should abort it. Its end is no longer expected.
    pub supersedes: Option<WindowId>,
}

/// Why events were let go without a fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropCause {
    /// The driver called `cancel`.
    Cancelled,
    /// The burst ended with `trailing` off (lodash drops these calls too).
    NoTrailingEdge,
}

/// Events that will never be fired; the driver can release their payloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// The window that held them.
    pub window: WindowId,
    /// The events.
    pub span: Span,
    /// Why.
    pub cause: DropCause,
}

/// A window whose every attempt failed. It is kept until replayed or discarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The window.
    pub window: WindowId,
    /// Its events (the driver keeps their payloads).
    pub span: Span,
    /// Why it first fired.
    pub reason: Reason,
    /// Attempts made.
    pub attempts: u32,
    /// Time (ms) of the last failure.
    pub failed_at: u64,
}

/// One instruction from the engine, drained with `poll_action`.
///
/// Actions come out in the order the engine decided them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    /// Run a window now.
    Fire(Fire),
    /// Events let go without a fire (cancel, or no trailing edge).
    Dropped(Dropped),
    /// A run did not end within the policy's `run_timeout`; it counts as failed.
    /// A late `run_succeeded` for it is refused.
    TimedOut {
        /// The run's window.
        window: WindowId,
        /// The attempt that timed out.
        attempt: u32,
    },
    /// A failed run will be tried again at `at` (a `Fire` with reason `Retry` follows then).
    RetryScheduled {
        /// The window.
        window: WindowId,
        /// The attempt that will be made.
        attempt: u32,
        /// When (ms).
        at: u64,
    },
    /// A window exhausted its attempts and was kept as a dead letter.
    DeadLettered(DeadLetter),
    /// A window is due (a full batch, or a replay) while the run slot is
    /// taken: it waits, oldest first, and fires when the slot frees (or is
    /// dropped by `cancel`, unless it is a replay).
    Queued(QueuedWindow),
}

/// A window ready to fire once the slot is free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedWindow {
    /// Its id.
    pub window: WindowId,
    /// Its events.
    pub span: Span,
    /// Why it will fire.
    pub reason: Reason,
}

/// An accepted event: its seq and the window it joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    /// The event's sequence number (keep its payload under it).
    pub seq: Seq,
    /// The window it joined (already fired, if it fired on the spot).
    pub window: WindowId,
}
