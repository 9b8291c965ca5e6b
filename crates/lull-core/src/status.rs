//! A key's state as a plain, serialisable view (for status APIs and debugging).

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::action::{DeadLetter, QueuedWindow, Reason, Span, WindowId};
use crate::stats::Stats;

/// Everything one key holds right now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The quiet period in force for this key (ms): fixed, or as learned.
    pub wait_ms: u64,
    /// The median gap learned so far (adaptive wait only).
    pub learned_gap_ms: Option<u64>,
    /// When the driver must call `handle_timeout` next.
    pub next_deadline: Option<u64>,
    /// The window gathering events, if any.
    pub open: Option<OpenWindow>,
    /// Windows ready to fire, waiting for the run slot (oldest first).
    pub queued: Vec<QueuedWindow>,
    /// The run holding the slot, if any.
    pub run: Option<RunStatus>,
    /// Windows whose every attempt failed.
    pub dead_letters: Vec<DeadLetter>,
    /// Counters.
    pub stats: Stats,
}

/// The window gathering events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenWindow {
    /// Its id.
    pub window: WindowId,
    /// Its events so far.
    pub span: Span,
    /// Set when it is already due but waits for the run slot (it still absorbs events).
    pub due: Option<Reason>,
}

/// The run holding the key's slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStatus {
    /// Its window.
    pub window: WindowId,
    /// The window's events.
    pub span: Span,
    /// Why the window first fired.
    pub reason: Reason,
    /// The current (or, in backoff, the last) attempt.
    pub attempt: u32,
    /// When the current attempt fired (ms).
    pub fired_at: u64,
    /// In flight: when it times out, if the policy has `run_timeout`.
    pub timeout_at: Option<u64>,
    /// Waiting for a retry: when it fires again.
    pub retry_at: Option<u64>,
}

/// The part of a key's state that grows with its backlog: windows waiting for
/// the run slot and dead letters.
///
/// A durable driver keeps these as rows of their own instead of rewriting them
/// with every snapshot: [`Debouncer::take_backlog`](crate::Debouncer::take_backlog)
/// before serialising, [`Debouncer::restore_backlog`](crate::Debouncer::restore_backlog)
/// after loading; [`Action::Queued`](crate::Action::Queued),
/// [`Action::Fire`](crate::Action::Fire), [`Action::Dropped`](crate::Action::Dropped)
/// and [`Action::DeadLettered`](crate::Action::DeadLettered) say when a row comes and goes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backlog {
    /// Windows ready to fire once the slot is free, oldest first.
    pub queued: VecDeque<QueuedWindow>,
    /// Windows whose every attempt failed, oldest first.
    pub dead: Vec<DeadLetter>,
}
