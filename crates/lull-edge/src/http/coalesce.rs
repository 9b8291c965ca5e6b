//! Coalescing before the object: within one Worker isolate, single events
//! (`POST …/keys/{key}/events`) and batches' shares (`events:batch`, one key's
//! items of a batch) for the same key that arrive while that key's previous
//! object request is in flight travel together in the next one, as one batch
//! request ([`crate::key::KeyRequest::Events`]: one transaction, all or
//! nothing). A share travels whole: its items are never split between
//! requests. Runtime-free: the router's shell (`runtime/coalesce.rs`) keeps
//! the [`Lanes`] of its isolate, sends what they say and wakes each waiting
//! request when they say.
//!
//! One *lane* per key (its object's name) holds at most one *flight* (the
//! object request in flight) and at most one *waiting batch* behind it:
//!
//! - a *member* (an event, or a share) that finds nothing in flight goes alone,
//!   as its own request ([`Arrival::Alone`]);
//! - one that finds a flight joins the waiting batch ([`Arrival::Joined`]);
//! - a member of the waiting batch that looks once the flight has landed
//!   ([`Lanes::landed`]) takes the batch ([`Turn::Send`]): it becomes the lane's
//!   flight, and that member sends it and leaves each member its own answer;
//! - a waiting batch takes no member that would take it past
//!   [`MAX_COALESCED_EVENTS`] events or [`MAX_COALESCED_BYTES`]: that member goes
//!   alone, past the lane ([`Arrival::Past`]), as does a share too large to
//!   wait in any batch.
//!
//! Nobody wakes a waiting request: each looks again at the time [`Turn::Wait`]
//! names, on its own timer. (On workerd, a request woken from another request's
//! context, even through a promise of its own, was seen to build its answer in
//! that other context after some 16,000 such wakes in one isolate; a request's
//! own timer always runs in its own context.) That time is when its flight is
//! expected to land, from how long flights of this isolate took lately
//! ([`Lanes::typical_ms`]), then every [`POLL_MS`] until it does.
//!
//! Guarantees:
//! - a waiting batch is held no longer than the flight ahead of it (plus at most
//!   [`POLL_MS`] and a timer's lateness), and a flight older than [`TAKE_AFTER_MS`]
//!   holds nothing back: so no batch waits longer than that after a member joined
//!   (the flight began before); then any member that looks takes it itself;
//! - a member whose batch travelled waits for its answer at most
//!   [`ANSWER_WITHIN_MS`] after it joined ([`Turn::GiveUp`]);
//! - memory: a lane holds one waiting batch at most (so at most
//!   [`MAX_COALESCED_EVENTS`] events and [`MAX_COALESCED_BYTES`]); a lane goes
//!   when it is idle (nothing in flight, nothing waiting), and lanes left behind
//!   by cancelled requests are swept once stale ([`Lanes::len`] stays within
//!   twice the live lanes, at least [`SWEEP_AT_LANES`]);
//! - each member's answer is what its own request would have had ([`share`]):
//!   an event, the batch's `accepted` entry at its place; a share, its entries
//!   as `{"accepted": […]}`; or, for every member, the error the whole batch got.
//!
//! Not guaranteed: coalescing across isolates (each isolate has its own lanes);
//! an order between events of different producers beyond the order they joined.

use std::collections::HashMap;

use serde_json::value::RawValue;

use crate::error::ApiError;
use crate::http::ObjectAnswer;
use crate::http::batch::Accepted;
use crate::key::KeyRequest;

/// Most events one coalesced batch holds: the next arrival goes alone.
pub const MAX_COALESCED_EVENTS: usize = 256;
/// Most bytes of events (and their idempotency keys) one coalesced batch holds: 1 MiB.
pub const MAX_COALESCED_BYTES: usize = 1024 * 1024;
/// A flight older than this no longer holds its lane, so a waiting batch goes at
/// the latest this long after a member joined it (that member sends it): 2 s.
pub(crate) const TAKE_AFTER_MS: u64 = 2_000;
/// A member whose batch travelled gives up waiting for its answer this long after
/// it joined (its sender's request was cancelled, or the object hangs): 30 s.
pub(crate) const ANSWER_WITHIN_MS: u64 = 30_000;
/// Lanes are swept of stale ones when there are this many (then at twice as many as remain).
pub(crate) const SWEEP_AT_LANES: usize = 64;
/// A member whose flight is due but has not landed looks again this much later: 1 ms.
pub(crate) const POLL_MS: u64 = 1;
/// How long a flight is expected to take before any has landed: 5 ms.
pub(crate) const FIRST_TYPICAL_MS: u64 = 5;

/// One object request of a lane in flight (a lone event or a batch), as the lanes know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flight(u64);

/// What waits in a lane for one producer request: a single event, or a
/// batch's share of the key; with the request's slot for its answer (`W`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Member<W> {
    /// Its events: each one's JSON and the producer's `Idempotency-Key`, if any.
    events: Vec<(String, Option<String>)>,
    /// How its request is answered (a share's count is its events').
    shape: Shape,
    /// Where its request finds its answer (the shell's handle on it).
    pub slot: W,
}

/// How a member's request is answered: as the single-event route answers, or
/// as a batch's share is (`{"accepted": […]}`, an entry per event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// One event (`POST …/keys/{key}/events`): its entry.
    Single,
    /// A batch's share of the key, of this many events.
    Share(usize),
}

impl Shape {
    /// How many events it answers for.
    pub(crate) fn events(self) -> usize {
        match self {
            Shape::Single => 1,
            Shape::Share(n) => n,
        }
    }
}

impl<W> Member<W> {
    /// One event's member.
    pub(crate) fn single(event: String, idempotency_key: Option<String>, slot: W) -> Member<W> {
        Member { events: vec![(event, idempotency_key)], shape: Shape::Single, slot }
    }

    /// A batch's share of one key.
    pub(crate) fn share(events: Vec<(String, Option<String>)>, slot: W) -> Member<W> {
        Member { shape: Shape::Share(events.len()), events, slot }
    }

    /// How its request is answered.
    pub(crate) fn shape(&self) -> Shape {
        self.shape
    }

    /// Its events, and its slot.
    pub(crate) fn into_parts(self) -> (Vec<(String, Option<String>)>, W) {
        (self.events, self.slot)
    }

    /// Its own request, as it came: one event as the single-event route sends
    /// it, a share as a batch (one transaction).
    pub(crate) fn request(self) -> KeyRequest {
        request(&[self.shape], self.events)
    }

    /// Bytes it takes in a batch: its events and their idempotency keys.
    fn bytes(&self) -> usize {
        self.events.iter().map(|(event, key)| event.len() + key.as_ref().map_or(0, String::len)).sum()
    }

    /// Whether it fits in a batch that holds `events` events and `bytes` bytes.
    fn fits(&self, events: usize, bytes: usize) -> bool {
        events + self.events.len() <= MAX_COALESCED_EVENTS && bytes + self.bytes() <= MAX_COALESCED_BYTES
    }
}

/// Where an arriving member goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Arrival<W> {
    /// Nothing of its key is in flight: send it alone, as its own request
    /// ([`Member::request`]), now, as `flight`, and report its end with [`Lanes::landed`].
    Alone {
        /// The flight it is.
        flight: Flight,
        /// The member, back.
        member: Member<W>,
    },
    /// The batch waiting behind its key's flight has no room for it (or it is
    /// too large for any): send it alone, outside the lane.
    Past {
        /// The member, back.
        member: Member<W>,
    },
    /// It waits in its key's next batch: ask [`Lanes::turn`] what to do, now and each time it looks again.
    Joined(Place),
}

/// A member's place: its lane, its batch and when it joined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    /// Its lane (the key's object name).
    pub lane: String,
    /// Its batch.
    batch: u64,
    /// When it joined (ms).
    joined: u64,
}

/// What a member does next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Turn<W> {
    /// Send these members' events (its own among them) now, as `flight`: it is
    /// their sender. Report the flight's end with [`Lanes::landed`], and leave
    /// each member its answer.
    Send {
        /// The flight they are.
        flight: Flight,
        /// The batch, in the order its members joined.
        members: Vec<Member<W>>,
    },
    /// Look for the answer, and ask again, at `until` (ms).
    Wait {
        /// When to look again.
        until: u64,
    },
    /// No answer came in time ([`ANSWER_WITHIN_MS`]): answer an error.
    GiveUp,
}

#[derive(Debug)]
struct Waiting<W> {
    id: u64,
    members: Vec<Member<W>>,
    events: usize,
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

/// The lanes of one isolate, by key. `W` is a waiting request's slot.
#[derive(Debug)]
pub(crate) struct Lanes<W> {
    lanes: HashMap<String, Lane<W>>,
    next: u64,
    sweep_at: usize,
    typical: u64,
}

impl<W> Default for Lanes<W> {
    fn default() -> Self {
        Lanes { lanes: HashMap::new(), next: 0, sweep_at: SWEEP_AT_LANES, typical: FIRST_TYPICAL_MS }
    }
}

impl<W> Lanes<W> {
    /// Lanes held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lanes.len()
    }

    /// Whether no lane is held.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// How long a flight of this isolate takes lately (ms, at least 1): a moving
    /// average of the flights that landed, [`FIRST_TYPICAL_MS`] before any did.
    #[cfg(test)]
    pub(crate) fn typical_ms(&self) -> u64 {
        self.typical
    }

    fn id(&mut self) -> u64 {
        self.next = self.next.wrapping_add(1);
        self.next
    }

    /// A member for `lane` arrives at `now`.
    pub(crate) fn arrive(&mut self, lane: &str, member: Member<W>, now: u64) -> Arrival<W> {
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
            Some(w) if !member.fits(w.events, w.bytes) => Arrival::Past { member },
            Some(w) => {
                w.events += member.events.len();
                w.bytes += member.bytes();
                w.members.push(member);
                w.last_join = now;
                Arrival::Joined(Place { lane: lane.to_string(), batch: w.id, joined: now })
            }
            None if held && !member.fits(0, 0) => Arrival::Past { member },
            None if held => {
                let (events, bytes) = (member.events.len(), member.bytes());
                l.waiting = Some(Waiting { id, members: vec![member], events, bytes, last_join: now });
                Arrival::Joined(Place { lane: lane.to_string(), batch: id, joined: now })
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
    pub(crate) fn turn(&mut self, place: &Place, now: u64) -> Turn<W> {
        let typical = self.typical;
        let give_up = place.joined.saturating_add(ANSWER_WITHIN_MS);
        let Some(l) = self.lanes.get_mut(&place.lane) else {
            return answer_or_give_up(now, place.joined, give_up);
        };
        let held = l.held(now);
        match (&l.waiting, l.flight) {
            (Some(w), Some((_, since))) if w.id == place.batch && held => {
                // The flight began before any member joined: its bound is theirs too.
                let bound = since.saturating_add(TAKE_AFTER_MS);
                Turn::Wait { until: next_look(now, since.saturating_add(typical)).min(bound) }
            }
            (Some(w), _) if w.id == place.batch => match l.waiting.take() {
                Some(w) => {
                    let flight = Flight(w.id);
                    l.flight = Some((flight, now));
                    Turn::Send { flight, members: w.members }
                }
                None => Turn::GiveUp,
            },
            // Its batch is the flight: its answer is due when the flight lands.
            (_, Some((Flight(id), since))) if id == place.batch && now < give_up => {
                Turn::Wait { until: next_look(now, since.saturating_add(typical)).min(give_up) }
            }
            // Its batch landed (its answer was left with it), or was overtaken, or swept.
            _ => answer_or_give_up(now, place.joined, give_up),
        }
    }

    /// `flight` of `lane` landed at `now` (answered or failed). A flight that no
    /// longer holds its lane (it was overtaken) frees nothing, but its time still counts.
    pub(crate) fn landed(&mut self, lane: &str, flight: Flight, now: u64) {
        let Some(l) = self.lanes.get_mut(lane) else { return };
        let Some((current, since)) = l.flight else { return };
        if current != flight {
            return;
        }
        // A moving average, a quarter weight to the newest.
        let took = now.saturating_sub(since).clamp(1, TAKE_AFTER_MS);
        self.typical = ((3 * self.typical + took) / 4).max(1);
        l.flight = None;
        if l.waiting.is_none() {
            self.lanes.remove(lane);
        }
    }
}

/// When to look again at `now` for something `due` then: at `due`, and once it is
/// overdue, after [`POLL_MS`] and then ever further apart (half the time overdue).
fn next_look(now: u64, due: u64) -> u64 {
    if now < due { due } else { now.saturating_add(POLL_MS.max(now.saturating_sub(due) / 2)) }
}

/// A member whose batch no longer waits in its lane and is not the lane's flight:
/// it looks again (ever further apart since it joined), until `give_up`.
fn answer_or_give_up<W>(now: u64, joined: u64, give_up: u64) -> Turn<W> {
    if now >= give_up { Turn::GiveUp } else { Turn::Wait { until: next_look(now, joined).min(give_up) } }
}

/// The object request for the events of members shaped `shapes`, in order: a
/// lone single event as the single-event route sends it, anything else as a
/// batch (one transaction, all or nothing).
pub(crate) fn request(shapes: &[Shape], mut events: Vec<(String, Option<String>)>) -> KeyRequest {
    match events.pop() {
        Some((body, idempotency_key)) if shapes == [Shape::Single] && events.is_empty() => {
            KeyRequest::Event { body, idempotency_key, events_per_minute: None, holder: None }
        }
        last => {
            events.extend(last);
            KeyRequest::Events { events, events_per_minute: None, holder: None }
        }
    }
}

/// Each member's answer, in order (`shapes`), from the object's `answer` to
/// their request: a lone member's request went as it came, so the answer is
/// its own; a batch's `202 {"accepted": […]}` gives each member its entries,
/// byte for byte (an event its entry, a share `{"accepted": […]}` of its
/// own); any other answer is every member's.
pub(crate) fn share(shapes: &[Shape], answer: &ObjectAnswer) -> Vec<Result<ObjectAnswer, ApiError>> {
    let ObjectAnswer { status, body, .. } = answer;
    let status = *status;
    let whole = || answer.clone();
    if shapes.len() == 1 || status != 202 {
        return shapes.iter().map(|_| Ok(whole())).collect();
    }
    let events = shapes.iter().map(|s| s.events()).sum::<usize>();
    match serde_json::from_str::<Accepted<&RawValue>>(body) {
        Ok(Accepted { accepted }) if accepted.len() == events => {
            let mut entries = accepted.into_iter();
            let mut answers = Vec::with_capacity(shapes.len());
            for shape in shapes {
                let body = match shape {
                    Shape::Single => entries.next().map(|raw| raw.get().to_string()),
                    Shape::Share(n) => {
                        serde_json::to_string(&Accepted { accepted: entries.by_ref().take(*n).collect() }).ok()
                    }
                };
                answers
                    .push(body.map(|body| ObjectAnswer { status, body, retry_after: None }).ok_or_else(|| {
                        ApiError::Internal("a coalesced batch's answer could not be shared out".into())
                    }));
            }
            answers
        }
        _ => {
            let e = ApiError::Internal(format!("a coalesced batch of {events} events was answered {body:.200}"));
            shapes.iter().map(|_| Err(e.clone())).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(n: u32) -> Member<u32> {
        Member::single(format!("{{\"n\":{n}}}"), None, n)
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
            Turn::Send { flight, members } => (flight, members.into_iter().map(|m| m.slot).collect()),
            other => panic!("expected to send, got {other:?}"),
        }
    }

    #[test]
    fn a_lone_event_goes_alone_and_its_lane_goes_when_it_lands() {
        let mut lanes = Lanes::default();
        let flight = alone(lanes.arrive("k", member(1), 0));
        assert_eq!(lanes.len(), 1);
        lanes.landed("k", flight, 3);
        assert!(lanes.is_empty(), "an idle lane is removed");
        alone(lanes.arrive("k", member(2), 5));
        alone(lanes.arrive("other", member(3), 5));
    }

    #[test]
    fn events_behind_a_flight_wait_together_and_the_first_to_look_after_it_lands_sends_them() {
        let mut lanes = Lanes::default();
        let first = alone(lanes.arrive("k", member(1), 0));
        let a = joined(lanes.arrive("k", member(2), 1));
        let b = joined(lanes.arrive("k", member(3), 2));
        // Both look again when the flight is expected to land, then every millisecond.
        assert_eq!(lanes.turn(&a, 3), Turn::Wait { until: FIRST_TYPICAL_MS });
        assert_eq!(lanes.turn(&b, 3), Turn::Wait { until: FIRST_TYPICAL_MS });
        assert_eq!(lanes.turn(&a, FIRST_TYPICAL_MS), Turn::Wait { until: FIRST_TYPICAL_MS + POLL_MS });
        lanes.landed("k", first, 8);
        // Whoever looks first takes the batch: in the order its members joined.
        let (batch, members) = sent(lanes.turn(&b, 9));
        assert_eq!(members, [2, 3]);
        let typical = lanes.typical_ms();
        assert_eq!(lanes.turn(&a, 9), Turn::Wait { until: 9 + typical }, "its batch is the flight");
        // Events now wait behind the batch, and go once it lands.
        let next = joined(lanes.arrive("k", member(4), 10));
        lanes.landed("k", batch, 20);
        let (last, members) = sent(lanes.turn(&next, 21));
        assert_eq!(members, [4]);
        assert_eq!(lanes.turn(&a, 21), Turn::Wait { until: 21 + 10 }, "its batch landed: its answer is there");
        lanes.landed("k", last, 22);
        assert!(lanes.is_empty());
    }

    #[test]
    fn an_event_that_finds_a_landed_flights_batch_not_yet_taken_joins_it_and_takes_it() {
        let mut lanes = Lanes::default();
        let first = alone(lanes.arrive("k", member(1), 0));
        joined(lanes.arrive("k", member(2), 1));
        lanes.landed("k", first, 3);
        let late = joined(lanes.arrive("k", member(3), 4));
        assert_eq!(sent(lanes.turn(&late, 4)).1, [2, 3]);
    }

    #[test]
    fn the_expected_flight_time_follows_the_flights_that_landed() {
        let mut lanes = Lanes::default();
        assert_eq!(lanes.typical_ms(), FIRST_TYPICAL_MS);
        for n in 0..20 {
            let flight = alone(lanes.arrive("k", member(n), 1_000 * u64::from(n)));
            lanes.landed("k", flight, 1_000 * u64::from(n) + 40);
        }
        assert!((36..=40).contains(&lanes.typical_ms()), "{}", lanes.typical_ms());
        let stuck = alone(lanes.arrive("k", member(1), 100_000));
        let a = joined(lanes.arrive("k", member(2), 100_001));
        assert_eq!(lanes.turn(&a, 100_001), Turn::Wait { until: 100_000 + lanes.typical_ms() });
        // A flight that never lands counts as taking the bound, no more.
        lanes.landed("k", stuck, 100_000 + 10 * TAKE_AFTER_MS);
        assert!(lanes.typical_ms() <= 40 + TAKE_AFTER_MS / 4);
    }

    #[test]
    fn a_full_batch_takes_no_more_and_the_next_event_goes_past_the_lane() {
        let mut lanes = Lanes::default();
        alone(lanes.arrive("k", member(0), 0));
        for n in 1..=MAX_COALESCED_EVENTS as u32 {
            joined(lanes.arrive("k", member(n), 1));
        }
        assert!(matches!(lanes.arrive("k", member(999), 1), Arrival::Past { member } if member.slot == 999));
        let mut lanes = Lanes::default();
        alone(lanes.arrive("k", member(0), 0));
        let big = |n| Member::single("x".repeat(MAX_COALESCED_BYTES / 2), None, n);
        joined(lanes.arrive("k", big(1), 1));
        joined(lanes.arrive("k", Member::single("{}".into(), Some("p".into()), 2), 1));
        assert!(matches!(lanes.arrive("k", big(3), 1), Arrival::Past { .. }), "over 1 MiB with it");
        joined(lanes.arrive("k", member(4), 1));
    }

    #[test]
    fn a_flight_that_never_lands_holds_its_lane_no_longer_than_the_bound_and_is_polled_ever_less_often() {
        let mut lanes = Lanes::default();
        let stuck = alone(lanes.arrive("k", member(1), 0));
        let a = joined(lanes.arrive("k", member(2), 10));
        let b = joined(lanes.arrive("k", member(3), 1_500));
        // Overdue, the flight is looked at ever further apart, never past its bound.
        let mut looks = 0;
        let mut now = 10;
        while let Turn::Wait { until } = lanes.turn(&a, now) {
            assert!(until > now && until <= TAKE_AFTER_MS);
            now = until;
            looks += 1;
            if now == TAKE_AFTER_MS {
                break;
            }
        }
        assert!(looks < 30, "{looks} looks in {TAKE_AFTER_MS} ms");
        // The flight is too old: the first member to look sends the batch.
        let (batch, members) = sent(lanes.turn(&b, TAKE_AFTER_MS));
        assert_eq!(members, [2, 3]);
        // The stuck flight landing late does not free the lane.
        lanes.landed("k", stuck, TAKE_AFTER_MS + 1);
        let next = joined(lanes.arrive("k", member(4), TAKE_AFTER_MS + 1));
        lanes.landed("k", batch, TAKE_AFTER_MS + 2);
        assert_eq!(sent(lanes.turn(&next, TAKE_AFTER_MS + 3)).1, [4]);
        // A lane whose flight is too old and has no batch waiting takes the next event alone.
        let mut lanes = Lanes::default();
        alone(lanes.arrive("k", member(1), 0));
        alone(lanes.arrive("k", member(2), TAKE_AFTER_MS));
    }

    #[test]
    fn a_member_whose_batch_never_answers_gives_up_after_the_bound_looking_ever_less_often() {
        let mut lanes = Lanes::default();
        let first = alone(lanes.arrive("k", member(1), 0));
        let a = joined(lanes.arrive("k", member(2), 100));
        let b = joined(lanes.arrive("k", member(3), 500));
        lanes.landed("k", first, 600);
        // One member sends the batch, and its request is cancelled: nobody leaves an answer.
        sent(lanes.turn(&b, 600));
        let mut looks = 0;
        let mut now = 600;
        loop {
            match lanes.turn(&a, now) {
                Turn::Wait { until } => {
                    assert!(until > now && until <= 100 + ANSWER_WITHIN_MS);
                    now = until;
                    looks += 1;
                }
                Turn::GiveUp => break,
                Turn::Send { .. } => panic!("its batch was sent"),
            }
        }
        assert_eq!(now, 100 + ANSWER_WITHIN_MS);
        assert!(looks < 40, "{looks} looks");
    }

    #[test]
    fn a_member_that_joined_late_waits_no_longer_than_the_flight_ahead_is_bounded() {
        let mut lanes = Lanes::default();
        alone(lanes.arrive("k", member(1), 0));
        let early = joined(lanes.arrive("k", member(2), 10));
        let late = joined(lanes.arrive("k", member(3), TAKE_AFTER_MS - 100));
        // Both wait for the same bound: the flight's, reached before either member's own.
        assert!(matches!(lanes.turn(&early, TAKE_AFTER_MS - 1), Turn::Wait { until } if until <= TAKE_AFTER_MS));
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
        lanes.landed("live", live, TAKE_AFTER_MS);
        assert_eq!(lanes.len(), 3, "its batch still waits");
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

    /// An object's answer with `status`, `body` and `retry_after`.
    fn answer(status: u16, body: &str, retry_after: Option<&str>) -> ObjectAnswer {
        ObjectAnswer { status, body: body.into(), retry_after: retry_after.map(str::to_string) }
    }

    #[test]
    fn each_member_gets_its_own_entry_or_the_batchs_error() {
        let body = r#"{"accepted":[{"seq":7,"window":2},{"seq":8,"window":2},{"seq":7,"window":2}]}"#;
        let answers: Vec<_> =
            share(&[Shape::Single; 3], &answer(202, body, None)).into_iter().map(Result::unwrap).collect();
        assert_eq!(
            answers.iter().map(|a| (a.status, a.body.as_str())).collect::<Vec<_>>(),
            [(202, r#"{"seq":7,"window":2}"#), (202, r#"{"seq":8,"window":2}"#), (202, r#"{"seq":7,"window":2}"#)]
        );
        let refused = r#"{"error":{"code":"too_many_pending","message":"m","request_id":"r"}}"#;
        let answers = share(&[Shape::Single, Shape::Share(4)], &answer(429, refused, Some("60")));
        assert!(
            answers
                .iter()
                .all(|a| a == &Ok(ObjectAnswer { status: 429, body: refused.into(), retry_after: Some("60".into()) }))
        );
        // One member's request was a single event: its answer, as it came.
        let one = share(&[Shape::Single], &answer(202, r#"{"seq":1,"window":1}"#, None));
        assert_eq!(one, [Ok(ObjectAnswer { status: 202, body: r#"{"seq":1,"window":1}"#.into(), retry_after: None })]);
        // An answer that does not fit its batch fails every member, none gets another's entry.
        for bad in [r#"{"accepted":[{"seq":1,"window":1}]}"#, "{}", "not json"] {
            let answers = share(&[Shape::Single; 2], &answer(202, bad, None));
            assert!(answers.iter().all(|a| matches!(a, Err(ApiError::Internal(_)))), "{bad}");
        }
    }

    fn share_of(n: usize, slot: u32) -> Member<u32> {
        Member::share((0..n).map(|i| (format!("{{\"i\":{i}}}"), None)).collect(), slot)
    }

    #[test]
    fn a_batchs_share_waits_whole_or_goes_past_the_lane() {
        let mut lanes = Lanes::default();
        // Nothing in flight: a share of any size goes alone, as its own request.
        let flight = alone(lanes.arrive("k", share_of(MAX_COALESCED_EVENTS + 1, 1), 0));
        // Behind the flight: too large for any batch, it goes past; one that fits waits with events.
        assert!(matches!(lanes.arrive("k", share_of(MAX_COALESCED_EVENTS + 1, 2), 1), Arrival::Past { .. }));
        let a = joined(lanes.arrive("k", share_of(20, 3), 1));
        joined(lanes.arrive("k", member(4), 1));
        joined(lanes.arrive("k", share_of(MAX_COALESCED_EVENTS - 22, 5), 1));
        // 255 events wait: a share of two has no room (it is never split), one event has.
        assert!(matches!(lanes.arrive("k", share_of(2, 6), 1), Arrival::Past { member } if member.slot == 6));
        joined(lanes.arrive("k", member(7), 1));
        lanes.landed("k", flight, 2);
        let Turn::Send { members, .. } = lanes.turn(&a, 3) else { panic!("a member sends the batch") };
        assert_eq!(members.iter().map(|m| m.slot).collect::<Vec<_>>(), [3, 4, 5, 7]);
        assert_eq!(members.iter().map(|m| m.shape().events()).sum::<usize>(), MAX_COALESCED_EVENTS);
        assert_eq!(members[0].shape(), Shape::Share(20));
        // Bytes bound a share as they bound events: some 768 KiB wait; half a MiB more goes past.
        let mut lanes = Lanes::default();
        alone(lanes.arrive("k", member(0), 0));
        let half = |slot| Member::share(vec![("x".repeat(MAX_COALESCED_BYTES / 4), None); 2], slot);
        joined(lanes.arrive("k", half(1), 1));
        let over = Member::share(vec![("x".repeat(MAX_COALESCED_BYTES / 4), None), ("y".into(), Some("k".into()))], 2);
        joined(lanes.arrive("k", over, 1));
        assert!(matches!(lanes.arrive("k", half(3), 1), Arrival::Past { member } if member.slot == 3));
    }

    #[test]
    fn a_share_gets_its_own_entries_as_its_own_batch_request_would() {
        let body =
            r#"{"accepted":[{"seq":1,"window":1},{"seq":2,"window":1},{"seq":3,"window":1},{"seq":4,"window":1}]}"#;
        let shapes = [Shape::Single, Shape::Share(2), Shape::Single];
        let answers: Vec<_> = share(&shapes, &answer(202, body, None)).into_iter().map(|a| a.unwrap().body).collect();
        assert_eq!(
            answers,
            [
                r#"{"seq":1,"window":1}"#,
                r#"{"accepted":[{"seq":2,"window":1},{"seq":3,"window":1}]}"#,
                r#"{"seq":4,"window":1}"#
            ]
        );
        // A lone share's request went as it came: the answer is its own.
        assert_eq!(
            share(&[Shape::Share(4)], &answer(202, body, None)),
            [Ok(ObjectAnswer { status: 202, body: body.into(), retry_after: None })]
        );
        // Entries that do not add up to the members' events fail them all.
        assert!(share(&[Shape::Single, Shape::Share(2)], &answer(202, body, None)).iter().all(Result::is_err));
    }
}
