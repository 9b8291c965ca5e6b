//! Per-key counters, kept in the state and shown in the status.

use serde::{Deserialize, Serialize};

use crate::action::{Fire, Reason};

/// Counters of one key since it was created (they survive snapshots).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Events accepted.
    pub events: u64,
    /// Windows fired for the first time.
    pub windows: u64,
    /// Fires by reason, in [`Reason::ALL`] order (retries and replays included).
    pub fires: [u64; 7],
    /// Events saved by coalescing: `events in fired windows − windows`.
    pub coalesced: u64,
    /// Runs that ended successfully.
    pub succeeded: u64,
    /// Runs that failed or timed out.
    pub failures: u64,
    /// Windows dead-lettered.
    pub dead_lettered: u64,
    /// Runs replaced by a newer fire ([`Overlap::Supersede`](crate::Overlap::Supersede)).
    pub superseded: u64,
    /// Events dropped by `cancel`.
    pub cancelled: u64,
    /// Events dropped for want of a trailing edge.
    pub dropped: u64,
    /// Delay from a window's first event to its first fire, for the last window (ms).
    pub last_delay_ms: Option<u64>,
    /// The longest such delay seen (ms).
    pub max_delay_ms: u64,
}

impl Stats {
    /// How many fires had `reason`.
    pub fn fires_for(&self, reason: Reason) -> u64 {
        self.fires[reason.index()]
    }

    pub(crate) fn record_fire(&mut self, fire: &Fire) {
        self.fires[fire.reason.index()] += 1;
        if fire.attempt == 1 && fire.reason != Reason::Replay {
            self.windows += 1;
            self.coalesced += fire.span.count() - 1;
            let delay = fire.at.saturating_sub(fire.span.first_at);
            self.last_delay_ms = Some(delay);
            self.max_delay_ms = self.max_delay_ms.max(delay);
        }
    }
}
