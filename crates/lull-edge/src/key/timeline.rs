//! [`Timeline`]: what one key did lately — the structured log lines its
//! operations committed (events accepted, fires with their reason, queued
//! windows, deliveries and their outcome, retries, dead letters, replays),
//! each with the time it was committed, for `GET …/keys/{key}/timeline`.
//!
//! Guarantees:
//! - **Bounded**: the last [`TIMELINE_KEEP`] entries; older ones are dropped
//!   (counted in `dropped`).
//! - **Costs no write**: it lives in the object's memory, beside the state it
//!   describes, and starts empty when the object starts (`since`). A line
//!   enters only after its operation committed, so it never shows what a
//!   failed write undid.
//! - Entries are numbered from 1 in commit order; `?after=n` returns the newer
//!   ones. An `after` at or past the next number comes from before the object
//!   restarted (`since` changed): the answer starts from the oldest kept entry.

use std::collections::VecDeque;

use serde_json::{Value, json};

/// Entries a key's timeline keeps (the newest).
pub const TIMELINE_KEEP: usize = 256;
/// Entries per answer unless asked (`?limit=`, at most [`TIMELINE_KEEP`]).
pub const TIMELINE_PAGE: usize = 100;

/// A key's recent log lines, newest last, at most [`TIMELINE_KEEP`].
#[derive(Debug)]
pub(crate) struct Timeline {
    since: u64,
    next: u64,
    entries: VecDeque<(u64, u64, String)>,
}

impl Timeline {
    /// An empty timeline of an object started at `since` (unix ms).
    pub(crate) fn new(since: u64) -> Self {
        Timeline { since, next: 1, entries: VecDeque::new() }
    }

    /// Keep one committed log line (a JSON object) and when it was committed.
    pub(crate) fn push(&mut self, at: u64, line: String) {
        if self.entries.len() == TIMELINE_KEEP {
            self.entries.pop_front();
        }
        self.entries.push_back((self.next, at, line));
        self.next += 1;
    }

    /// The entries numbered after `after` (all kept ones if `None`), oldest
    /// first, at most `limit`: `{"timeline", "next_after", "since", "kept", "dropped"}`.
    pub(crate) fn page(&self, after: Option<u64>, limit: usize) -> Value {
        let after = after.filter(|a| *a < self.next);
        let first_kept = self.entries.front().map_or(self.next, |e| e.0);
        let entries: Vec<Value> = self
            .entries
            .iter()
            .filter(|(n, _, _)| after.is_none_or(|a| *n > a))
            .take(limit)
            .map(|(n, at, line)| {
                let mut entry = serde_json::from_str::<Value>(line).unwrap_or_else(|_| json!({"lull": line}));
                if let Some(fields) = entry.as_object_mut() {
                    fields.remove("topic");
                    fields.remove("key");
                    fields.insert("n".into(), json!(n));
                    fields.insert("t".into(), json!(at));
                }
                entry
            })
            .collect();
        let next_after = entries.last().and_then(|e| e["n"].as_u64()).or(after);
        json!({
            "timeline": entries,
            "next_after": next_after,
            "since": self.since,
            "kept": TIMELINE_KEEP,
            "dropped": first_kept - 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_entries_up_to_the_bound_and_pages_after_n() {
        let mut timeline = Timeline::new(5);
        for i in 0..TIMELINE_KEEP as u64 + 10 {
            timeline.push(100 + i, format!(r#"{{"lull":"accept","topic":"t","key":"k","seq":{}}}"#, i + 1));
        }
        let all = timeline.page(None, TIMELINE_KEEP);
        let entries = all["timeline"].as_array().unwrap();
        assert_eq!(entries.len(), TIMELINE_KEEP);
        assert_eq!(all["dropped"], 10);
        assert_eq!(entries[0]["n"], 11);
        assert_eq!(entries[0]["seq"], 11);
        assert_eq!(entries[0]["t"], 110);
        assert!(entries[0].get("topic").is_none(), "the key's own timeline does not repeat its name");
        let last = entries.last().unwrap()["n"].as_u64().unwrap();
        assert_eq!(last, TIMELINE_KEEP as u64 + 10);
        let newer = timeline.page(Some(last - 3), 2);
        assert_eq!(newer["timeline"].as_array().unwrap().len(), 2);
        assert_eq!(newer["next_after"], last - 1);
        let none = timeline.page(Some(last), 10);
        assert_eq!(none["timeline"].as_array().unwrap().len(), 0);
        assert_eq!(none["next_after"], last, "nothing newer: poll again from the same place");
        assert_eq!(none["since"], 5);
        let stale = timeline.page(Some(last + 50), 3);
        assert_eq!(stale["timeline"][0]["n"], 11, "a cursor from an earlier life starts over");
    }
}
