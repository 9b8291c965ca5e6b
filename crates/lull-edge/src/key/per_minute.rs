//! [`PerMinute`]: each client token holder's events at this key in the
//! current minute, for its `events_per_minute`. It lives beside the key's
//! memory, not in it: a refused request that makes the object reload its
//! memory does not reset it (a restarted object does: it starts a new minute).
//!
//! Guarantees:
//! - **All or none**: a request takes all its events' room at once, before
//!   anything changes ([`PerMinute::take`]); a request that then fails gives
//!   them back ([`PerMinute::give_back`]).
//! - **Per holder**: one holder cannot spend another's minute.
//! - **Bounded**: at most [`MAX_MINUTE_HOLDERS`] holders are counted at once per key;
//!   past that, a new holder is refused until the oldest minute ends.

use std::collections::HashMap;

use crate::error::ApiError;

/// The span of a client token's `events_per_minute` (ms).
const MINUTE_MS: u64 = 60_000;
/// Holders one key counts at once (each a few dozen bytes).
pub const MAX_MINUTE_HOLDERS: usize = 1_024;

/// Events taken for one request: give them back if it fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Taken {
    holder: String,
    began: u64,
    events: u32,
}

/// Holder → (when its minute began, events taken in it).
#[derive(Debug, Default)]
pub(super) struct PerMinute {
    holders: HashMap<String, (u64, u32)>,
}

impl PerMinute {
    /// Take room for `events` of `holder`'s `per_minute` at `now`, all or none:
    /// `429 too_many_events` (with when its minute ends) if they do not fit.
    pub(super) fn take(&mut self, holder: &str, per_minute: u32, events: u32, now: u64) -> Result<Taken, ApiError> {
        let retry = |began: u64| began.saturating_add(MINUTE_MS).saturating_sub(now).div_ceil(1000).max(1);
        let current = self.holders.get(holder).copied().filter(|(began, _)| now < began.saturating_add(MINUTE_MS));
        if current.is_none() && !self.holders.contains_key(holder) && self.holders.len() >= MAX_MINUTE_HOLDERS {
            self.holders.retain(|_, (began, _)| now < began.saturating_add(MINUTE_MS));
            if let Some(oldest) = self.holders.values().map(|(began, _)| *began).min()
                && self.holders.len() >= MAX_MINUTE_HOLDERS
            {
                return Err(ApiError::TooManyEvents { per_minute, retry_after_secs: retry(oldest) });
            }
        }
        let (began, count) = current.unwrap_or((now, 0));
        if count.saturating_add(events) > per_minute {
            return Err(ApiError::TooManyEvents { per_minute, retry_after_secs: retry(began) });
        }
        self.holders.insert(holder.to_string(), (began, count + events));
        Ok(Taken { holder: holder.to_string(), began, events })
    }

    /// Give back what `taken` took (its request stored nothing), if its minute still runs.
    pub(super) fn give_back(&mut self, taken: Taken) {
        if let Some((began, count)) = self.holders.get_mut(&taken.holder)
            && *began == taken.began
        {
            *count = count.saturating_sub(taken.events);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_takes_all_its_events_or_none() {
        let mut minute = PerMinute::default();
        assert!(minute.take("a", 3, 2, 0).is_ok());
        let refused = minute.take("a", 3, 2, 1_000);
        assert_eq!(refused, Err(ApiError::TooManyEvents { per_minute: 3, retry_after_secs: 59 }));
        assert!(minute.take("a", 3, 1, 1_000).is_ok(), "the refused two took nothing");
        assert!(minute.take("a", 3, 1, 2_000).is_err(), "the minute is spent");
        assert!(minute.take("a", 3, 3, MINUTE_MS).is_ok(), "a new minute");
    }

    #[test]
    fn holders_are_counted_apart_and_a_failed_request_gives_back() {
        let mut minute = PerMinute::default();
        let taken = minute.take("a", 2, 2, 0).unwrap();
        assert!(minute.take("b", 2, 2, 0).is_ok(), "b's minute is its own");
        assert!(minute.take("a", 2, 1, 10).is_err());
        minute.give_back(taken);
        assert!(minute.take("a", 2, 2, 20).is_ok(), "given back");
    }

    #[test]
    fn holders_are_bounded_and_a_new_one_waits_for_the_oldest_minute() {
        let mut minute = PerMinute::default();
        for i in 0..MAX_MINUTE_HOLDERS {
            minute.take(&format!("h{i}"), 10, 1, i as u64).unwrap();
        }
        let refused = minute.take("new", 10, 1, 30_000);
        assert_eq!(refused, Err(ApiError::TooManyEvents { per_minute: 10, retry_after_secs: 30 }));
        assert!(minute.take("h5", 10, 1, 30_000).is_ok(), "a counted holder goes on");
        assert!(minute.take("new", 10, 1, MINUTE_MS).is_ok(), "the oldest minute ended: room");
        assert!(minute.holders.len() <= MAX_MINUTE_HOLDERS);
    }
}
