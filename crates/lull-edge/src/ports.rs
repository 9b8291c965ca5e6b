//! What the objects' logic needs from the place it runs, as small traits.
//!
//! The key ([`crate::key::KeyObject`]): [`Store`] (rows and a snapshot,
//! written in all-or-nothing batches), [`Host`] (clock, alarm, randomness,
//! log lines) and [`Outbound`] (the delivery call). The queue side
//! (`crate::queue`): [`QueueSend`] (sending messages to a queue) and
//! [`Clock`] (time, a pause, log lines); the gate object's own two ports
//! speak its types, so they stand beside it: `GateStore` (its stored gate and
//! rows) and `Gates` (calling it), in `crate::queue::gate`. The Workers
//! runtime implements them over SQLite, key-value storage, `setAlarm`,
//! `fetch` and queue bindings; the native fault harnesses over fakes that
//! fail or crash at every write and every await.
//!
//! Storage holds, per key: one row per event, or per run of events accepted
//! in one request (seqs, time, bodies — the events alone; the row of finished
//! events is overwritten by later events instead of being deleted), one snapshot of the key's fixed-size state, one row per
//! backlog window (queued, or a dead letter) and one per remembered producer
//! idempotency key. No single write grows with the backlog.

use std::future::Future;

use lull_core::Seq;

use crate::error::{ApiError, UNAVAILABLE_RETRY_SECS};
pub use crate::metrics::Metrics;

/// Storage (or the alarm) failed; nothing of the batch was applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError(pub String);

/// A storage failure is the API's `503 unavailable`: the operation left its
/// object as if it never ran; try again after `UNAVAILABLE_RETRY_SECS`.
impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Unavailable { why: e.0, retry_after_secs: UNAVAILABLE_RETRY_SECS }
    }
}

/// One row to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// Events accepted together, with consecutive seqs from `first`, in one
    /// row: a new row, or the free row named by `reuse` overwritten (a new row
    /// if that one is no longer there).
    Events {
        /// The first event's seq; the row holds `first..first + bodies.len()`.
        first: Seq,
        /// When they were accepted (unix ms).
        at: u64,
        /// Each event's JSON, in seq order (at least one).
        bodies: Vec<String>,
        /// A free row (named by its first seq) this one takes over.
        reuse: Option<Seq>,
    },
    /// The key's fixed-size state; replaces the previous one.
    Snapshot(String),
    /// A backlog window, by id (inserted, or updated when a dead letter is queued again).
    Window(WindowRow),
    /// A backlog window left the backlog (it fired, was dropped or discarded).
    ForgetWindow(u64),
    /// A producer's idempotency key and the answer it got, in slot `slot` of the key's ring.
    Dedupe(DedupeRow),
}

/// A backlog window as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowRow {
    /// The window id.
    pub window: u64,
    /// Its place in the backlog (queue order, dead-letter order).
    pub ord: u64,
    /// A dead letter (else queued).
    pub dead: bool,
    /// The window as JSON (`QueuedWindow` or `DeadLetter`).
    pub json: String,
}

/// A remembered producer idempotency key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DedupeRow {
    /// Its slot in the ring.
    pub slot: u32,
    /// The producer's key.
    pub key: String,
    /// When it was first seen (unix ms).
    pub at: u64,
    /// The `202` body it got.
    pub reply: String,
}

/// An event as read at load: what replaying it needs, and its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRow {
    /// Its seq.
    pub seq: Seq,
    /// The row holding it, named by the row's first seq (its own seq for a row of one event).
    pub row: Seq,
    /// When it was accepted (unix ms).
    pub at: u64,
    /// Its body's length in bytes (a window's byte bound replays with it).
    pub bytes: u64,
}

/// How a row of events keeps them: their bodies end to end in one text, and
/// each body's length in bytes (`sizes`, only for a row of more than one
/// event). One format for every [`Store`]: [`RowFormat::pack`] writes it, the
/// readers below take it apart.
pub struct RowFormat;

impl RowFormat {
    /// The row's text and, for more than one event, its `sizes` (lengths joined by commas).
    pub fn pack(bodies: &[String]) -> (String, Option<String>) {
        let sizes =
            (bodies.len() > 1).then(|| bodies.iter().map(|b| b.len().to_string()).collect::<Vec<_>>().join(","));
        (bodies.concat(), sizes)
    }

    /// Each event's length in a row of `n` events whose text is `bytes` long.
    pub fn lengths(first: Seq, n: u64, bytes: u64, sizes: Option<&str>) -> Result<Vec<u64>, StoreError> {
        let bad = || StoreError(format!("event row {}: sizes {sizes:?} do not describe {n} events", first.0));
        let lengths = match sizes {
            None if n == 1 => vec![bytes],
            None => return Err(bad()),
            Some(text) => {
                text.split(',').map(|l| l.parse::<u64>().map_err(|_| bad())).collect::<Result<Vec<_>, _>>()?
            }
        };
        if lengths.len() as u64 != n || lengths.iter().sum::<u64>() != bytes {
            return Err(bad());
        }
        Ok(lengths)
    }

    /// The stored events of a row from `first`, each with its length.
    pub fn events(first: Seq, at: u64, n: u64, bytes: u64, sizes: Option<&str>) -> Result<Vec<EventRow>, StoreError> {
        let lengths = Self::lengths(first, n, bytes, sizes)?;
        Ok((0..).zip(lengths).map(|(i, bytes)| EventRow { seq: Seq(first.0 + i), row: first, at, bytes }).collect())
    }

    /// The bodies the row from `first` holds of the events `from..=to`, in order.
    fn bodies(
        first: Seq,
        n: u64,
        text: &str,
        sizes: Option<&str>,
        from: Seq,
        to: Seq,
    ) -> Result<Vec<String>, StoreError> {
        let lengths = Self::lengths(first, n, text.len() as u64, sizes)?;
        let mut start = 0;
        let mut bodies = Vec::new();
        for (seq, length) in (first.0..).zip(lengths) {
            let end = start + length as usize;
            if (from.0..=to.0).contains(&seq) {
                let body = text.get(start..end).ok_or_else(|| StoreError(format!("event {seq}: not a whole body")))?;
                bodies.push(body.to_string());
            }
            start = end;
        }
        Ok(bodies)
    }

    /// Events `from..=to` out of the `rows` that hold them (in seq order):
    /// their bodies if they come to at most `limit` bytes, else how many bytes
    /// they are. Only a row's lengths are needed to say it is too large, so a
    /// store may leave out the texts of rows past a bound ([`Store::bodies`]);
    /// `None` if it left out one that is needed (read those rows again, whole).
    pub fn read<'a>(
        rows: impl IntoIterator<Item = RowRead<'a>>,
        from: Seq,
        to: Seq,
        limit: u64,
    ) -> Result<Option<Bodies>, StoreError> {
        let rows: Vec<RowRead<'a>> = rows.into_iter().collect();
        let mut bytes = 0;
        for r in &rows {
            let lengths = Self::lengths(r.first, r.n, r.bytes, r.sizes)?;
            bytes += (r.first.0..)
                .zip(lengths)
                .filter(|(seq, _)| (from.0..=to.0).contains(seq))
                .map(|(_, l)| l)
                .sum::<u64>();
        }
        if bytes > limit {
            return Ok(Some(Bodies::TooLarge(bytes)));
        }
        let mut bodies = Vec::new();
        for r in rows {
            let Some(text) = r.text else { return Ok(None) };
            bodies.extend(Self::bodies(r.first, r.n, text, r.sizes, from, to)?);
        }
        Ok(Some(Bodies::Read(bodies)))
    }
}

/// One stored row of events as a store read it for [`RowFormat::read`].
#[derive(Clone, Copy, Debug)]
pub struct RowRead<'a> {
    /// The row's first seq.
    pub first: Seq,
    /// How many events it holds.
    pub n: u64,
    /// Its text's length in bytes.
    pub bytes: u64,
    /// Each event's length (rows of more than one event), as [`RowFormat::pack`] wrote them.
    pub sizes: Option<&'a str>,
    /// Its text, unless the store left it out (the span is past its bound).
    pub text: Option<&'a str>,
}

/// A window's bodies as [`Store::bodies`] reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bodies {
    /// Each event's body, in seq order.
    Read(Vec<String>),
    /// Over the limit asked for: the bytes they come to (no body was built).
    TooLarge(u64),
}

/// Everything stored for a key, as read when its object starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// The newest snapshot, if any.
    pub snapshot: Option<String>,
    /// Every stored event, in seq order (bodies are read when delivered).
    pub events: Vec<EventRow>,
    /// Backlog rows in `ord` order.
    pub windows: Vec<WindowRow>,
    /// Remembered producer keys.
    pub dedupe: Vec<DedupeRow>,
}

impl Stored {
    /// Nothing is stored: a new key.
    pub fn is_empty(&self) -> bool {
        self.snapshot.is_none() && self.events.is_empty() && self.windows.is_empty() && self.dedupe.is_empty()
    }
}

/// The key's storage. Synchronous, like a Durable Object's SQLite.
pub trait Store {
    /// Everything stored for the key.
    fn load(&self) -> Result<Stored, StoreError>;
    /// Apply `writes` all-or-nothing; returns the rows written, as storage
    /// counts them. The writes are handed over: their bodies are not copied.
    fn commit(&self, writes: Vec<Write>) -> Result<u64, StoreError>;
    /// The bodies of the stored events `first..=last`, in seq order, if they
    /// come to at most `limit` bytes, in one read (a row holds at most
    /// [`crate::key::MAX_ROW_EVENTS`]: rows from before `first` may hold some).
    /// Past `limit` it answers their bytes, having read at most `limit` plus
    /// what a row of [`crate::key::MAX_ROW_BYTES`] at each end of the span adds.
    fn bodies(&self, first: Seq, last: Seq, limit: u64) -> Result<Bodies, StoreError>;
    /// How many event rows are stored, as storage counts them.
    fn event_rows(&self) -> Result<u64, StoreError>;
    /// The database's size in bytes, as storage reports it.
    fn size(&self) -> u64;
    /// Delete everything the key stored, and its alarm (the key was collected).
    fn erase(&self) -> impl Future<Output = Result<(), StoreError>>;
}

/// The runtime around the key: clock, alarm, randomness, logs, and data
/// points (the [`Metrics`] port).
pub trait Host: Metrics {
    /// Unix time in ms.
    fn now(&self) -> u64;
    /// 64 random bits (retry jitter seeds, incarnation ids).
    fn random(&self) -> u64;
    /// Arm the key's one alarm at `at` (unix ms), replacing any other. It may
    /// fail here, or (on Workers, where the write is not awaited but rides the
    /// output gate) as a crash of the whole turn: the fault harness injects both.
    fn set_alarm(&self, at: u64) -> impl Future<Output = Result<(), StoreError>>;
    /// Write one structured log line.
    fn log(&self, line: &str);
}

/// A delivery to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// The topic (whose secrets sign the delivery).
    pub topic: String,
    /// The target URL.
    pub target: String,
    /// The JSON body.
    pub body: String,
    /// The `Idempotency-Key` header (and `webhook-id`).
    pub idempotency_key: String,
    /// The `Lull-Attempt` header.
    pub attempt: u32,
    /// How long to wait for an answer (ms).
    pub timeout_ms: u64,
    /// For a queue topic: send these messages to this queue instead of `POST`ing.
    pub queue: Option<ToQueue>,
}

/// A window as messages for a queue (`delivery = "queue"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToQueue {
    /// The producer binding's name.
    pub binding: String,
    /// Each message's JSON (a `crate::delivery::queue_message::QueueMessage`), in order.
    pub messages: Vec<String>,
}

/// What the target made of a delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// A 2xx answer.
    pub ok: bool,
    /// The status code, `timeout`, or the network error.
    pub detail: String,
    /// The HTTP status, if the target answered.
    pub status: Option<u16>,
    /// Its `Retry-After`, as ms from the answer, if it gave one.
    pub retry_after_ms: Option<u64>,
}

impl Outcome {
    /// An attempt that got no answer from the target (or was not made): why.
    pub fn failed(detail: impl Into<String>) -> Outcome {
        Outcome { ok: false, detail: detail.into(), status: None, retry_after_ms: None }
    }

    /// A send that succeeded without an HTTP answer (a queue took the messages): what happened.
    pub fn done(detail: impl Into<String>) -> Outcome {
        Outcome { ok: true, detail: detail.into(), status: None, retry_after_ms: None }
    }
}

/// The delivery call: never fails, the outcome says what happened.
pub trait Outbound {
    /// Send one delivery (signed by the implementation).
    fn send(&self, out: Outgoing) -> impl Future<Output = Outcome>;
}

/// Sending messages to a queue.
pub trait QueueSend {
    /// Send `messages` (each a queue message's text) to the queue bound as
    /// `binding`, delivered after `delay_secs`; `Err` says why not.
    fn send(&self, binding: &str, messages: &[String], delay_secs: u32) -> impl Future<Output = Result<(), String>>;
}

/// The queue consumer's (and the topic object's) clock, pause, log, and data
/// points (the [`Metrics`] port).
pub trait Clock: Metrics {
    /// Unix time in ms.
    fn now(&self) -> u64;
    /// Wait `ms` milliseconds.
    fn sleep(&self, ms: u64) -> impl Future<Output = ()>;
    /// Write one structured log line.
    fn log(&self, line: &str);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_of_events_packs_and_gives_back_each_body_and_length() {
        let bodies: Vec<String> = vec![r#"{"n":1}"#.into(), "\"é\"".into(), "[]".into()];
        let (text, sizes) = RowFormat::pack(&bodies);
        assert_eq!(sizes.as_deref(), Some("7,4,2"));
        let bytes = text.len() as u64;
        let events = RowFormat::events(Seq(5), 9, 3, bytes, sizes.as_deref()).unwrap();
        assert_eq!(
            events.iter().map(|e| (e.seq.0, e.row.0, e.bytes)).collect::<Vec<_>>(),
            [(5, 5, 7), (6, 5, 4), (7, 5, 2)]
        );
        assert_eq!(RowFormat::bodies(Seq(5), 3, &text, sizes.as_deref(), Seq(6), Seq(9)).unwrap(), bodies[1..]);
        assert_eq!(RowFormat::bodies(Seq(5), 3, &text, sizes.as_deref(), Seq(1), Seq(5)).unwrap(), bodies[..1]);

        let (one, none) = RowFormat::pack(&bodies[..1]);
        assert_eq!(none, None);
        assert_eq!(RowFormat::bodies(Seq(2), 1, &one, None, Seq(2), Seq(2)).unwrap(), bodies[..1]);
        assert!(RowFormat::lengths(Seq(5), 3, bytes, Some("7,4")).is_err(), "too few sizes");
        assert!(RowFormat::lengths(Seq(5), 3, bytes + 1, sizes.as_deref()).is_err(), "sizes that miss the text");
        assert!(
            RowFormat::bodies(Seq(5), 3, &text, Some("9,2,2"), Seq(5), Seq(7)).is_err(),
            "a cut inside a character"
        );
    }

    #[test]
    fn a_span_is_read_whole_under_its_limit_and_only_weighed_past_it() {
        let bodies: Vec<String> = ["aaaa", "bb", "cccccc", "d"].iter().map(|b| b.to_string()).collect();
        let (text, sizes) = RowFormat::pack(&bodies[..3]);
        let (last, _) = RowFormat::pack(&bodies[3..]);
        let rows = |texts: bool| {
            [
                RowRead {
                    first: Seq(1),
                    n: 3,
                    bytes: 12,
                    sizes: sizes.as_deref(),
                    text: texts.then_some(text.as_str()),
                },
                RowRead { first: Seq(4), n: 1, bytes: 1, sizes: None, text: texts.then_some(last.as_str()) },
            ]
        };
        // Events 2..=4: the first row holds one event before the span.
        assert_eq!(RowFormat::read(rows(true), Seq(2), Seq(4), 9).unwrap(), Some(Bodies::Read(bodies[1..].to_vec())));
        assert_eq!(
            RowFormat::read(rows(false), Seq(2), Seq(4), 8).unwrap(),
            Some(Bodies::TooLarge(9)),
            "no text needed"
        );
        assert_eq!(RowFormat::read(rows(false), Seq(2), Seq(4), 9).unwrap(), None, "a text left out under the limit");
    }
}
