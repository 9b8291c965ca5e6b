//! [`EventRows`]: which event rows a key may overwrite. A row holds one event,
//! or a run of consecutive events accepted in one request (a batch's share of
//! the key, or coalesced producers); it is free once every event in it is
//! finished (delivered, cancelled, discarded, or superseded and covered by a
//! snapshot), and later events take free rows in the order they were freed.

use std::collections::{BTreeMap, VecDeque};

use lull_core::Seq;

use super::{MAX_ROW_BYTES, MAX_ROW_EVENTS};

/// Free rows, and the events each shared row still holds.
#[derive(Debug, Default)]
pub(super) struct EventRows {
    /// Rows no event needs, by their first seq, oldest freed first.
    free: VecDeque<Seq>,
    /// Rows of more than one event, by their first seq.
    shared: BTreeMap<Seq, Shared>,
}

/// A row of several events: which of them still need it.
#[derive(Debug)]
struct Shared {
    /// `held[i]`: event `first + i` still needs the row.
    held: Vec<bool>,
    /// How many are still held.
    left: usize,
}

impl EventRows {
    /// A free row to overwrite, if any.
    pub(super) fn take(&mut self) -> Option<Seq> {
        self.free.pop_front()
    }

    /// A row now holds the `len` events from `first`.
    pub(super) fn hold(&mut self, first: Seq, len: usize) {
        if len > 1 {
            self.shared.insert(first, Shared { held: vec![true; len], left: len });
        }
    }

    /// Event `seq` no longer needs its row: a row of its own is free; a shared
    /// row is free once the last of its events lets go (each counts once).
    pub(super) fn release(&mut self, seq: Seq) {
        if let Some((&first, row)) = self.shared.range_mut(..=seq).next_back()
            && let Some(held) = row.held.get_mut((seq.0 - first.0) as usize)
        {
            if std::mem::take(held) {
                row.left -= 1;
                if row.left == 0 {
                    self.shared.remove(&first);
                    self.free.push_back(first);
                }
            }
            return;
        }
        self.free.push_back(seq);
    }

    /// Rows free to overwrite.
    #[cfg(test)]
    pub(super) fn free_rows(&self) -> Vec<Seq> {
        self.free.iter().copied().collect()
    }
}

/// Events accepted together (consecutive seqs from `first`, bodies in order)
/// cut into rows: a new row at a gap in the seqs, past [`MAX_ROW_EVENTS`], or
/// where the next body would take a row past [`MAX_ROW_BYTES`].
pub(super) fn runs(accepted: Vec<(Seq, String)>) -> Vec<(Seq, Vec<String>)> {
    let mut rows: Vec<(Seq, Vec<String>, usize)> = Vec::new();
    for (seq, body) in accepted {
        match rows.last_mut() {
            Some((first, bodies, bytes))
                if first.0 + bodies.len() as u64 == seq.0
                    && bodies.len() < MAX_ROW_EVENTS
                    && *bytes + body.len() <= MAX_ROW_BYTES =>
            {
                *bytes += body.len();
                bodies.push(body);
            }
            _ => rows.push((seq, vec![body.clone()], body.len())),
        }
    }
    rows.into_iter().map(|(first, bodies, _)| (first, bodies)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_row_is_free_when_its_last_event_lets_go_and_only_then() {
        let mut rows = EventRows::default();
        rows.hold(Seq(10), 3);
        rows.release(Seq(11));
        rows.release(Seq(11));
        rows.release(Seq(10));
        assert_eq!(rows.free_rows(), vec![], "event 12 still needs the row");
        rows.release(Seq(13));
        assert_eq!(rows.free_rows(), vec![Seq(13)], "13 is past the row: a row of its own");
        rows.release(Seq(12));
        assert_eq!(rows.free_rows(), vec![Seq(13), Seq(10)]);
        assert_eq!(rows.take(), Some(Seq(13)));
    }

    #[test]
    fn runs_break_at_a_gap_the_event_bound_and_the_byte_bound() {
        let body = |n: usize| "x".repeat(n);
        let accepted = vec![(Seq(1), body(1)), (Seq(2), body(1)), (Seq(4), body(1))];
        let cut: Vec<(Seq, usize)> = runs(accepted).into_iter().map(|(s, b)| (s, b.len())).collect();
        assert_eq!(cut, vec![(Seq(1), 2), (Seq(4), 1)]);

        let many = (1..=MAX_ROW_EVENTS as u64 + 1).map(|s| (Seq(s), body(1))).collect();
        let cut: Vec<usize> = runs(many).iter().map(|(_, b)| b.len()).collect();
        assert_eq!(cut, vec![MAX_ROW_EVENTS, 1]);

        let big = MAX_ROW_BYTES / 2;
        let heavy = vec![(Seq(1), body(big)), (Seq(2), body(big)), (Seq(3), body(1))];
        let cut: Vec<(Seq, usize)> = runs(heavy).into_iter().map(|(s, b)| (s, b.len())).collect();
        assert_eq!(cut, vec![(Seq(1), 2), (Seq(3), 1)]);
    }
}
