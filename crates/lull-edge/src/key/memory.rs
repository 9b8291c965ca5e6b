//! The key in memory ([`Loaded`]): what a [`KeyObject`](super::KeyObject)
//! loaded from storage, what each request does to it (synchronously, with
//! `&mut self`), and the rules that turn its effects into rows ([`Batch`]),
//! log lines and the alarm to arm.

use std::collections::{BTreeSet, HashMap};

use lull_core::{Accepted, DeadLetter, Fire, Seq, Span, WindowId};
use serde_json::json;

use super::request::{KeyReply, KeyRequest};
use super::rows::{self, EventRows};
use super::state::{Effect, KeyState};
use super::{CHECKPOINT_ROWS, DEDUPE_SLOTS, FULL_RETRY_SECS, MAX_PAGE, STATUS_FEW, json_error};

use crate::error::ApiError;
use crate::log::Fact;
use crate::metrics::Point;
use crate::names::{Key, key_label};
use crate::ports::{DedupeRow, EventRow, Outgoing, WindowRow, Write};
use crate::topic::{PayloadMode, Topic};

/// The key in memory, as loaded from storage.
pub(super) struct Loaded {
    pub(super) topic: String,
    pub(super) key: Key,
    pub(super) ks: KeyState,
    /// Whether a snapshot was ever written (a fresh key writes its first with its first event).
    pub(super) persisted: bool,
    /// When the alarm is armed (unix ms), as far as this object knows.
    pub(super) armed: Option<u64>,
    /// The newest dead letter's time the topic's object was told of (for a
    /// recover; in memory: a new object tells it again, which is harmless).
    pub(super) dead_told: u64,
    /// Which event rows are free to overwrite, and what shared rows still hold.
    pub(super) event_rows: EventRows,
    /// Rows no delivery needs (`last`: an open window's earlier events;
    /// `first`: its later ones) that a load would still replay: free once a
    /// snapshot covers them, at most [`CHECKPOINT_ROWS`] before one is written.
    pub(super) superseded: Vec<Seq>,
    /// The last event accepted in this object's life and its window.
    pub(super) last_accepted: Option<Accepted>,
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
    /// The topic's `log_keys`: log lines name the key as it is (else by a short hash).
    pub(super) log_keys: bool,
    /// The key as log lines name it ([`key_label`] under `log_keys`): made once, not per line.
    pub(super) label: String,
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
    /// Events accepted, in seq order, to be written as rows ([`Loaded::store_events`]).
    pub(super) events: Vec<(Seq, String)>,
    pub(super) logs: Vec<Fact>,
    /// Data points, written (and counted) once the batch is committed.
    pub(super) points: Vec<Point>,
    /// The facts as lines, with the key's topic and key, and whether the log gets each ([`Fact::logged`]).
    pub(super) lines: Vec<(String, bool)>,
    pub(super) accepting: bool,
    pub(super) snapshot: bool,
    /// The operation writes the snapshot: the state changed in a way a load
    /// cannot replay, or superseded rows wait for one.
    pub(super) snapshot_due: bool,
}

/// The field of a remembered answer that holds its event's [`body_digest`].
const DIGEST: &str = "digest";

/// What a remembered producer key compares a repeat's body by: 16 hex digits of its SHA-256.
fn body_digest(body: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(body.as_bytes())[..8])
}

/// An incarnation id: 10 base-32 characters of randomness.
pub(super) fn incarnation(random: u64) -> String {
    const DIGITS: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
    (0..10).map(|i| char::from(DIGITS[((random >> (i * 5)) & 31) as usize])).collect()
}

impl Loaded {
    /// A fact as a log line of this key: `{"lull", "topic", "key", …fields}`.
    pub(super) fn line(&self, fact: &Fact) -> String {
        fact.line(&[("topic", &self.topic), ("key", &self.label)])
    }

    /// Follow the topic's `log_keys`; the key's label is made again only when it changes.
    pub(super) fn set_log_keys(&mut self, log_keys: bool) {
        if log_keys != self.log_keys {
            self.log_keys = log_keys;
            self.label = key_label(self.key.as_str(), log_keys);
        }
    }

    /// Facts as this key's lines, each with whether the log gets it ([`Fact::logged`]).
    pub(super) fn lines(&self, facts: &[Fact]) -> Vec<(String, bool)> {
        facts.iter().map(|f| (self.line(f), f.logged())).collect()
    }

    /// Turn effects into rows (backlog rows, reusable event rows) and log lines.
    pub(super) fn apply(&mut self, effects: Vec<Effect>, batch: &mut Batch) -> Result<(), ApiError> {
        for effect in effects {
            match effect {
                Effect::Log(line) => batch.logs.push(line),
                Effect::Count(counted) => batch.points.push(counted.point(&self.topic)),
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
                Effect::Finished(span) => {
                    // Its other rows were freed as superseded, each once.
                    let needed = self.ks.needed(span);
                    for seq in needed.first.0..=needed.last.0 {
                        self.event_rows.release(Seq(seq));
                    }
                }
                Effect::Unreplayable => batch.snapshot_due = true,
            }
        }
        Ok(())
    }

    /// The batch's accepted events as rows: those of one request share a
    /// row ([`rows::runs`]), each row taking a free one if there is one.
    pub(super) fn store_events(&mut self, at: u64, batch: &mut Batch) {
        for (first, bodies) in rows::runs(std::mem::take(&mut batch.events)) {
            let reuse = self.event_rows.take();
            self.event_rows.hold(first, bodies.len());
            batch.writes.push(Write::Events { first, at, bodies, reuse });
        }
    }

    pub(super) fn backlog_row(&mut self, window: u64, dead: bool, json: String, batch: &mut Batch) {
        self.rows.insert(window);
        let ord = self.next_ord;
        self.next_ord += 1;
        batch.writes.push(Write::Window(WindowRow { window, ord, dead, json }));
    }

    /// Add the snapshot to the batch (once). The rows it no longer needs
    /// replayed become free (if the batch fails, memory is dropped anyway).
    pub(super) fn snapshot(&mut self, batch: &mut Batch) -> Result<(), ApiError> {
        if !batch.snapshot {
            for seq in self.superseded.drain(..) {
                self.event_rows.release(seq);
            }
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
        // Unless the alarm already goes off at or before it.
        if self.armed.is_some_and(|armed| armed <= want) {
            return None;
        }
        self.armed = Some(want);
        self.ks.io.alarms_set += 1;
        Some(want)
    }

    /// Events still held (open, due, running, queued, dead-lettered); their rows are kept.
    pub(super) fn stored_events(&self) -> u64 {
        let mut spans = self.ks.live_spans();
        spans.sort_by_key(|s| s.first);
        spans.dedup();
        spans.iter().map(Span::count).sum()
    }
}

/// What a request does to the loaded key, synchronously: the await points
/// (arm, commit) are [`KeyObject`](super::KeyObject)'s.
impl Loaded {
    /// The remembered answer to `producer_key` (scoped by its caller), or to
    /// its bare key in a row written before keys were scoped (such rows
    /// answer every caller, as they did, until they age out).
    fn remembered(&self, producer_key: &str) -> Option<&(u32, u64, String)> {
        self.dedupe
            .get(producer_key)
            .or_else(|| producer_key.split_once(' ').and_then(|(_, bare)| self.dedupe.get(bare)))
    }

    /// Accept one event at `now` (or answer a producer's repeat as the first
    /// time, `409 idempotency_key_reused` if it comes with another body): its
    /// row (and its producer key's, with the body's digest) into `batch`.
    pub(super) fn accept(
        &mut self,
        topic: &Topic,
        body: String,
        producer_key: Option<String>,
        now: u64,
        batch: &mut Batch,
    ) -> Result<KeyReply, ApiError> {
        let digest = producer_key.as_ref().map(|_| body_digest(&body));
        if let Some((_, at, reply)) = producer_key.as_deref().and_then(|k| self.remembered(k))
            && now.saturating_sub(*at) < topic.dedupe_window_ms
        {
            let mut first: serde_json::Value = serde_json::from_str(reply).map_err(json_error)?;
            // A row from before bodies were compared has no digest: it answers as it did.
            let first_digest = first.as_object_mut().and_then(|reply| reply.remove(DIGEST));
            if first_digest.is_some_and(|d| d.as_str() != digest.as_deref()) {
                return Err(ApiError::IdempotencyKeyReused);
            }
            return Ok(KeyReply { status: 202, body: first });
        }
        if self.ks.pending_windows() >= topic.max_pending_windows {
            let retry_at = self.ks.engine().run().and_then(|r| r.retry_at);
            let retry_after_secs = retry_at.map_or(FULL_RETRY_SECS, |at| at.saturating_sub(now).div_ceil(1000).max(1));
            return Err(ApiError::TooManyPending { limit: topic.max_pending_windows, retry_after_secs });
        }
        let (accepted, effects) = self.ks.accept(now, body.len() as u64);
        batch.events.push((accepted.seq, body));
        batch.accepting = true;
        self.apply(effects, batch)?;
        // Of two events in a row of one window, `last` needs only the newer row, `first` only the older.
        if let Some(previous) = self.last_accepted.filter(|p| p.window == accepted.window) {
            match self.ks.keeps() {
                PayloadMode::All => {}
                PayloadMode::Last => self.superseded.push(previous.seq),
                PayloadMode::First => self.superseded.push(accepted.seq),
            }
            if self.superseded.len() >= CHECKPOINT_ROWS {
                batch.snapshot_due = true;
            }
        }
        self.last_accepted = Some(accepted);
        let reply = json!({"window": accepted.window, "seq": accepted.seq});
        if let Some(key) = producer_key {
            // One more row: the key and its answer, in the ring's next slot.
            let slot = self.next_slot;
            self.next_slot = (slot + 1) % DEDUPE_SLOTS;
            self.dedupe.retain(|_, (s, _, _)| *s != slot);
            let text = json!({"window": accepted.window, "seq": accepted.seq, DIGEST: digest}).to_string();
            batch.writes.push(Write::Dedupe(DedupeRow { slot, key: key.clone(), at: now, reply: text.clone() }));
            self.dedupe.insert(key, (slot, now, text));
        }
        Ok(KeyReply { status: 202, body: reply })
    }

    /// The effects of a request other than an event or a read (flush, cancel,
    /// replay, replay all, discard) at `now`.
    pub(super) fn change(&mut self, request: KeyRequest, now: u64) -> Result<Vec<Effect>, ApiError> {
        let not_found = |window: WindowId| ApiError::NotFound(format!("dead letter {window} of this key"));
        match request {
            KeyRequest::Flush => Ok(self.ks.flush(now)),
            KeyRequest::Cancel => Ok(self.ks.cancel(now)),
            KeyRequest::Replay { window } => self.ks.replay(window, now).map_err(|_| not_found(window)),
            KeyRequest::Discard { window } => self.ks.discard(window).map_err(|_| not_found(window)),
            KeyRequest::ReplayAll | KeyRequest::ReplaySince { .. } => {
                let since = match request {
                    KeyRequest::ReplaySince { since } => since,
                    _ => 0,
                };
                let dead = self.ks.engine().dead_letters().iter();
                let windows: Vec<WindowId> = dead.filter(|d| d.failed_at >= since).map(|d| d.window).collect();
                let mut effects = Vec::new();
                for window in windows {
                    effects.extend(self.ks.replay(window, now).map_err(|_| not_found(window))?);
                }
                Ok(effects)
            }
            other => Err(ApiError::Internal(format!("{other:?} changes nothing"))),
        }
    }

    /// The key's status, with what storage holds, as storage reports it
    /// (`database_bytes`, `event_rows`).
    pub(super) fn status(&self, database_bytes: u64, event_rows: u64) -> serde_json::Value {
        let mut status = self.ks.status(&self.topic, self.key.as_str(), STATUS_FEW);
        status["stored_events"] = json!(self.stored_events());
        status["event_rows"] = json!(event_rows);
        status["database_bytes"] = json!(database_bytes);
        status
    }

    /// A page of dead letters: windows after `after`, at most `limit` (1..=[`MAX_PAGE`]).
    pub(super) fn dead_letters(&self, after: Option<u64>, limit: usize) -> serde_json::Value {
        let limit = limit.clamp(1, MAX_PAGE);
        let all = self.ks.engine().dead_letters();
        let page: Vec<&DeadLetter> =
            all.iter().filter(|d| after.is_none_or(|a| d.window.0 > a)).take(limit + 1).collect();
        let more = page.len() > limit;
        let page = &page[..page.len().min(limit)];
        let next = if more { page.last().map(|d| d.window.0) } else { None };
        json!({"dead_letters": page, "count": all.len(), "next_after": next})
    }
}

/// Events no live span needs: at or below `through` (the snapshot covers
/// them) their rows are released now; above it they are superseded (a load
/// replays them until the next snapshot). Returns the rows and the superseded.
pub(super) fn unneeded_rows(events: &[EventRow], through: Seq, mut live: Vec<Span>) -> (EventRows, Vec<Seq>) {
    live.sort_by_key(|s| s.first);
    let mut rows = EventRows::default();
    let mut at = 0;
    while let Some(row) = events.get(at) {
        let len = events[at..].iter().take_while(|e| e.row == row.row).count();
        rows.hold(row.row, len);
        at += len;
    }
    let mut superseded = Vec::new();
    for seq in events.iter().map(|row| row.seq) {
        // Spans never overlap: the last one starting at or before `seq` is the only candidate.
        let at = live.partition_point(|s| s.first <= seq);
        if at > 0 && live[at - 1].contains(seq) {
            continue;
        }
        if seq <= through {
            rows.release(seq);
        } else {
            superseded.push(seq);
        }
    }
    (rows, superseded)
}
