//! [`RoomCache`]: what the router (one per isolate) remembers of each queue
//! topic's answer to "are its dead letters at their bound?" ([`Room`]), so an
//! event costs no gate request: the gate object is asked at most once per
//! topic per [`ROOM_CHECK_MS`] in each isolate.
//!
//! Guarantees:
//! - **Backends before pages**: client tokens' events are refused from half
//!   the bound, backends' (ingest, admin) at the bound, so one page's windows
//!   that keep failing cannot stop every producer of the topic.
//! - **Stale by at most [`ROOM_CHECK_MS`]**: an answer older than that is
//!   asked again before it decides an event. A topic that became full may
//!   accept events that long (their windows' dead letters, if any, wait on the
//!   dead-letter queue: nothing is lost); one emptied by a replay or discard
//!   may refuse them that long (an admin call in the same isolate forgets the
//!   answer at once).
//! - **A gate that cannot answer refuses nothing**: it is remembered as not
//!   full for the interval (events are not held hostage to the gate's health).

use std::collections::BTreeMap;

/// How long an isolate trusts a topic's "full" or "not full" (ms).
pub(crate) const ROOM_CHECK_MS: u64 = 5_000;

/// A queue topic's room for dead letters, as its gate answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Room {
    /// At the bound: every event is refused.
    pub full: bool,
    /// At half the bound: client tokens' events are refused.
    pub clients_full: bool,
}

impl Room {
    /// Whether an event is refused (`client`: it comes with a client token).
    pub(crate) fn refuses(self, client: bool) -> bool {
        self.full || (client && self.clients_full)
    }
}

/// Each queue topic's last answer and when it came.
#[derive(Clone, Debug, Default)]
pub(crate) struct RoomCache {
    known: BTreeMap<String, (Room, u64)>,
}

impl RoomCache {
    /// `topic`'s answer if it is younger than [`ROOM_CHECK_MS`] at `now`.
    pub(crate) fn fresh(&self, topic: &str, now: u64) -> Option<Room> {
        let (room, at) = self.known.get(topic)?;
        (now.saturating_sub(*at) < ROOM_CHECK_MS && *at <= now).then_some(*room)
    }

    /// Remember `topic`'s answer at `now`.
    pub(crate) fn record(&mut self, topic: &str, room: Room, now: u64) {
        self.known.insert(topic.to_string(), (room, now));
    }

    /// Forget `topic`'s answer (its dead letters changed).
    pub(crate) fn forget(&mut self, topic: &str) {
        self.known.remove(topic);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: Room = Room { full: true, clients_full: true };

    #[test]
    fn an_answer_is_trusted_for_the_interval_then_asked_again() {
        let mut cache = RoomCache::default();
        assert_eq!(cache.fresh("q", 0), None, "never asked");
        cache.record("q", FULL, 1_000);
        assert_eq!(cache.fresh("q", 1_000), Some(FULL));
        assert_eq!(cache.fresh("q", 1_000 + ROOM_CHECK_MS - 1), Some(FULL));
        assert_eq!(cache.fresh("q", 1_000 + ROOM_CHECK_MS), None, "stale: ask again");
        assert_eq!(cache.fresh("q", 999), None, "a clock that went back asks again");
        assert_eq!(cache.fresh("other", 1_000), None, "per topic");
        cache.forget("q");
        assert_eq!(cache.fresh("q", 1_001), None);
    }

    #[test]
    fn client_tokens_are_refused_from_half_the_bound_backends_at_it() {
        let half = Room { full: false, clients_full: true };
        assert!(half.refuses(true) && !half.refuses(false), "a page waits; backends go on");
        assert!(FULL.refuses(true) && FULL.refuses(false));
        assert!(!Room::default().refuses(true));
    }
}
