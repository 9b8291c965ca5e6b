//! [`Gate`]: a topic's bound on forwards to its target — at most
//! `forward_concurrency` in flight and, optionally, starts at least
//! `1000 / forward_rate_per_s` ms apart — for queue delivery, where batches,
//! consumer invocations and isolates forward at once. One gate per topic
//! lives in a Durable Object; consumers ask it before each forward
//! ([`Gate::acquire`]) and tell it after ([`Gate::release`]).
//!
//! Like the core, it is told the time and asked what to do; it never waits.
//!
//! Guarantees:
//! - **The bound holds**: a lease is granted only while fewer than the limit
//!   are held, and only once the rate's spacing since the last grant passed.
//! - **No lease is lost for good**: a lease not released (its consumer died)
//!   expires `lease_ms` after its grant, so a crash costs the bound's room for
//!   at most that long, never forever.
//! - **A wait says when room can come at the latest without a release**:
//!   [`Grant::Wait`] carries the rate's next start, or, while every lease is
//!   held, the soonest expiry. A release is not a time: the gate object wakes
//!   its waiters on it ([`super::wait`]), nobody polls.
//! - **A waiter that gives up is told when its turn is likely**
//!   ([`Gate::estimate`]): from how long forwards hold their lease (smoothed
//!   over the releases, [`Gate::finished`]) and its place in line, so a
//!   backlog behind a slow target comes back at the target's pace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Leases a gate holds at most, whatever the limit asks.
pub const MAX_LIMIT: u32 = 64;

/// A forward's permission, or when to ask again. It crosses to the consumer
/// as the answer to an `Acquire` ([`GateAnswer::Grant`](crate::queue::gate::GateAnswer::Grant)):
/// `{"expires_at", "go"}` or `{"wait_until"}` (the fields in the order the
/// first releases wrote them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Grant {
    /// Go: forward now, then release `lease`.
    Go {
        /// When it expires unless released (unix ms).
        expires_at: u64,
        /// The lease to release.
        #[serde(rename = "go")]
        lease: u64,
    },
    /// Not now: the rate's next start, or (every lease held) the soonest
    /// expiry, unless a release comes first (unix ms).
    Wait {
        /// When room comes at the latest without a release.
        #[serde(rename = "wait_until")]
        retry_at: u64,
    },
}

/// One topic's bound on forwards in flight and their rate (serialisable: its
/// Durable Object stores it after every change, so a restart keeps the leases).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    limit: u32,
    spacing_ms: u64,
    lease_ms: u64,
    held: BTreeMap<u64, u64>,
    next_lease: u64,
    last_start: Option<u64>,
    /// How long a forward holds its lease, smoothed over the releases (ms);
    /// absent until the first (and in gates stored before it existed).
    #[serde(default)]
    hold_ms: Option<u64>,
}

/// The weight of the newest hold time in the smoothed one (1 in `HOLD_SMOOTHING`).
const HOLD_SMOOTHING: u64 = 4;
/// Places in line [`Gate::estimate`] looks ahead at most (past it, the estimate of the last).
const ESTIMATE_PLACES: usize = 4_096;

impl Gate {
    /// A gate for `limit` forwards in flight (1..=[`MAX_LIMIT`]), at most
    /// `rate_per_s` starts a second if given, each lease expiring after `lease_ms`.
    pub fn new(limit: u32, rate_per_s: Option<f64>, lease_ms: u64) -> Gate {
        let spacing_ms = rate_per_s.filter(|r| r.is_finite() && *r > 0.0).map_or(0, |r| (1000.0 / r).ceil() as u64);
        Gate {
            limit: limit.clamp(1, MAX_LIMIT),
            spacing_ms,
            lease_ms: lease_ms.max(1),
            held: BTreeMap::new(),
            next_lease: 1,
            last_start: None,
            hold_ms: None,
        }
    }

    /// Change the bound (a redeployed topic); leases held stay held.
    pub fn configure(&mut self, limit: u32, rate_per_s: Option<f64>, lease_ms: u64) {
        let fresh = Gate::new(limit, rate_per_s, lease_ms);
        (self.limit, self.spacing_ms, self.lease_ms) = (fresh.limit, fresh.spacing_ms, fresh.lease_ms);
    }

    /// Ask to forward at `now`.
    pub fn acquire(&mut self, now: u64) -> Grant {
        self.held.retain(|_, expires| *expires > now);
        if let Some(last) = self.last_start {
            let next = last.saturating_add(self.spacing_ms);
            if now < next {
                return Grant::Wait { retry_at: next };
            }
        }
        if self.held.len() >= self.limit as usize {
            let soonest = self.held.values().min().copied().unwrap_or(now);
            return Grant::Wait { retry_at: soonest };
        }
        let lease = self.next_lease;
        self.next_lease += 1;
        let expires_at = now.saturating_add(self.lease_ms);
        self.held.insert(lease, expires_at);
        self.last_start = Some(now);
        Grant::Go { lease, expires_at }
    }

    /// When room can come at `now` at the latest without a release (as a
    /// [`Grant::Wait`] would say), without taking it: `now` if there is room.
    pub fn acquire_hint(&self, now: u64) -> u64 {
        let spaced = self.next_start(now);
        let live: Vec<u64> = self.held.values().copied().filter(|expires| *expires > now).collect();
        if live.len() >= self.limit as usize { live.into_iter().min().unwrap_or(now).max(spaced) } else { spaced }
    }

    /// The forward under `lease` ended; `false` if the lease had expired (or never was).
    pub fn release(&mut self, lease: u64) -> bool {
        self.held.remove(&lease).is_some()
    }

    /// The forward under `lease` ended at `now` (as [`Gate::release`]), and
    /// how long it held the lease feeds the smoothed hold time.
    pub fn finished(&mut self, lease: u64, now: u64) -> bool {
        let Some(expires) = self.held.remove(&lease) else { return false };
        let held = now.saturating_sub(expires.saturating_sub(self.lease_ms)).max(1);
        self.hold_ms = Some(match self.hold_ms {
            None => held,
            Some(hold) => (hold * (HOLD_SMOOTHING - 1) + held).div_ceil(HOLD_SMOOTHING),
        });
        true
    }

    /// The smoothed time a forward holds its lease (ms), once a release told it.
    pub fn hold_ms(&self) -> Option<u64> {
        self.hold_ms
    }

    /// When room is likely at `now` for the waiter with `ahead` others before
    /// it (unix ms): each lease held ends one hold time after its grant (not
    /// before `now`, not after its expiry), each end starts the next in line,
    /// and starts keep the rate's spacing. Before any release the hold time is
    /// taken as the age of the oldest lease held (at least 1 s): a lower bound,
    /// so the estimate errs early (a waiter back early waits in the gate).
    pub fn estimate(&self, now: u64, ahead: usize) -> u64 {
        let live: Vec<(u64, u64)> = self
            .held
            .values()
            .filter(|expires| **expires > now)
            .map(|expires| (expires.saturating_sub(self.lease_ms), *expires))
            .collect();
        let oldest = live.iter().map(|(start, _)| now.saturating_sub(*start)).max().unwrap_or(0);
        let hold = self.hold_ms.unwrap_or(oldest.max(1_000)).max(1);
        // When each of the `limit` places frees, soonest first.
        let mut free: Vec<u64> =
            live.iter().map(|(start, expires)| start.saturating_add(hold).clamp(now, *expires)).collect();
        free.resize(self.limit as usize, now);
        free.truncate(self.limit as usize);
        let mut turn = now;
        for _ in 0..=ahead.min(ESTIMATE_PLACES) {
            free.sort_unstable();
            turn = free[0];
            free[0] = turn.saturating_add(hold);
        }
        let places = ahead.min(ESTIMATE_PLACES) as u64;
        let spaced = self.next_start(now).saturating_add(self.spacing_ms.saturating_mul(places));
        turn.max(spaced)
    }

    /// The rate's next start at `now` (`now` if the spacing has passed).
    fn next_start(&self, now: u64) -> u64 {
        self.last_start.map_or(now, |last| last.saturating_add(self.spacing_ms).max(now))
    }

    /// Leases held at `now` (expired ones not counted).
    pub fn in_flight(&self, now: u64) -> usize {
        self.held.values().filter(|expires| **expires > now).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(grant: Grant) -> u64 {
        match grant {
            Grant::Go { lease, .. } => lease,
            Grant::Wait { retry_at } => panic!("waited until {retry_at}"),
        }
    }

    #[test]
    fn never_more_than_the_limit_in_flight() {
        let mut gate = Gate::new(2, None, 10_000);
        let (a, _b) = (go(gate.acquire(0)), go(gate.acquire(0)));
        assert_eq!(gate.acquire(1), Grant::Wait { retry_at: 10_000 }, "the soonest expiry: no poll");
        assert_eq!(gate.in_flight(1), 2);
        assert!(gate.release(a));
        assert!(!gate.release(a), "a lease is released once");
        go(gate.acquire(2));
        assert!(matches!(gate.acquire(3), Grant::Wait { .. }));
    }

    #[test]
    fn a_hint_says_when_room_comes_without_taking_it() {
        let mut gate = Gate::new(1, Some(10.0), 500);
        assert_eq!(gate.acquire_hint(7), 7, "room now");
        go(gate.acquire(0));
        assert_eq!(gate.acquire_hint(10), 500, "the soonest expiry");
        assert_eq!(gate.in_flight(10), 1, "nothing taken");
        let mut spaced = Gate::new(2, Some(10.0), 500);
        go(spaced.acquire(0));
        assert_eq!(spaced.acquire_hint(10), 100, "the rate's next start");
    }

    #[test]
    fn a_waiter_is_told_its_turn_from_the_hold_time_and_its_place() {
        // One at a time, each forward holding its lease 2 s.
        let mut gate = Gate::new(1, None, 35_000);
        let first = go(gate.acquire(0));
        assert_eq!(gate.hold_ms(), None);
        assert_eq!(gate.estimate(1_500, 0), 1_500, "before any release: the oldest lease's age");
        assert_eq!(gate.estimate(1_500, 1), 3_000);
        assert_eq!(gate.estimate(100, 0), 1_000, "at least 1 s");
        assert!(gate.finished(first, 2_000));
        assert_eq!(gate.hold_ms(), Some(2_000));
        let second = go(gate.acquire(2_000));
        // The lease in flight ends at 4 s; then one every 2 s per place.
        assert_eq!(gate.estimate(3_000, 0), 4_000);
        assert_eq!(gate.estimate(3_000, 4), 12_000);
        assert_eq!(gate.estimate(5_000, 0), 5_000, "overdue: not before now");
        // Smoothed: one quick release moves it a quarter of the way.
        let mut quick = gate.clone();
        assert!(!quick.finished(second + 1, 2_400), "an unknown lease teaches nothing");
        assert!(quick.finished(second, 2_400));
        assert_eq!(quick.hold_ms(), Some(1_600));
        // Two at a time: places pair up.
        let mut two = Gate::new(2, None, 35_000);
        let lease = go(two.acquire(0));
        two.finished(lease, 1_000);
        assert_eq!(two.estimate(0, 0), 0, "room now");
        go(two.acquire(0));
        go(two.acquire(0));
        assert_eq!([0, 1, 2, 3].map(|ahead| two.estimate(0, ahead)), [1_000, 1_000, 2_000, 2_000]);
        // The rate's spacing is a floor per place.
        let mut spaced = Gate::new(64, Some(2.0), 35_000);
        go(spaced.acquire(0));
        assert_eq!(spaced.estimate(0, 3), 2_000, "next start at 500 ms, then 500 ms per place");
        assert!(gate.estimate(0, usize::MAX) < u64::MAX, "bounded work and no overflow");
    }

    #[test]
    fn a_lease_never_released_expires() {
        let mut gate = Gate::new(1, None, 500);
        let lost = go(gate.acquire(0));
        assert_eq!(gate.acquire(490), Grant::Wait { retry_at: 500 }, "ask again when it expires");
        go(gate.acquire(500));
        assert!(!gate.release(lost), "too late: it had expired");
    }

    #[test]
    fn starts_are_spaced_by_the_rate() {
        let mut gate = Gate::new(4, Some(3.0), 10_000); // 334 ms apart
        let first = go(gate.acquire(1_000));
        assert_eq!(gate.acquire(1_100), Grant::Wait { retry_at: 1_334 });
        gate.release(first);
        assert_eq!(gate.acquire(1_333), Grant::Wait { retry_at: 1_334 }, "room is not enough: the spacing holds");
        go(gate.acquire(1_334));
        // Over any second, at most ⌈rate⌉ starts.
        let mut gate = Gate::new(64, Some(5.0), 10_000);
        let starts: Vec<u64> = (0..5_000).filter(|t| matches!(gate.acquire(*t), Grant::Go { .. })).collect();
        assert!(starts.windows(2).all(|w| w[1] - w[0] >= 200));
        assert_eq!(starts.len(), 25);
    }

    #[test]
    fn limits_are_clamped_and_a_new_bound_keeps_what_is_held() {
        let mut gate = Gate::new(0, Some(f64::NAN), 10_000);
        go(gate.acquire(0));
        assert!(matches!(gate.acquire(0), Grant::Wait { .. }), "a limit of 0 means 1; NaN means no rate");
        gate.configure(3, None, 10_000);
        assert_eq!(gate.in_flight(1), 1);
        go(gate.acquire(1));
        go(gate.acquire(1));
        assert!(matches!(gate.acquire(1), Grant::Wait { .. }));
        assert_eq!(Gate::new(1_000, None, 1).limit, MAX_LIMIT);
        let mut brief = Gate::new(1, None, 0);
        go(brief.acquire(0));
        go(brief.acquire(1)); // a lease of 0 ms lasts 1 ms
    }
}
