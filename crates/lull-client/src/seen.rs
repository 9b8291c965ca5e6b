//! [`Seen`]: the idempotency keys a consumer handled in this run, so a
//! duplicate (a redelivery, a window's retry) is acked, not handled twice.
//!
//! Guarantees: bounded — at most `capacity` keys; past it the oldest is
//! forgotten (first in, first out), so a duplicate of a key older than the
//! last `capacity` is handled again (delivery stays at least once).
//! Not guaranteed: anything across runs (it lives in memory).

use std::collections::{HashSet, VecDeque};

use crate::defaults;

/// A bounded set of idempotency keys, oldest forgotten first.
///
/// ```
/// let mut seen = lull_client::Seen::with_capacity(2);
/// assert!(!seen.contains("orders/c1/k.1"));
/// seen.record("orders/c1/k.1");         // handled: remember it
/// assert!(seen.contains("orders/c1/k.1")); // its redelivery: ack without handling
/// seen.record("orders/c2/k.1");
/// seen.record("orders/c3/k.1");         // past the bound: c1 is forgotten
/// assert!(!seen.contains("orders/c1/k.1"));
/// ```
#[derive(Clone, Debug)]
pub struct Seen {
    keys: HashSet<String>,
    order: VecDeque<String>,
    capacity: usize,
}

impl Default for Seen {
    /// A set of [`defaults::SEEN_CAPACITY`] keys.
    fn default() -> Self {
        Seen::with_capacity(defaults::SEEN_CAPACITY)
    }
}

impl Seen {
    /// A set remembering at most `capacity` keys (at least 1).
    pub fn with_capacity(capacity: usize) -> Seen {
        Seen { keys: HashSet::new(), order: VecDeque::new(), capacity: capacity.max(1) }
    }

    /// Whether `key` was recorded (and not forgotten since).
    pub fn contains(&self, key: &str) -> bool {
        self.keys.contains(key)
    }

    /// Remember `key` (once it was handled); `false` if it was already known.
    /// Past the bound, the oldest key is forgotten.
    pub fn record(&mut self, key: &str) -> bool {
        if self.keys.contains(key) {
            return false;
        }
        if self.order.len() == self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.keys.remove(&oldest);
        }
        self.keys.insert(key.to_string());
        self.order.push_back(key.to_string());
        true
    }

    /// Keys remembered now.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_oldest_first() {
        let mut seen = Seen::with_capacity(3);
        for k in ["a", "b", "c"] {
            assert!(seen.record(k));
        }
        assert!(!seen.record("a"), "known");
        assert!(seen.record("d"));
        assert_eq!(seen.len(), 3);
        assert!(!seen.contains("a") && seen.contains("b") && seen.contains("d"));
        assert_eq!(Seen::default().capacity(), defaults::SEEN_CAPACITY);
        assert_eq!(Seen::with_capacity(0).capacity(), 1);
    }
}
