//! The key in memory ([`Loaded`]): what a [`KeyObject`](super::KeyObject)
//! loaded from storage, and the synchronous rules that turn an operation's
//! effects into rows ([`Batch`]), log lines and the alarm to arm.

use std::collections::{BTreeSet, HashMap, VecDeque};

use lull_core::{Fire, Seq, Span};

use super::json_error;
use super::state::{Effect, KeyState};
use crate::http::ApiError;
use crate::log::Fact;
use crate::names::Key;
use crate::ports::{Outgoing, WindowRow, Write};

/// The key in memory, as loaded from storage.
pub(super) struct Loaded {
    pub(super) topic: String,
    pub(super) key: Key,
    pub(super) ks: KeyState,
    /// Whether a snapshot was ever written (a fresh key writes its first with its first event).
    pub(super) persisted: bool,
    /// When the alarm is armed (unix ms), as far as this object knows.
    pub(super) armed: Option<u64>,
    /// Rows of finished events, overwritten by later events.
    pub(super) free: VecDeque<Seq>,
    /// Backlog windows with a row.
    pub(super) rows: BTreeSet<u64>,
    pub(super) next_ord: u64,
    /// Remembered producer keys: key -> (ring slot, first seen, the 202 body).
    pub(super) dedupe: HashMap<String, (u32, u64, String)>,
    /// The ring slot the next remembered key takes.
    pub(super) next_slot: u32,
    /// When the key was last active (an event, or any other change).
    pub(super) touched: u64,
    /// The topic's retention: an idle key is deleted this long after `touched`.
    pub(super) retention_ms: u64,
}

/// A delivery begun: the fire and its request, or why it cannot be sent.
pub(super) struct Job {
    pub(super) fire: Fire,
    pub(super) out: Result<Outgoing, String>,
}

/// Rows and log facts an operation produced, committed together.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) writes: Vec<Write>,
    pub(super) logs: Vec<Fact>,
    /// The facts as log lines, with the key's topic and key.
    pub(super) lines: Vec<String>,
    pub(super) accepting: bool,
    pub(super) snapshot: bool,
    /// An alarm the operation needs armed before its rows commit (a delivery's guard).
    pub(super) alarm: Option<u64>,
}

/// An incarnation id: 10 base-32 characters of randomness.
pub(super) fn incarnation(random: u64) -> String {
    const DIGITS: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
    (0..10).map(|i| char::from(DIGITS[((random >> (i * 5)) & 31) as usize])).collect()
}

impl Loaded {
    /// A fact as a log line of this key: `{"lull", "topic", "key", …fields}`.
    pub(super) fn line(&self, fact: &Fact) -> String {
        fact.line(&[("topic", &self.topic), ("key", self.key.as_str())])
    }

    /// Turn effects into rows (backlog rows, reusable event rows) and log lines.
    pub(super) fn apply(&mut self, effects: Vec<Effect>, batch: &mut Batch) -> Result<(), ApiError> {
        for effect in effects {
            match effect {
                Effect::Log(line) => batch.logs.push(line),
                Effect::Queued(q) => {
                    let json = serde_json::to_string(&q).map_err(json_error)?;
                    self.backlog_row(q.window.0, false, json, batch);
                }
                Effect::DeadLettered(d) => {
                    let json = serde_json::to_string(&d).map_err(json_error)?;
                    self.backlog_row(d.window.0, true, json, batch);
                }
                Effect::Left(window) => {
                    if self.rows.remove(&window.0) {
                        batch.writes.push(Write::ForgetWindow(window.0));
                    }
                }
                Effect::Finished(span) => self.free.extend((span.first.0..=span.last.0).map(Seq)),
            }
        }
        Ok(())
    }

    pub(super) fn backlog_row(&mut self, window: u64, dead: bool, json: String, batch: &mut Batch) {
        self.rows.insert(window);
        let ord = self.next_ord;
        self.next_ord += 1;
        batch.writes.push(Write::Window(WindowRow { window, ord, dead, json }));
    }

    /// Add the snapshot to the batch (once).
    pub(super) fn snapshot(&mut self, batch: &mut Batch) -> Result<(), ApiError> {
        if !batch.snapshot {
            self.ks.touched_at = self.touched;
            let json = self.ks.snapshot(&self.topic, &self.key.encoded()).map_err(json_error)?;
            batch.writes.push(Write::Snapshot(json));
            batch.snapshot = true;
            self.persisted = true;
        }
        Ok(())
    }

    /// The alarm time to set, if the key's next deadline moved earlier than the armed one.
    pub(super) fn arm_earlier(&mut self, now: u64) -> Option<u64> {
        let want = match self.ks.alarm_at(now) {
            Some(at) => at,
            // Idle: the alarm that collects the key.
            None if self.ks.is_idle() => self.touched.saturating_add(self.retention_ms),
            None => return None,
        };
        self.arm_before(want)
    }

    /// Arm at `at` unless the alarm already goes off at or before it.
    pub(super) fn arm_before(&mut self, at: u64) -> Option<u64> {
        if self.armed.is_some_and(|armed| armed <= at) {
            return None;
        }
        self.armed = Some(at);
        self.ks.io.alarms_set += 1;
        Some(at)
    }

    /// Events still held (open, due, running, queued, dead-lettered); their rows are kept.
    pub(super) fn stored_events(&self) -> u64 {
        let mut spans = self.ks.live_spans();
        spans.sort_by_key(|s| s.first);
        spans.dedup();
        spans.iter().map(Span::count).sum()
    }
}

/// Rows at or below `through` whose event no live span needs: later events reuse them.
pub(super) fn free_rows(events: &[(Seq, u64)], through: Seq, mut live: Vec<Span>) -> VecDeque<Seq> {
    live.sort_by_key(|s| s.first);
    events
        .iter()
        .map(|(seq, _)| *seq)
        .filter(|seq| *seq <= through)
        .filter(|seq| {
            // Spans never overlap: the last one starting at or before `seq` is the only candidate.
            let at = live.partition_point(|s| s.first <= *seq);
            !(at > 0 && live[at - 1].contains(*seq))
        })
        .collect()
}
