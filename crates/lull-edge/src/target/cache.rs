//! [`TargetCache`]: an isolate's copy of its topics' target states, shared by
//! every key object the isolate runs. A key about to deliver reads it; once
//! the copy is [`TARGET_STALE_MS`] old, one key fetches it again from the
//! topic's object while the others go on with the copy (so a healthy target
//! costs at most one request per topic per isolate per [`TARGET_STALE_MS`],
//! never one per delivery). An answer the object gives a key (a throttle it
//! reported) replaces the copy at once.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::TargetView;

/// How old a copy may be before a key fetches it again (ms): with the fetch,
/// every key of the topic learns of a pause within half a second.
pub const TARGET_STALE_MS: u64 = 400;

/// Topics' target states as last heard, and when.
#[derive(Debug, Default)]
pub struct TargetCache {
    entries: RefCell<BTreeMap<String, Entry>>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    view: Option<TargetView>,
    heard_at: u64,
    fetching_since: Option<u64>,
    /// When a key of this isolate last asked to go after a pause (the probe's turn).
    asked_at: Option<u64>,
}

/// What a key does with the cache's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cached {
    /// The copy is fresh (or another key is fetching it): use it (`None`: never heard, take it as active).
    Use(Option<TargetView>),
    /// Fetch it (this key was picked); tell the cache what came ([`TargetCache::heard`] or [`TargetCache::missed`]).
    Fetch,
}

impl Entry {
    /// The copy is fresh, or another key is fetching it.
    fn usable(&self, now: u64) -> bool {
        let fresh = self.view.is_some() && now.saturating_sub(self.heard_at) < TARGET_STALE_MS;
        fresh || self.fetching_since.is_some_and(|since| now.saturating_sub(since) < TARGET_STALE_MS)
    }

    fn heard(&mut self, view: TargetView, now: u64) {
        (self.view, self.heard_at, self.fetching_since) = (Some(view), now, None);
    }
}

impl TargetCache {
    /// What a key about to deliver to `topic`'s target does at `now`.
    pub fn look(&self, topic: &str, now: u64) -> Cached {
        let mut entries = self.entries.borrow_mut();
        let entry = entries.entry(topic.to_string()).or_default();
        if entry.usable(now) {
            return Cached::Use(entry.view);
        }
        entry.fetching_since = Some(now);
        Cached::Fetch
    }

    /// The copy a key would use at `now`, if [`look`](Self::look) would
    /// answer [`Cached::Use`]; `None` (and nothing changed) when a key must
    /// fetch it first.
    pub fn peek(&self, topic: &str, now: u64) -> Option<Option<TargetView>> {
        self.entries.borrow().get(topic).filter(|entry| entry.usable(now)).map(|entry| entry.view)
    }

    /// `topic`'s target state as its object told it at `now`.
    pub fn heard(&self, topic: &str, view: TargetView, now: u64) {
        self.entries.borrow_mut().entry(topic.to_string()).or_default().heard(view, now);
    }

    /// Whether a key of this isolate may ask `topic`'s object to go after a
    /// pause at `now`: one at a time per [`PROBE_RECHECK_MS`](super::PROBE_RECHECK_MS),
    /// so the keys a pause held do not all ask while the probe is out.
    pub fn may_ask(&self, topic: &str, now: u64) -> bool {
        let mut entries = self.entries.borrow_mut();
        let entry = entries.entry(topic.to_string()).or_default();
        if entry.asked_at.is_some_and(|at| now.saturating_sub(at) < super::PROBE_RECHECK_MS) {
            return false;
        }
        entry.asked_at = Some(now);
        true
    }

    /// A fetch of `topic`'s state failed at `now`: the others go on with the
    /// copy (or as if active), and one tries again a period later — a failing
    /// topic object is not asked once per delivery.
    pub fn missed(&self, topic: &str, now: u64) {
        if let Some(entry) = self.entries.borrow_mut().get_mut(topic) {
            entry.fetching_since = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::TargetState;

    #[test]
    fn one_key_fetches_per_period_and_the_others_use_the_copy() {
        let cache = TargetCache::default();
        assert_eq!(cache.peek("t", 0), None, "never heard: a key must fetch");
        assert_eq!(cache.look("t", 0), Cached::Fetch, "never heard: the first fetches");
        assert_eq!(cache.peek("t", 1), Some(None), "the others go on meanwhile");
        assert_eq!(cache.look("t", 1), Cached::Use(None), "the others go on meanwhile");
        let paused = TargetView { state: TargetState::Paused { until: 9_000 }, failing_since: Some(0) };
        cache.heard("t", paused, 50);
        assert_eq!(cache.look("t", 50 + TARGET_STALE_MS - 1), Cached::Use(Some(paused)));
        assert_eq!(cache.peek("t", 50 + TARGET_STALE_MS), None, "stale: peeking changes nothing");
        assert_eq!(cache.look("t", 50 + TARGET_STALE_MS), Cached::Fetch, "stale: one key fetches");
        assert_eq!(cache.look("t", 50 + TARGET_STALE_MS), Cached::Use(Some(paused)));
        cache.missed("t", 50 + TARGET_STALE_MS);
        assert_eq!(cache.look("t", 50 + TARGET_STALE_MS + 1), Cached::Use(Some(paused)), "not at once");
        assert_eq!(cache.look("t", 50 + 2 * TARGET_STALE_MS), Cached::Fetch, "a period after the failed fetch");
        assert_eq!(cache.look("other", 0), Cached::Fetch, "per topic");
        // After a pause, one key of the isolate asks to go per period.
        assert!(cache.may_ask("t", 1_000));
        assert!(!cache.may_ask("t", 1_000 + crate::target::PROBE_RECHECK_MS - 1));
        assert!(cache.may_ask("t", 1_000 + crate::target::PROBE_RECHECK_MS));
        // A fetch that never came back is given up after a period.
        let lost = TargetCache::default();
        assert_eq!(lost.look("t", 0), Cached::Fetch);
        assert_eq!(lost.look("t", TARGET_STALE_MS), Cached::Fetch);
    }
}
