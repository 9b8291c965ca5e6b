//! Coalescing before the object: within one Worker isolate, single events
//! (`POST …/keys/{key}/events`) for the same key that arrive while that key's
//! previous object request is in flight travel together in the next one, as
//! one batch request ([`crate::key::KeyRequest::Events`]: one transaction, all
//! or nothing). Runtime-free: the router's shell (`runtime/coalesce.rs`) keeps
//! the [`Lanes`] of its isolate, sends what they say and wakes the requests
//! they name.
//!
//! One *lane* per key (its object's name) holds at most one *flight* (the
//! object request in flight) and at most one *waiting batch* behind it:
//!
//! - an event that finds nothing in flight goes alone, as today ([`Arrival::Alone`]);
//! - one that finds a flight joins the waiting batch ([`Arrival::Joined`]); the
//!   first to join is its *leader*;
//! - when the flight lands ([`Lanes::landed`]) the leader is woken; it (or any
//!   member, see below) takes the batch ([`Turn::Send`]), which becomes the
//!   lane's flight, sends it and hands each member its own answer;
//! - a full waiting batch ([`MAX_COALESCED_EVENTS`] events or
//!   [`MAX_COALESCED_BYTES`]) takes no more: the next event goes alone, past the
//!   lane ([`Arrival::Past`]).
//!
//! Guarantees:
//! - a waiting batch is held no longer than the flight ahead of it, and a flight
//!   older than [`TAKE_AFTER_MS`] holds nothing back: so no batch waits longer than
//!   that after a member joined (the flight began before); then any member that
//!   asks takes it itself (its leader's request may have been cancelled, or the
//!   flight's);
//! - a member whose batch travelled waits for its answer at most
//!   [`ANSWER_WITHIN_MS`] after it joined ([`Turn::GiveUp`]);
//! - memory: a lane holds one waiting batch at most (so at most
//!   [`MAX_COALESCED_EVENTS`] events and [`MAX_COALESCED_BYTES`]); a lane goes
//!   when it is idle (nothing in flight, nothing waiting), and lanes left behind
//!   by cancelled requests are swept once stale ([`Lanes::len`] stays within
//!   twice the live lanes, at least [`SWEEP_AT_LANES`]);
//! - each member's answer is its own event's ([`share`]): the batch's `accepted`
//!   entry at its place, or the error the whole batch got.
//!
//! Not guaranteed: coalescing across isolates (each isolate has its own lanes);
//! an order between events of different producers beyond the order they joined.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::http::ApiError;

/// Most events one coalesced batch holds: the next arrival goes alone.
pub const MAX_COALESCED_EVENTS: usize = 256;
/// Most bytes of events (and their idempotency keys) one coalesced batch holds: 1 MiB.
pub const MAX_COALESCED_BYTES: usize = 1024 * 1024;
/// A flight older than this no longer holds its lane, so a waiting batch goes at
/// the latest this long after a member joined it (that member sends it): 2 s.
pub const TAKE_AFTER_MS: u64 = 2_000;
/// A member whose batch travelled gives up waiting for its answer this long after
/// it joined (its sender's request was cancelled, or the object hangs): 30 s.
pub const ANSWER_WITHIN_MS: u64 = 30_000;
/// Lanes are swept of stale ones when there are this many (then at twice as many as remain).
pub const SWEEP_AT_LANES: usize = 64;

/// One object request of a lane in flight (a lone event or a batch), as the lanes know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flight(u64);

/// An event waiting in a lane, and how to wake the request that brought it (`W`).
#[derive(Debug, PartialEq, Eq)]
pub struct Member<W> {
    /// The event's JSON.
    pub event: String,
    /// The producer's `Idempotency-Key`, if any.
    pub idempotency_key: Option<String>,
    /// What wakes its request (the shell's handle on it).
    pub waker: W,
}

impl<W> Member<W> {
    /// Bytes it takes in a batch: its event and its idempotency key.
    fn bytes(&self) -> usize {
        self.event.len() + self.idempotency_key.as_ref().map_or(0, String::len)
    }
}

/// Where an arriving event goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival<W> {
    /// Nothing of its key is in flight: send it alone (a single-event request)
    /// now, as `flight`, and report its end with [`Lanes::landed`].
    Alone {
        /// The flight it is.
        flight: Flight,
        /// The event, back.
        member: Member<W>,
    },
    /// The batch waiting behind its key's flight is full: send it alone, outside the lane.
    Past {
        /// The event, back.
        member: Member<W>,
    },
    /// It waits in its key's next batch: ask [`Lanes::turn`] what to do, now and whenever woken.
    Joined(Place),
}

/// A member's place: its batch and when it joined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// Its lane (the key's object name).
    pub lane: String,
    /// Its batch.
    batch: u64,
    /// When it joined (ms).
    joined: u64,
    /// Whether it was the batch's first member (its leader).
    pub leader: bool,
}

/// What a member does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Turn<W> {
    /// Send these members' events (its own among them) now, as `flight`: it is
    /// their sender. Report the flight's end with [`Lanes::landed`], then hand
    /// each member its answer.
    Send {
        /// The flight they are.
        flight: Flight,
        /// The batch, in the order its members joined.
        members: Vec<Member<W>>,
    },
    /// Wait to be woken, or until `until` (ms) at most, then ask again
    /// (after looking for an answer).
    Wait {
        /// When to ask again at the latest.
        until: u64,
    },
    /// No answer came in time ([`ANSWER_WITHIN_MS`]): answer an error.
    GiveUp,
}

#[derive(Debug)]
struct Waiting<W> {
    id: u64,
    members: Vec<Member<W>>,
    bytes: usize,
    /// When its last member joined.
    last_join: u64,
}

#[derive(Debug)]
struct Lane<W> {
    /// The request in flight, and since when.
    flight: Option<(Flight, u64)>,
    waiting: Option<Waiting<W>>,
}

impl<W> Lane<W> {
    /// Whether a flight holds the lane at `now` (it is not older than [`TAKE_AFTER_MS`]).
    fn held(&self, now: u64) -> bool {
        self.flight.is_some_and(|(_, since)| now < since.saturating_add(TAKE_AFTER_MS))
    }

    /// Whether nothing here matters any more at `now`: no live flight and no
    /// waiting batch a live member could still take.
    fn stale(&self, now: u64) -> bool {
        !self.held(now) && self.waiting.as_ref().is_none_or(|w| now >= w.last_join.saturating_add(ANSWER_WITHIN_MS))
    }
}

/// The lanes of one isolate, by key. `W` wakes a waiting request.
#[derive(Debug)]
pub struct Lanes<W> {
    lanes: HashMap<String, Lane<W>>,
    next: u64,
    sweep_at: usize,
}

impl<W> Default for Lanes<W> {
    fn default() -> Self {
        Lanes { lanes: HashMap::new(), next: 0, sweep_at: SWEEP_AT_LANES }
    }
}

impl<W: Clone> Lanes<W> {
    /// Lanes held now.
    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    /// Whether no lane is held.
    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    fn id(&mut self) -> u64 {
        self.next = self.next.wrapping_add(1);
        self.next
    }

    /// An event for `lane` arrives at `now`.
    pub fn arrive(&mut self, lane: &str, member: Member<W>, now: u64) -> Arrival<W> {
        if self.lanes.len() >= self.sweep_at {
            self.lanes.retain(|_, l| !l.stale(now));
            self.sweep_at = (2 * self.lanes.len()).max(SWEEP_AT_LANES);
        }
        let id = self.id();
        let Some(l) = self.lanes.get_mut(lane) else {
            let flight = Flight(id);
            self.lanes.insert(lane.to_string(), Lane { flight: Some((flight, now)), waiting: None });
            return Arrival::Alone { flight, member };
        };
        let held = l.held(now);
        match &mut l.waiting {
            Some(w) if w.members.len() >= MAX_COALESCED_EVENTS || w.bytes + member.bytes() > MAX_COALESCED_BYTES => {
                Arrival::Past { member }
            }
            Some(w) => {
                w.bytes += member.bytes();
                w.members.push(member);
                w.last_join = now;
                Arrival::Joined(Place { lane: lane.to_string(), batch: w.id, joined: now, leader: false })
            }
            None if held => {
                let bytes = member.bytes();
                l.waiting = Some(Waiting { id, members: vec![member], bytes, last_join: now });
                Arrival::Joined(Place { lane: lane.to_string(), batch: id, joined: now, leader: true })
            }
            None => {
                // Nothing in flight, or a flight too old to hold the lane.
                let flight = Flight(id);
                l.flight = Some((flight, now));
                Arrival::Alone { flight, member }
            }
        }
    }

    /// What the member at `place` does at `now` (after it found no answer).
    pub fn turn(&mut self, place: &Place, now: u64) -> Turn<W> {
        let Some(l) = self.lanes.get_mut(&place.lane) else {
            return self.answer_or_give_up(place, now);
        };
        match &l.waiting {
            Some(w) if w.id == place.batch => {
                // The flight ahead began before any member joined: its bound is theirs too.
                if let Some((_, since)) = l.flight.filter(|_| l.held(now)) {
                    return Turn::Wait { until: since.saturating_add(TAKE_AFTER_MS) };
                }
                let Some(w) = l.waiting.take() else { return Turn::GiveUp };
                let flight = Flight(w.id);
                l.flight = Some((flight, now));
                Turn::Send { flight, members: w.members }
            }
            _ => self.answer_or_give_up(place, now),
        }
    }

    /// A member whose batch is no longer waiting: it travelled (or was swept).
    fn answer_or_give_up(&self, place: &Place, now: u64) -> Turn<W> {
        let until = place.joined.saturating_add(ANSWER_WITHIN_MS);
        if now < until { Turn::Wait { until } } else { Turn::GiveUp }
    }

    /// `flight` of `lane` landed (answered or failed): the lane's waiting
    /// batch's leader, to wake (it sends the batch), if there is one. A flight
    /// that no longer holds its lane (it was overtaken) changes nothing.
    pub fn landed(&mut self, lane: &str, flight: Flight) -> Option<W> {
        let l = self.lanes.get_mut(lane)?;
        if !l.flight.is_some_and(|(f, _)| f == flight) {
            return None;
        }
        l.flight = None;
        match &l.waiting {
            Some(w) => w.members.first().map(|m| m.waker.clone()),
            None => {
                self.lanes.remove(lane);
                None
            }
        }
    }
}

/// A member's answer: what its own single-event request answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body, as the object wrote it.
    pub body: String,
    /// The `Retry-After` header, if the object sent one.
    pub retry_after: Option<String>,
}

#[derive(Deserialize)]
struct Accepted<'a> {
    #[serde(borrow)]
    accepted: Vec<&'a RawValue>,
}

/// Each of `members` members' answers, in order, from the object's answer to
/// their request (`status`, `body`, `retry_after`): one member's request was
/// a single event, whose answer is its own; a batch's `202 {"accepted": […]}`
/// gives each member its entry, byte for byte; any other answer is every member's.
pub fn share(members: usize, status: u16, body: &str, retry_after: Option<&str>) -> Vec<Result<Answer, ApiError>> {
    let whole = || Answer { status, body: body.to_string(), retry_after: retry_after.map(str::to_string) };
    if members == 1 || status != 202 {
        return (0..members).map(|_| Ok(whole())).collect();
    }
    match serde_json::from_str::<Accepted>(body) {
        Ok(Accepted { accepted }) if accepted.len() == members => accepted
            .into_iter()
            .map(|raw| Ok(Answer { status, body: raw.get().to_string(), retry_after: None }))
            .collect(),
        _ => {
            let e = ApiError::Internal(format!("a coalesced batch of {members} events was answered {body:.200}"));
            (0..members).map(|_| Err(e.clone())).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(n: u32) -> Member<u32> {
        Member { event: format!("{{\"n\":{n}}}"), idempotency_key: None, waker: n }
    }

    fn joined(a: Arrival<u32>) -> Place {
        match a {
            Arrival::Joined(place) => place,
            other => panic!("expected to join, got {other:?}"),
        }
    }

    fn alone(a: Arrival<u32>) -> Flight {
        match a {
            Arrival::Alone { flight, .. } => flight,
            other => panic!("expected to go alone, got {other:?}"),
        }
    }

    fn sent(t: Turn<u32>) -> (Flight, Vec<u32>) {
        match t {
            Turn::Send { flight, members } => (flight, members.into_iter().map(|m| m.waker).collect()),
            other => panic!("expected to send, got {other:?}"),
        }
    }

    #[test]
    fn a_lone_event_goes_alone_and_its_lane_goes_when_it_lands() {
        let mut lanes = Lanes::default();
        let flight = alone(lanes.arrive("k", member(1), 0));
        assert_eq!(lanes.len(), 1);
        assert_eq!(lanes.landed("k", flight), None, "nothing waits");
        assert!(lanes.is_empty(), "an idle lane is removed");
        alone(lanes.arrive("k", member(2), 5));
        alone(lanes.arrive("other", member(3), 5));
    }

    #[test]
    fn events_behind_a_flight_wait_together_and_their_leader_sends_them_when_it_lands() {
        let mut lanes = Lanes::default();
        let first = alone(lanes.arrive("k", member(1), 0));
        let leader = joined(lanes.arrive("k", member(2), 1));
        let other = joined(lanes.arrive("k", member(3), 2));
        assert!(leader.leader && !other.leader);
        assert_eq!(lanes.turn(&leader, 3), Turn::Wait { until: TAKE_AFTER_MS });
        assert_eq!(lanes.turn(&other, 3), Turn::Wait { until: TAKE_AFTER_MS }, "bounded by the flight's age");
        assert_eq!(lanes.landed("k", first), Some(2), "the leader is woken");
        // Woken, the leader takes the batch: in the order its members joined.
        let (batch, members) = sent(lanes.turn(&leader, 10));
        assert_eq!(members, [2, 3]);
        assert_eq!(lanes.turn(&other, 11), Turn::Wait { until: 2 + ANSWER_WITHIN_MS }, "it travelled");
        // Events now wait behind the batch, and go once it lands.
        let next = joined(lanes.arrive("k", member(4), 12));
        assert!(next.leader);
        assert_eq!(lanes.landed("k", batch), Some(4));
        let (last, members) = sent(lanes.turn(&next, 13));
        assert_eq!(members, [4]);
        assert_eq!(lanes.landed("k", last), None);
        assert!(lanes.is_empty());
    }

    #[test]
    fn an_event_joins_a_batch_whose_leader_was_woken_but_has_not_taken_it_yet() {
        let mut lanes = Lanes::default();
        let first = alone(lanes.arrive("k", member(1), 0));
        let leader = joined(lanes.arrive("k", member(2), 1));
        assert_eq!(lanes.landed("k", first), Some(2));
        joined(lanes.arrive("k", member(3), 2));
        assert_eq!(sent(lanes.turn(&leader, 3)).1, [2, 3]);
    }

    #[test]
    fn a_full_batch_takes_no_more_and_the_next_event_goes_past_the_lane() {
        let mut lanes = Lanes::default();
        alone(lanes.arrive("k", member(0), 0));
        for n in 1..=MAX_COALESCED_EVENTS as u32 {
            joined(lanes.arrive("k", member(n), 1));
        }
        assert!(matches!(lanes.arrive("k", member(999), 1), Arrival::Past { member } if member.waker == 999));
        let mut lanes = Lanes::default();
        alone(lanes.arrive("k", member(0), 0));
        let big = |n| Member { event: "x".repeat(MAX_COALESCED_BYTES / 2), idempotency_key: None, waker: n };
        joined(lanes.arrive("k", big(1), 1));
        joined(lanes.arrive("k", Member { idempotency_key: Some("p".into()), ..member(2) }, 1));
        assert!(matches!(lanes.arrive("k", big(3), 1), Arrival::Past { .. }), "over 1 MiB with it");
        joined(lanes.arrive("k", member(4), 1));
    }

    #[test]
    fn a_member_whose_leader_never_wakes_sends_the_batch_itself_after_the_bound() {
        let mut lanes = Lanes::default();
        let first = alone(lanes.arrive("k", member(1), 0));
        let leader = joined(lanes.arrive("k", member(2), 100));
        let other = joined(lanes.arrive("k", member(3), 500));
        // The flight lands; its leader's request was cancelled and never asks.
        assert_eq!(lanes.landed("k", first), Some(2));
        assert_eq!(
            lanes.turn(&other, 600),
            Turn::Send { flight: Flight(leader.batch), members: vec![member(2), member(3)] }
        );
        // The leader, late, finds its batch gone: it waits for its answer, within the bound.
        assert_eq!(lanes.turn(&leader, 700), Turn::Wait { until: 100 + ANSWER_WITHIN_MS });
        assert_eq!(lanes.turn(&leader, 100 + ANSWER_WITHIN_MS), Turn::GiveUp);
    }

    #[test]
    fn a_flight_that_never_lands_holds_its_lane_no_longer_than_the_bound() {
        let mut lanes = Lanes::default();
        let stuck = alone(lanes.arrive("k", member(1), 0));
        let leader = joined(lanes.arrive("k", member(2), 10));
        let other = joined(lanes.arrive("k", member(3), 1_500));
        assert_eq!(lanes.turn(&leader, 1_000), Turn::Wait { until: TAKE_AFTER_MS });
        // The flight is too old: the first member to ask sends the batch.
        let (batch, members) = sent(lanes.turn(&other, TAKE_AFTER_MS));
        assert_eq!(members, [2, 3]);
        // The stuck flight landing late wakes no one and does not free the lane.
        assert_eq!(lanes.landed("k", stuck), None);
        joined(lanes.arrive("k", member(4), TAKE_AFTER_MS + 1));
        assert_eq!(lanes.landed("k", batch), Some(4));
        // A lane whose flight is too old and has no batch waiting takes the next event alone.
        let mut lanes = Lanes::default();
        alone(lanes.arrive("k", member(1), 0));
        alone(lanes.arrive("k", member(2), TAKE_AFTER_MS));
    }

    #[test]
    fn a_member_that_joined_late_waits_no_longer_than_the_flight_ahead_is_bounded() {
        let mut lanes = Lanes::default();
        alone(lanes.arrive("k", member(1), 0));
        let early = joined(lanes.arrive("k", member(2), 10));
        let late = joined(lanes.arrive("k", member(3), TAKE_AFTER_MS - 100));
        // Both wait for the same bound: the flight's, reached before either member's own.
        assert_eq!(lanes.turn(&early, 20), Turn::Wait { until: TAKE_AFTER_MS });
        assert_eq!(lanes.turn(&late, TAKE_AFTER_MS - 1), Turn::Wait { until: TAKE_AFTER_MS });
        let (_, members) = sent(lanes.turn(&late, TAKE_AFTER_MS));
        assert_eq!(members, [2, 3]);
    }

    #[test]
    fn lanes_left_by_cancelled_requests_are_swept() {
        let mut lanes = Lanes::default();
        for n in 0..SWEEP_AT_LANES as u32 - 2 {
            alone(lanes.arrive(&format!("dead-{n}"), member(n), 0));
        }
        let live = alone(lanes.arrive("live", member(1), 10));
        // One lane with a batch waiting, and one more.
        joined(lanes.arrive("live", member(2), 10));
        alone(lanes.arrive("other", member(3), 10));
        assert_eq!(lanes.len(), SWEEP_AT_LANES);
        // The next arrival sweeps the stale lanes (flights too old, nothing waiting).
        alone(lanes.arrive("new", member(3), TAKE_AFTER_MS));
        assert_eq!(lanes.len(), 3, "live, other and new");
        assert_eq!(lanes.landed("live", live), Some(2));
        // A waiting batch is kept while a member may still ask for it, and swept after.
        let mut lanes = Lanes::default();
        alone(lanes.arrive("live", member(1), 0));
        let place = joined(lanes.arrive("live", member(2), 1));
        for n in 0..SWEEP_AT_LANES as u32 - 1 {
            alone(lanes.arrive(&format!("more-{n}"), member(n), 1));
        }
        alone(lanes.arrive("a", member(8), ANSWER_WITHIN_MS));
        assert_eq!(lanes.len(), 2, "the flights are too old; the batch is not");
        for n in 0..SWEEP_AT_LANES as u32 - 2 {
            alone(lanes.arrive(&format!("again-{n}"), member(n), ANSWER_WITHIN_MS));
        }
        let late = 1 + ANSWER_WITHIN_MS + TAKE_AFTER_MS;
        alone(lanes.arrive("last", member(9), late));
        assert_eq!(lanes.len(), 1, "only the newest");
        assert_eq!(lanes.turn(&place, late), Turn::GiveUp, "a member swept with its batch gives up");
    }

    #[test]
    fn each_member_gets_its_own_entry_or_the_batchs_error() {
        let body = r#"{"accepted":[{"seq":7,"window":2},{"seq":8,"window":2},{"seq":7,"window":2}]}"#;
        let answers: Vec<_> = share(3, 202, body, None).into_iter().map(Result::unwrap).collect();
        assert_eq!(
            answers.iter().map(|a| (a.status, a.body.as_str())).collect::<Vec<_>>(),
            [(202, r#"{"seq":7,"window":2}"#), (202, r#"{"seq":8,"window":2}"#), (202, r#"{"seq":7,"window":2}"#)]
        );
        let refused = r#"{"error":{"code":"too_many_pending","message":"m","request_id":"r"}}"#;
        let answers = share(2, 429, refused, Some("60"));
        assert!(
            answers
                .iter()
                .all(|a| a == &Ok(Answer { status: 429, body: refused.into(), retry_after: Some("60".into()) }))
        );
        // One member's request was a single event: its answer, as it came.
        let one = share(1, 202, r#"{"seq":1,"window":1}"#, None);
        assert_eq!(one, [Ok(Answer { status: 202, body: r#"{"seq":1,"window":1}"#.into(), retry_after: None })]);
        // An answer that does not fit its batch fails every member, none gets another's entry.
        for bad in [r#"{"accepted":[{"seq":1,"window":1}]}"#, "{}", "not json"] {
            let answers = share(2, 202, bad, None);
            assert!(answers.iter().all(|a| matches!(a, Err(ApiError::Internal(_)))), "{bad}");
        }
    }
}
