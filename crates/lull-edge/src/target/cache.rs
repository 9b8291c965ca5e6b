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

#[derive(Clone, Copy, Debug)]
struct Entry {
    view: Option<TargetView>,
    heard_at: u64,
    fetching_since: Option<u64>,
}

/// What a key does with the cache's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cached {
    /// The copy is fresh (or another key is fetching it): use it (`None`: never heard, take it as active).
    Use(Option<TargetView>),
    /// Fetch it (this key was picked); tell the cache what came ([`TargetCache::heard`] or [`TargetCache::missed`]).
    Fetch,
}

impl TargetCache {
    /// What a key about to deliver to `topic`'s target does at `now`.
    pub fn look(&self, topic: &str, now: u64) -> Cached {
        let mut entries = self.entries.borrow_mut();
        let entry = entries.entry(topic.to_string()).or_insert(Entry { view: None, heard_at: 0, fetching_since: None });
        let fresh = entry.view.is_some() && now.saturating_sub(entry.heard_at) < TARGET_STALE_MS;
        let fetching = entry.fetching_since.is_some_and(|since| now.saturating_sub(since) < TARGET_STALE_MS);
        if fresh || fetching {
            return Cached::Use(entry.view);
        }
        entry.fetching_since = Some(now);
        Cached::Fetch
    }

    /// `topic`'s target state as its object told it at `now`.
    pub fn heard(&self, topic: &str, view: TargetView, now: u64) {
        self.entries
            .borrow_mut()
            .insert(topic.to_string(), Entry { view: Some(view), heard_at: now, fetching_since: None });
    }

    /// A fetch of `topic`'s state failed: the next key tries again.
    pub fn missed(&self, topic: &str) {
        if let Some(entry) = self.entries.borrow_mut().get_mut(topic) {
            entry.fetching_since = None;
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
        assert_eq!(cache.look("t", 0), Cached::Fetch, "never heard: the first fetches");
        assert_eq!(cache.look("t", 1), Cached::Use(None), "the others go on meanwhile");
        let paused = TargetView { state: TargetState::Paused { until: 9_000 }, failing_since: Some(0) };
        cache.heard("t", paused, 50);
        assert_eq!(cache.look("t", 50 + TARGET_STALE_MS - 1), Cached::Use(Some(paused)));
        assert_eq!(cache.look("t", 50 + TARGET_STALE_MS), Cached::Fetch, "stale: one key fetches");
        assert_eq!(cache.look("t", 50 + TARGET_STALE_MS), Cached::Use(Some(paused)));
        cache.missed("t");
        assert_eq!(cache.look("t", 50 + TARGET_STALE_MS + 1), Cached::Fetch, "a failed fetch is tried again");
        assert_eq!(cache.look("other", 0), Cached::Fetch, "per topic");
        // A fetch that never came back is given up after a period.
        let lost = TargetCache::default();
        assert_eq!(lost.look("t", 0), Cached::Fetch);
        assert_eq!(lost.look("t", TARGET_STALE_MS), Cached::Fetch);
    }
}
