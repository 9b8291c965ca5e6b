//! [`KeyObject`]: one key's whole logic — accept, alarm, flush, cancel,
//! replay, discard, status, recovery from storage — over the three
//! [`ports`](crate::ports), with no Workers API in it. The Durable Object is a
//! thin shell around it; the native fault harness drives the same type with
//! fakes that fail or crash at every write and every await.
//!
//! Guarantees:
//! - **One row per event**: accepting writes the event alone (the very first
//!   event of a key also writes its first snapshot). The snapshot is written
//!   only when something else changes the key (a delivery begins or ends,
//!   flush, cancel, replay, discard); on load the newest snapshot is restored and
//!   the newer event rows are replayed through the (deterministic) engine.
//! - **Nothing grows per write**: queued windows and dead letters are rows of
//!   their own; a finished event's row is overwritten by a later event instead
//!   of being deleted.
//! - **All-or-nothing**: an operation changes memory, arms the alarm if the
//!   deadline moved earlier, then commits its rows in one batch. If the alarm
//!   or the batch fails, memory is dropped (the next call reloads from
//!   storage) and the caller gets `503`.
//! - **Deliveries**: at most one in flight, begun only for a fire the engine
//!   still has in flight; a snapshot marks it begun, so a delivery cut short by
//!   a crash counts as a failed attempt at load and is retried as the next one.
//! - No `RefCell` borrow is held across an `await` (state is touched only in
//!   [`KeyObject::with`], whose closure cannot await).

pub mod request;
pub mod state;
pub mod timeline;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap, VecDeque};

use lull_core::{Backlog, DeadLetter, Fire, Policy, QueuedWindow, Reason, Seq, Span, WindowId};
use serde_json::json;
use serde_json::value::RawValue;

use crate::delivery::body::{Delivery, Payload, idempotency_key};
use crate::delivery::queue_message;
use crate::http::ApiError;
use crate::key::state::{Effect, KeyState, LastDelivery, Logger, SCHEMA};
use crate::key::timeline::{TIMELINE_KEEP, Timeline};
use crate::names::Key;
use crate::ports::{DedupeRow, Host, Outbound, Outcome, Outgoing, Store, StoreError, ToQueue, WindowRow, Write};
use crate::topic::{DEFAULT_RETENTION_MS, PayloadMode, Topic, Topics};
pub use request::{KeyCall, KeyReply, KeyRequest};

/// Dead letters per page at most (`GET …/dead-letters?limit=`).
pub const MAX_PAGE: usize = 500;
/// Dead letters per page unless asked.
pub const DEFAULT_PAGE: usize = 100;
/// Queued windows and dead letters the status shows (oldest first); it gives counts of all.
pub const STATUS_FEW: usize = 10;
/// The alarm that guards a delivery goes off this long after its timeout.
pub const GUARD_MS: u64 = 5_000;
/// A failed `alarm()` tries again after this, doubling per failure in a row…
pub const ALARM_RETRY_BASE_MS: u64 = 1_000;
/// …up to this.
pub const ALARM_RETRY_CAP_MS: u64 = 60_000;
/// `Retry-After` when storage failed (seconds).
pub const UNAVAILABLE_RETRY_SECS: u64 = 1;
/// `Retry-After` at the pending bound when no retry is scheduled (seconds).
pub const FULL_RETRY_SECS: u64 = 60;
/// Producer idempotency keys a key remembers (the oldest is forgotten first).
pub const DEDUPE_SLOTS: u32 = 4_096;

/// One key's logic over its storage, host and outbound call.
pub struct KeyObject<S, H, O> {
    store: S,
    host: H,
    outbound: O,
    loaded: RefCell<Option<Loaded>>,
    alarm_failures: Cell<u32>,
    /// What the key committed lately; kept across a reload, lost when the object stops.
    timeline: RefCell<Timeline>,
}

/// The key in memory, as loaded from storage.
struct Loaded {
    topic: String,
    key: Key,
    ks: KeyState,
    /// Whether a snapshot was ever written (a fresh key writes its first with its first event).
    persisted: bool,
    /// When the alarm is armed (unix ms), as far as this object knows.
    armed: Option<u64>,
    /// Rows of finished events, overwritten by later events.
    free: VecDeque<Seq>,
    /// Backlog windows with a row.
    rows: BTreeSet<u64>,
    next_ord: u64,
    /// Remembered producer keys: key -> (ring slot, first seen, the 202 body).
    dedupe: HashMap<String, (u32, u64, String)>,
    /// The ring slot the next remembered key takes.
    next_slot: u32,
    /// When the key was last active (an event, or any other change).
    touched: u64,
    /// The topic's retention: an idle key is deleted this long after `touched`.
    retention_ms: u64,
}

/// A delivery begun: the fire and its request, or why it cannot be sent.
struct Job {
    fire: Fire,
    out: Result<Outgoing, String>,
}

/// Rows and log lines an operation produced, committed together.
#[derive(Default)]
struct Batch {
    writes: Vec<Write>,
    logs: Vec<String>,
    accepting: bool,
    snapshot: bool,
    /// An alarm the operation needs armed before its rows commit (a delivery's guard).
    alarm: Option<u64>,
}

fn unavailable(e: StoreError) -> ApiError {
    ApiError::Unavailable { why: e.0, retry_after_secs: UNAVAILABLE_RETRY_SECS }
}

fn json_error(e: serde_json::Error) -> ApiError {
    ApiError::Internal(e.to_string())
}

/// An incarnation id: 10 base-32 characters of randomness.
fn incarnation(random: u64) -> String {
    const DIGITS: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
    (0..10).map(|i| char::from(DIGITS[((random >> (i * 5)) & 31) as usize])).collect()
}

impl Loaded {
    fn log_line(&self, event: &str, fields: serde_json::Value) -> String {
        Logger { topic: &self.topic, key: self.key.as_str() }.line(event, fields)
    }

    /// Turn effects into rows (backlog rows, reusable event rows) and log lines.
    fn apply(&mut self, effects: Vec<Effect>, batch: &mut Batch) -> Result<(), ApiError> {
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

    fn backlog_row(&mut self, window: u64, dead: bool, json: String, batch: &mut Batch) {
        self.rows.insert(window);
        let ord = self.next_ord;
        self.next_ord += 1;
        batch.writes.push(Write::Window(WindowRow { window, ord, dead, json }));
    }

    /// Add the snapshot to the batch (once).
    fn snapshot(&mut self, batch: &mut Batch) -> Result<(), ApiError> {
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
    fn arm_earlier(&mut self, now: u64) -> Option<u64> {
        let want = match self.ks.alarm_at(now) {
            Some(at) => at,
            // Idle: the alarm that collects the key.
            None if self.ks.is_idle() => self.touched.saturating_add(self.retention_ms),
            None => return None,
        };
        self.arm_before(want)
    }

    /// Arm at `at` unless the alarm already goes off at or before it.
    fn arm_before(&mut self, at: u64) -> Option<u64> {
        if self.armed.is_some_and(|armed| armed <= at) {
            return None;
        }
        self.armed = Some(at);
        self.ks.io.alarms_set += 1;
        Some(at)
    }

    /// The delivery of `fire` for `topic` (or why there is none).
    fn job(&self, fire: Fire, topic: Option<&Topic>, store: &impl Store) -> Result<Job, ApiError> {
        let Some(topic) = topic else {
            return Ok(Job { fire, out: Err("topic is no longer configured".into()) });
        };
        let (first, last) = match topic.payload {
            PayloadMode::All => (fire.span.first, fire.span.last),
            PayloadMode::First => (fire.span.first, fire.span.first),
            PayloadMode::Last => (fire.span.last, fire.span.last),
        };
        let rows = store.bodies(first, last).map_err(unavailable)?;
        if rows.len() as u64 != last.0 - first.0 + 1 {
            return Err(ApiError::Internal(format!(
                "window {} has {} of its {} event rows",
                fire.window,
                rows.len(),
                last.0 - first.0 + 1
            )));
        }
        let raws =
            rows.into_iter().map(|r| RawValue::from_string(r).map_err(json_error)).collect::<Result<Vec<_>, _>>()?;
        let payload = match (topic.payload, raws.first()) {
            (PayloadMode::All, _) => Payload::Events(raws.iter().map(|r| r.as_ref()).collect()),
            (_, Some(raw)) => Payload::Event(raw),
            (_, None) => return Err(ApiError::Internal(format!("window {} has no event", fire.window))),
        };
        let delivery = Delivery {
            topic: &self.topic,
            key: self.key.as_str(),
            window: fire.window,
            reason: fire.reason,
            count: fire.span.count(),
            first_at: fire.span.first_at,
            last_at: fire.span.last_at,
            payload,
        };
        let idempotency_key = idempotency_key(&self.topic, &self.key, self.ks.incarnation(), fire.window);
        let queue = match &topic.queue {
            None => None,
            Some(q) => match queue_message::messages(&self.topic, &delivery, &idempotency_key, fire.attempt) {
                Ok(messages) => Some(ToQueue {
                    binding: q.binding.clone(),
                    messages: messages
                        .iter()
                        .map(serde_json::to_string)
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(json_error)?,
                }),
                // Counts as a failed attempt: retried, then a dead letter, never lost.
                Err(e) => return Ok(Job { fire, out: Err(e.to_string()) }),
            },
        };
        let out = Outgoing {
            target: topic.target.clone(),
            body: delivery.to_json().map_err(json_error)?,
            idempotency_key,
            attempt: fire.attempt,
            timeout_ms: topic.delivery_timeout_ms,
            queue,
        };
        Ok(Job { fire, out: Ok(out) })
    }
}

impl<S: Store, H: Host, O: Outbound> KeyObject<S, H, O> {
    /// A key over its storage, host and outbound call; nothing is read until the first call.
    pub fn new(store: S, host: H, outbound: O) -> Self {
        let timeline = RefCell::new(Timeline::new(host.now()));
        KeyObject { store, host, outbound, loaded: RefCell::new(None), alarm_failures: Cell::new(0), timeline }
    }

    /// The storage (for tests and the shell).
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Run `f` on the loaded state. The closure cannot await, so no borrow outlives it.
    fn with<R>(&self, f: impl FnOnce(&mut Loaded) -> Result<R, ApiError>) -> Result<R, ApiError> {
        let mut guard = self.loaded.try_borrow_mut().map_err(|_| ApiError::Internal("state is busy".into()))?;
        let loaded = guard.as_mut().ok_or_else(|| ApiError::Internal("state is not loaded".into()))?;
        f(loaded)
    }

    /// Forget memory: the next call reloads from storage (after a failed write).
    fn forget(&self) {
        if let Ok(mut loaded) = self.loaded.try_borrow_mut() {
            *loaded = None;
        }
    }

    /// Load the key once per object lifetime. A key never written starts fresh
    /// from `new`; without it, there is nothing to load and `false` is returned.
    async fn load(&self, new: Option<(&Topic, &Key)>) -> Result<bool, ApiError> {
        if self.loaded.borrow().is_some() {
            return Ok(true);
        }
        let stored = self.store.load().map_err(unavailable)?;
        let Some(snapshot) = stored.snapshot else {
            let Some((topic, key)) = new else { return Ok(false) };
            if !stored.is_empty() {
                return Err(ApiError::Internal("rows without a snapshot".into()));
            }
            let random = self.host.random();
            let ks = KeyState::new(topic.policy.clone(), random, incarnation(random.rotate_left(17)));
            *self.loaded.borrow_mut() = Some(Loaded {
                topic: topic.name.clone(),
                key: key.clone(),
                ks,
                persisted: false,
                armed: None,
                free: VecDeque::new(),
                rows: BTreeSet::new(),
                next_ord: 1,
                dedupe: HashMap::new(),
                next_slot: 0,
                touched: self.host.now(),
                retention_ms: topic.retention_ms,
            });
            return Ok(true);
        };
        let restored = KeyState::restore(&snapshot).map_err(json_error)?;
        let mut ks = restored.state;
        let restored_touched = ks.touched_at;
        let through = ks.engine().last_seq();
        let mut rows = BTreeSet::new();
        let mut backlog = Backlog::default();
        let mut next_ord = 1;
        for row in &stored.windows {
            rows.insert(row.window);
            next_ord = next_ord.max(row.ord + 1);
            if row.dead {
                backlog.dead.push(serde_json::from_str::<DeadLetter>(&row.json).map_err(json_error)?);
                continue;
            }
            let queued: QueuedWindow = serde_json::from_str(&row.json).map_err(json_error)?;
            // A window queued by an event newer than the snapshot (it filled up
            // at its last event) comes back when that event replays.
            if queued.reason == Reason::Replay || queued.span.last <= through {
                backlog.queued.push_back(queued);
            }
        }
        let migrating = restored.schema < SCHEMA;
        let inline = restored.inline_backlog;
        let mut batch = Batch::default();
        // Schema 1 kept the backlog inside the state: it becomes rows (below).
        let migrated = if migrating { inline.clone() } else { Backlog::default() };
        let mut full = inline;
        full.queued.extend(backlog.queued);
        full.dead.extend(backlog.dead);
        ks.restore_backlog(full);
        for &(seq, at) in stored.events.iter().filter(|(seq, _)| *seq > through) {
            let accepted = ks.replay_event(at);
            if accepted.seq != seq {
                return Err(ApiError::Internal(format!("event row {} replayed as {}", seq.0, accepted.seq.0)));
            }
        }
        let free = free_rows(&stored.events, through, ks.live_spans());
        let key = Key::from_path_segment(&restored.key)?;
        let mut loaded = Loaded {
            topic: restored.topic,
            key,
            ks,
            persisted: true,
            armed: None,
            free,
            rows,
            next_ord,
            dedupe: stored.dedupe.iter().map(|d| (d.key.clone(), (d.slot, d.at, d.reply.clone()))).collect(),
            // After the newest remembered key (the ring's oldest comes next).
            next_slot: stored.dedupe.iter().max_by_key(|d| (d.at, d.slot)).map_or(0, |d| (d.slot + 1) % DEDUPE_SLOTS),
            touched: stored.events.iter().map(|(_, at)| *at).fold(restored_touched, u64::max),
            retention_ms: new.map_or(DEFAULT_RETENTION_MS, |(topic, _)| topic.retention_ms),
        };
        for q in &migrated.queued {
            loaded.backlog_row(q.window.0, false, serde_json::to_string(q).map_err(json_error)?, &mut batch);
        }
        for d in &migrated.dead {
            loaded.backlog_row(d.window.0, true, serde_json::to_string(d).map_err(json_error)?, &mut batch);
        }
        let now = self.host.now();
        let (topic, key) = (loaded.topic.clone(), loaded.key.clone());
        let recovered = loaded.ks.recover(now, &Logger { topic: &topic, key: key.as_str() });
        let changed = migrating || !recovered.is_empty();
        loaded.apply(recovered, &mut batch)?;
        // A loaded key always has its alarm (a recovered delivery's retry included).
        if let Some(at) = loaded.arm_earlier(now) {
            self.host.set_alarm(at).await.map_err(unavailable)?;
        }
        if changed {
            loaded.snapshot(&mut batch)?;
            let rows = self.store.commit(&batch.writes).map_err(unavailable)?;
            loaded.ks.io.rows_written += rows;
            if migrating {
                let log = Logger { topic: &topic, key: key.as_str() };
                batch.logs.push(log.line("migrated", json!({"from_schema": restored.schema})));
            }
            self.committed(&batch.logs);
        }
        *self.loaded.borrow_mut() = Some(loaded);
        Ok(true)
    }

    /// Run `f`, arm the alarm if the deadline moved earlier, commit; all or nothing.
    async fn op<R>(&self, f: impl FnOnce(&mut Loaded, &mut Batch, u64) -> Result<R, ApiError>) -> Result<R, ApiError> {
        let now = self.host.now();
        let outcome = self.with(|l| {
            let mut batch = Batch::default();
            let result = f(l, &mut batch, now)?;
            if !batch.writes.is_empty() {
                l.touched = l.touched.max(now);
            }
            if !l.persisted && !batch.writes.is_empty() {
                l.snapshot(&mut batch)?;
            }
            let alarm = l.arm_earlier(now).or(batch.alarm);
            Ok((result, batch, alarm))
        });
        let (result, batch, alarm) = match outcome {
            Ok(done) => done,
            // Refusals change nothing; any other failure may have changed memory.
            Err(e @ (ApiError::NotFound(_) | ApiError::TooManyPending { .. })) => return Err(e),
            Err(e) => {
                self.forget();
                return Err(e);
            }
        };
        self.finish(batch, alarm).await?;
        Ok(result)
    }

    /// Arm the alarm (if asked), then commit the batch; on failure, forget memory.
    async fn finish(&self, batch: Batch, alarm: Option<u64>) -> Result<(), ApiError> {
        if let Some(at) = alarm
            && let Err(e) = self.host.set_alarm(at).await
        {
            self.forget();
            return Err(unavailable(e));
        }
        if batch.writes.is_empty() {
            return Ok(());
        }
        match self.store.commit(&batch.writes) {
            Ok(rows) => {
                let _ = self.with(|l| {
                    l.ks.io.rows_written += rows;
                    if batch.accepting {
                        l.ks.io.accept_rows_written += rows;
                    }
                    Ok(())
                });
                self.committed(&batch.logs);
                Ok(())
            }
            Err(e) => {
                self.forget();
                Err(unavailable(e))
            }
        }
    }

    /// Log what a committed operation did, and keep it in the timeline.
    fn committed(&self, logs: &[String]) {
        let at = self.host.now();
        let mut timeline = self.timeline.borrow_mut();
        for line in logs {
            self.host.log(line);
            timeline.push(at, line);
        }
    }

    /// Serve one request for `(topic, key)`.
    pub async fn request(&self, topic: &Topic, key: &Key, request: KeyRequest) -> Result<KeyReply, ApiError> {
        self.load(Some((topic, key))).await?;
        self.with(|l| {
            l.retention_ms = topic.retention_ms;
            Ok(())
        })?;
        self.follow(&topic.policy).await?;
        match request {
            KeyRequest::Event { body, idempotency_key } => self.accept(topic, body, idempotency_key).await,
            KeyRequest::Status => self.with(|l| {
                let mut status = l.ks.status(&l.topic, l.key.as_str(), STATUS_FEW);
                status["stored_events"] = json!(l.stored_events());
                status["database_bytes"] = json!(self.store.size());
                Ok(KeyReply { status: 200, body: status })
            }),
            KeyRequest::DeadLetters { after, limit } => self.with(|l| {
                let limit = limit.clamp(1, MAX_PAGE);
                let page: Vec<&DeadLetter> =
                    l.ks.engine()
                        .dead_letters()
                        .iter()
                        .filter(|d| after.is_none_or(|a| d.window.0 > a))
                        .take(limit + 1)
                        .collect();
                let more = page.len() > limit;
                let page = &page[..page.len().min(limit)];
                let next = if more { page.last().map(|d| d.window.0) } else { None };
                let count = l.ks.engine().dead_letters().len();
                Ok(KeyReply { status: 200, body: json!({"dead_letters": page, "count": count, "next_after": next}) })
            }),
            KeyRequest::Timeline { after, limit } => {
                let body = self.timeline.borrow().page(after, limit.clamp(1, TIMELINE_KEEP));
                Ok(KeyReply { status: 200, body })
            }
            KeyRequest::Flush => self.change(|l, log, now| Ok(l.ks.flush(now, log))).await,
            KeyRequest::Cancel => self.change(|l, log, now| Ok(l.ks.cancel(now, log))).await,
            KeyRequest::Replay { window } => {
                self.change(|l, log, now| l.ks.replay(window, now, log).map_err(|_| dead_letter_not_found(window)))
                    .await
            }
            KeyRequest::Discard { window } => {
                self.change(|l, log, _| l.ks.discard(window, log).map_err(|_| dead_letter_not_found(window))).await
            }
            KeyRequest::ReplayAll => {
                self.change(|l, log, now| {
                    let windows: Vec<WindowId> = l.ks.engine().dead_letters().iter().map(|d| d.window).collect();
                    let mut effects = Vec::new();
                    for window in windows {
                        effects.extend(l.ks.replay(window, now, log).map_err(|_| dead_letter_not_found(window))?);
                    }
                    Ok(effects)
                })
                .await
            }
        }
    }

    /// Bring the key to its topic's policy (from its next burst), if it changed.
    async fn follow(&self, policy: &Policy) -> Result<(), ApiError> {
        if self.with(|l| Ok(l.ks.follows(policy)))? {
            return Ok(());
        }
        self.op(|l, batch, now| {
            let (topic, key) = (l.topic.clone(), l.key.clone());
            let effects = l.ks.set_policy(policy.clone(), now, &Logger { topic: &topic, key: key.as_str() });
            l.apply(effects, batch)?;
            l.snapshot(batch)
        })
        .await
    }

    /// An operation other than an event: its effects, a snapshot, the status as the answer.
    async fn change(
        &self,
        f: impl FnOnce(&mut Loaded, &Logger<'_>, u64) -> Result<Vec<Effect>, ApiError>,
    ) -> Result<KeyReply, ApiError> {
        self.op(|l, batch, now| {
            let (topic, key) = (l.topic.clone(), l.key.clone());
            let log = Logger { topic: &topic, key: key.as_str() };
            let effects = f(l, &log, now)?;
            l.apply(effects, batch)?;
            l.snapshot(batch)?;
            Ok(())
        })
        .await?;
        self.with(|l| Ok(KeyReply { status: 200, body: l.ks.status(&l.topic, l.key.as_str(), STATUS_FEW) }))
    }

    async fn accept(&self, topic: &Topic, body: String, producer_key: Option<String>) -> Result<KeyReply, ApiError> {
        self.op(|l, batch, now| {
            if let Some((_, at, reply)) = producer_key.as_ref().and_then(|k| l.dedupe.get(k))
                && now.saturating_sub(*at) < topic.dedupe_window_ms
            {
                let body = serde_json::from_str(reply).map_err(json_error)?;
                return Ok(KeyReply { status: 202, body });
            }
            if l.ks.pending_windows() >= topic.max_pending_windows {
                let retry_at = l.ks.engine().run().and_then(|r| r.retry_at);
                let retry_after_secs =
                    retry_at.map_or(FULL_RETRY_SECS, |at| at.saturating_sub(now).div_ceil(1000).max(1));
                return Err(ApiError::TooManyPending { limit: topic.max_pending_windows, retry_after_secs });
            }
            let (topic_name, key) = (l.topic.clone(), l.key.clone());
            let log = Logger { topic: &topic_name, key: key.as_str() };
            let (accepted, effects) = l.ks.accept(now, &log);
            let reuse = l.free.pop_front();
            batch.writes.push(Write::Event { seq: accepted.seq, at: now, body, reuse });
            batch.accepting = true;
            l.apply(effects, batch)?;
            let reply = json!({"window": accepted.window, "seq": accepted.seq});
            if let Some(key) = producer_key {
                // One more row: the key and its answer, in the ring's next slot.
                let slot = l.next_slot;
                l.next_slot = (slot + 1) % DEDUPE_SLOTS;
                l.dedupe.retain(|_, (s, _, _)| *s != slot);
                let text = reply.to_string();
                batch.writes.push(Write::Dedupe(DedupeRow { slot, key: key.clone(), at: now, reply: text.clone() }));
                l.dedupe.insert(key, (slot, now, text));
            }
            Ok(KeyReply { status: 202, body: reply })
        })
        .await
    }

    /// The alarm went off: deliver what is due, then re-arm. Never fails: a
    /// failure is logged and the alarm tries again with a capped backoff.
    pub async fn alarm(&self, topics: &Topics) {
        match self.run_alarm(topics).await {
            Ok(()) => self.alarm_failures.set(0),
            Err(error) => self.alarm_failed(&error).await,
        }
    }

    /// The alarm could not do its work: log it, and arm again after a backoff
    /// that doubles with each failure in a row, up to [`ALARM_RETRY_CAP_MS`].
    pub async fn alarm_failed(&self, error: &ApiError) {
        let failures = self.alarm_failures.get().saturating_add(1);
        self.alarm_failures.set(failures);
        let backoff = ALARM_RETRY_BASE_MS.saturating_mul(1 << (failures - 1).min(16)).min(ALARM_RETRY_CAP_MS);
        let again = self.host.now().saturating_add(backoff);
        let line = json!({"lull": "alarm_error", "error": error.message(), "failures": failures,
                          "retry_in_ms": backoff});
        self.host.log(&line.to_string());
        let _ = self.with(|l| {
            l.armed = Some(again);
            Ok(())
        });
        if let Err(e) = self.host.set_alarm(again).await {
            self.forget();
            self.host.log(&json!({"lull": "alarm_error", "error": e.0}).to_string());
        }
    }

    async fn run_alarm(&self, topics: &Topics) -> Result<(), ApiError> {
        if !self.load(None).await? {
            return Ok(());
        }
        let now = self.host.now();
        let collect = self.with(|l| {
            l.armed = None; // the alarm that woke us is spent
            if let Some(topic) = topics.get(&l.topic) {
                l.retention_ms = topic.retention_ms;
            }
            let idle_since = l.touched;
            let due = l.ks.is_idle() && now >= idle_since.saturating_add(l.retention_ms);
            Ok(due.then(|| l.log_line("collected", json!({"idle_ms": now - idle_since}))))
        })?;
        if let Some(line) = collect {
            // Everything goes: rows, snapshot, remembered keys, alarm. A request
            // after this starts a fresh key, with a new incarnation.
            self.forget();
            self.store.erase().await.map_err(unavailable)?;
            self.host.log(&line);
            return Ok(());
        }
        let policy = self.with(|l| Ok(topics.get(&l.topic).map(|t| t.policy.clone())))?;
        if let Some(policy) = policy {
            self.follow(&policy).await?;
        }
        loop {
            // Take the next due fire, mark its delivery begun, guard it with the alarm.
            let job = self
                .op(|l, batch, now| {
                    let (topic, key) = (l.topic.clone(), l.key.clone());
                    let log = Logger { topic: &topic, key: key.as_str() };
                    let effects = l.ks.timeout(now, &log);
                    l.apply(effects, batch)?;
                    let (fire, effects) = l.ks.begin_delivery(&log);
                    l.apply(effects, batch)?;
                    let Some(fire) = fire else {
                        if !batch.writes.is_empty() || !batch.logs.is_empty() {
                            l.snapshot(batch)?;
                        }
                        return Ok(None);
                    };
                    let job = l.job(fire, topics.get(&topic), &self.store)?;
                    let timeout = job.out.as_ref().map_or(0, |o| o.timeout_ms);
                    // Armed before the delivery is marked begun: if the object
                    // dies from here on, the alarm brings it back to count it.
                    batch.alarm = l.arm_before(now.saturating_add(timeout).saturating_add(GUARD_MS));
                    l.snapshot(batch)?;
                    Ok(Some(job))
                })
                .await?;
            let Some(job) = job else { break };
            let outcome = match job.out {
                Ok(out) => self.outbound.send(out).await,
                Err(why) => Outcome { ok: false, detail: why },
            };
            self.op(|l, batch, now| {
                let (topic, key) = (l.topic.clone(), l.key.clone());
                let log = Logger { topic: &topic, key: key.as_str() };
                let fire = job.fire;
                let last = LastDelivery {
                    window: fire.window,
                    attempt: fire.attempt,
                    at: now,
                    ok: outcome.ok,
                    outcome: outcome.detail,
                };
                let effects = l.ks.delivered(&fire, last, &log).map_err(|e| ApiError::Internal(e.to_string()))?;
                l.apply(effects, batch)?;
                l.snapshot(batch)
            })
            .await?;
        }
        Ok(())
    }
}

impl Loaded {
    /// Events still held (open, due, running, queued, dead-lettered); their rows are kept.
    fn stored_events(&self) -> u64 {
        let mut spans = self.ks.live_spans();
        spans.sort_by_key(|s| s.first);
        spans.dedup();
        spans.iter().map(Span::count).sum()
    }
}

fn dead_letter_not_found(window: WindowId) -> ApiError {
    ApiError::NotFound(format!("dead letter {window} of this key"))
}

/// Rows at or below `through` whose event no live span needs: later events reuse them.
fn free_rows(events: &[(Seq, u64)], through: Seq, mut live: Vec<Span>) -> VecDeque<Seq> {
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
