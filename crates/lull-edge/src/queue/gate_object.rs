//! [`GateObject`]: the logic of a queue topic's `TopicGate` Durable Object
//! (named by the topic) over its ports — [`GateStore`] (the gate, dead-letter
//! rows, failing forwards), [`QueueSend`] (replays go back on the topic's
//! queue) and [`Clock`] (a waiter's timer): the topic's [`Gate`], its
//! counters, the forwards waiting for a lease ([`Waiters`]) and the dead
//! letters it keeps, so the bound holds across consumer batches, invocations
//! and isolates. Each call is a typed [`GateOp`] and gets a typed
//! [`GateAnswer`]; both cross to the object as JSON ([`GateCall`]).
//!
//! Guarantees (storage: `STORAGE.md`):
//! - **A restart keeps the leases**: the gate is stored after each change,
//!   before the answer; a failed store forgets memory (the next call reloads)
//!   and answers `503`, so no lease is granted that storage does not hold.
//! - **Waiting is not polling**: an `Acquire` that finds no room stays open
//!   (at most its `wait_ms`, at most [`MAX_HOLD_MS`]); waiters are served
//!   first come, first served, a release handing its lease to the first.
//! - **Dead letters are rows, bounded, never deleted by lull**: one row per
//!   idempotency key (a message delivered again after its row was written is
//!   answered with that row), its text byte for byte, kept whatever the topic is configured
//!   as now, within the topic's `max_queue_dead_letters` and
//!   `max_queue_dead_letter_bytes`; past them `429 dead_letters_full` (the
//!   consumer keeps the message waiting on its queue). A row goes only when
//!   discarded, or once its replay was sent to the topic's queue.
//! - **The first releases' dead letters migrate**: the stored list becomes
//!   rows on the first call (at most once each), then goes.
//!
//! Not guaranteed: the request counts ([`GateObject`]'s `requests` in the
//! status) live in memory since the object started.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::pin::pin;
use std::rc::Rc;

use futures::future::select;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::delivery::queue_message::{self, QueueMessage};
use crate::http::ApiError;
use crate::key::{MAX_PAGE, UNAVAILABLE_RETRY_SECS};
use crate::ports::{Clock, DeadLetterRow, Failing, GateStore, NewDeadLetter, QueueSend, StoreError};
use crate::queue::gate::{Gate, Grant};
use crate::queue::wait::{Handed, Slot, Waiters};
use crate::topic::{DeadLetterBounds, QueueDelivery, Topic};

/// A lease outlives its forward's timeout by this much before it expires.
pub const LEASE_MARGIN_MS: u64 = 5_000;
/// Dead letters the status shows (the oldest); it gives the count of all.
pub const STATUS_DEAD_LETTERS: usize = 10;
/// The longest an `Acquire` is held open, whatever it asks.
pub const MAX_HOLD_MS: u64 = 10_000;
/// An `Acquire` that waited its time out is told to come back at most this much later.
pub const WAIT_HINT_MS: u64 = 1_000;
/// Bytes of message bodies a page of dead letters holds at most (at least one letter).
pub const PAGE_BYTES: usize = 4 * 1024 * 1024;
/// Dead letters one `POST …/queue/dead-letters/retry` replays at most; the answer says how many remain.
pub const REPLAY_ALL_BATCH: usize = 100;
/// How long a failing forward is remembered after its last failure (its first
/// failure and last outcome, for its dead letter): 14 days, the longest a
/// queue keeps a message.
pub const FAILING_KEEP_MS: u64 = 14 * 24 * 60 * 60 * 1000;
/// A dead letter's `last_outcome` when nothing says more (the queue moved it past its `max_retries`).
pub const DEAD_LETTERED_BY_QUEUE: &str = "dead-lettered by the queue";
/// `Retry-After` of `429 dead_letters_full` (seconds).
pub const FULL_RETRY_SECS: u64 = 60;

/// A counter of the topic's consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// A message forwarded and acked.
    Acked,
    /// A message retried through the queue.
    Retried,
    /// A message sent to the queue again to wait (for room, or on the dead-letter queue).
    Requeued,
    /// A message the consumer sent to the dead-letter queue itself (its failed
    /// forwards reached `forward_max_attempts`, or it waited [`crate::queue::consume::MAX_WAITS`] times).
    DeadLettered,
}

impl Counter {
    /// Its name in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Counter::Acked => "acked",
            Counter::Retried => "retried",
            Counter::Requeued => "requeued",
            Counter::DeadLettered => "dead_lettered",
        }
    }
}

/// How a forward under a lease ended (told with its release).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Forwarded {
    /// The message's idempotency key.
    pub idempotency_key: String,
    /// Its attempt number (`Lull-Attempt`).
    pub attempt: u32,
    /// A 2xx answer.
    pub ok: bool,
    /// The status code, `timeout`, or the network error.
    pub detail: String,
}

/// What the consumer (or the router) asks a topic's gate object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum GateOp {
    /// A lease to forward now, waiting up to `wait_ms` for one.
    Acquire {
        /// How long the call may wait for room (ms; at most [`MAX_HOLD_MS`]).
        #[serde(default)]
        wait_ms: u64,
    },
    /// The forward under `lease` ended (and how, counted: acked or retried).
    Release {
        /// The lease.
        lease: u64,
        /// How it ended, if it was forwarded.
        #[serde(default)]
        outcome: Option<Forwarded>,
    },
    /// Count one of the consumer's outcomes.
    Count {
        /// Which.
        counter: Counter,
    },
    /// Keep a dead-lettered message (its text, byte for byte).
    DeadLetter {
        /// The message's text.
        message: String,
    },
    /// Whether the topic's dead letters are at their bound (the router asks before accepting events).
    Room,
    /// In flight, bound, counters, requests served and the oldest dead letters.
    Status,
    /// A page of kept dead letters, bodies included.
    DeadLetters {
        /// Ids after this one.
        after: Option<u64>,
        /// At most this many (1..=500).
        limit: usize,
    },
    /// Send dead letter `id` back to the topic's queue, then forget it.
    Replay {
        /// The row's id.
        id: u64,
    },
    /// Replay the oldest dead letters, at most [`REPLAY_ALL_BATCH`] per call.
    ReplayAll,
    /// Forget dead letter `id`.
    Discard {
        /// The row's id.
        id: u64,
    },
}

impl GateOp {
    /// A short name for logs, errors and the request counts.
    pub fn name(&self) -> &'static str {
        match self {
            GateOp::Acquire { .. } => "acquire",
            GateOp::Release { .. } => "release",
            GateOp::Count { .. } => "count",
            GateOp::DeadLetter { .. } => "dead_letter",
            GateOp::Room => "room",
            GateOp::Status => "status",
            GateOp::DeadLetters { .. } => "dead_letters",
            GateOp::Replay { .. } => "replay",
            GateOp::ReplayAll => "replay_all",
            GateOp::Discard { .. } => "discard",
        }
    }
}

/// A gate operation addressed to its topic: what crosses from the consumer
/// (or the router) to the gate object, as JSON, the argument of its `call` over RPC.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateCall {
    /// The topic.
    pub topic: String,
    /// What to do.
    pub op: GateOp,
}

/// The gate object's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum GateAnswer {
    /// To [`GateOp::Acquire`]: `{"go": lease, "expires_at"}` or `{"wait_until": ms}`.
    Grant(Grant),
    /// To [`GateOp::Release`]: `{"released": bool}` (`false`: the lease had expired).
    Released(bool),
    /// To [`GateOp::Count`]: `{"ok": true}`.
    Counted,
    /// To [`GateOp::DeadLetter`]: `{"kept": id}`, the row's id.
    Kept(u64),
    /// To [`GateOp::Room`]: `{"full": bool}`.
    Room(bool),
    /// To [`GateOp::Replay`] and [`GateOp::ReplayAll`]: `{"replayed", "remaining"}`.
    Replayed {
        /// Dead letters sent back to the queue (and forgotten) by this call.
        replayed: u64,
        /// Dead letters still kept.
        remaining: u64,
    },
    /// To [`GateOp::Discard`]: `{"discarded": id}`.
    Discarded(u64),
    /// To [`GateOp::Status`]: the JSON as the API shows it.
    Json(Value),
    /// To [`GateOp::DeadLetters`]: the page as JSON text, written once by the
    /// gate object and passed on unparsed, so bodies reach the caller byte for
    /// byte (a number of any size or precision stays as it was).
    Page(String),
}

impl GateAnswer {
    /// The JSON body.
    pub fn to_json(&self) -> Value {
        match self {
            GateAnswer::Grant(Grant::Go { lease, expires_at }) => json!({"go": lease, "expires_at": expires_at}),
            GateAnswer::Grant(Grant::Wait { retry_at }) => json!({"wait_until": retry_at}),
            GateAnswer::Released(released) => json!({"released": released}),
            GateAnswer::Counted => json!({"ok": true}),
            GateAnswer::Kept(id) => json!({"kept": id}),
            GateAnswer::Room(full) => json!({"full": full}),
            GateAnswer::Replayed { replayed, remaining } => json!({"replayed": replayed, "remaining": remaining}),
            GateAnswer::Discarded(id) => json!({"discarded": id}),
            GateAnswer::Json(value) => value.clone(),
            // Only for a look at it: the text is the answer ([`GateAnswer::to_text`]).
            GateAnswer::Page(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        }
    }

    /// The body as sent: a page's text as written, any other answer's JSON.
    pub fn to_text(&self) -> String {
        match self {
            GateAnswer::Page(text) => text.clone(),
            other => other.to_json().to_string(),
        }
    }

    /// The answer to `op` that the body `text` holds (as [`GateAnswer::to_text`]
    /// wrote it): a page is kept as text, unparsed.
    pub fn from_text(op: &GateOp, text: &str) -> Option<GateAnswer> {
        if let GateOp::DeadLetters { .. } = op {
            return Some(GateAnswer::Page(text.to_string()));
        }
        GateAnswer::from_json(op, &serde_json::from_str(text).ok()?)
    }

    /// The answer to `op` that `body` holds (as [`GateAnswer::to_json`] wrote it).
    pub fn from_json(op: &GateOp, body: &Value) -> Option<GateAnswer> {
        let number = |name: &str| body.get(name).and_then(Value::as_u64);
        Some(match op {
            GateOp::Acquire { .. } => match (number("go"), number("expires_at"), number("wait_until")) {
                (Some(lease), Some(expires_at), _) => GateAnswer::Grant(Grant::Go { lease, expires_at }),
                (None, _, Some(retry_at)) => GateAnswer::Grant(Grant::Wait { retry_at }),
                _ => return None,
            },
            GateOp::Release { .. } => GateAnswer::Released(body.get("released")?.as_bool()?),
            GateOp::Count { .. } => GateAnswer::Counted,
            GateOp::DeadLetter { .. } => GateAnswer::Kept(number("kept")?),
            GateOp::Room => GateAnswer::Room(body.get("full")?.as_bool()?),
            GateOp::Replay { .. } | GateOp::ReplayAll => {
                GateAnswer::Replayed { replayed: number("replayed")?, remaining: number("remaining")? }
            }
            GateOp::Discard { .. } => GateAnswer::Discarded(number("discarded")?),
            GateOp::Status => GateAnswer::Json(body.clone()),
            GateOp::DeadLetters { .. } => GateAnswer::Page(body.to_string()),
        })
    }
}

/// What the gate object stores after each change: the gate and its counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateState {
    /// The topic's bound and the leases held.
    pub gate: Gate,
    /// The consumer's counters, by [`Counter::as_str`].
    pub counters: BTreeMap<String, u64>,
}

/// One queue topic's gate, waiters, counters and dead letters over its ports.
pub struct GateObject<S, Q, C> {
    store: S,
    queue: Q,
    clock: C,
    state: RefCell<Option<GateState>>,
    waiters: RefCell<Waiters>,
    /// Requests served since the object started, by [`GateOp::name`] (status excluded).
    requests: RefCell<BTreeMap<&'static str, u64>>,
    /// The tables are made and the first releases' list migrated.
    prepared: Cell<bool>,
    /// Dead letters whose replay is being sent (another replay skips them).
    replaying: RefCell<BTreeSet<u64>>,
}

fn unavailable(e: StoreError) -> ApiError {
    ApiError::Unavailable { why: e.0, retry_after_secs: UNAVAILABLE_RETRY_SECS }
}

/// A queue topic's settings, or `404`.
fn queue_of<'t>(name: &str, topic: Option<&'t Topic>) -> Result<(&'t Topic, &'t QueueDelivery), ApiError> {
    let topic = topic.ok_or_else(|| ApiError::UnknownTopic(name.to_string()))?;
    let queue = topic.queue.as_ref().ok_or_else(|| ApiError::NotFound(format!("queue of topic {name:?}")))?;
    Ok((topic, queue))
}

/// A waiter leaving (its lease taken, its time out, or its request dropped):
/// out of the queue, and a lease handed but never taken goes back.
struct Leave<'a, S, Q, C> {
    object: &'a GateObject<S, Q, C>,
    me: Option<(u64, Rc<Slot>)>,
}

impl<S, Q, C> Drop for Leave<'_, S, Q, C> {
    fn drop(&mut self) {
        if let Some((id, slot)) = self.me.take() {
            self.object.waiters.borrow_mut().leave(id);
            // A lease handed but never taken goes on as a release's would. (A
            // lease still being stored for it is passed on by that release, which
            // finds nobody holding the slot.)
            if let Some(Handed::Go(grant)) = slot.take() {
                self.object.pass_on(grant);
            }
        }
    }
}

/// The leases a release is handing to the waiters it took out of the queue,
/// while it stores them: if the release ends before handing them (its
/// request dropped), each waiter is woken to look again, never left waiting.
struct Handoff(Vec<(Rc<Slot>, Grant)>);

impl Drop for Handoff {
    fn drop(&mut self) {
        for (slot, _) in self.0.drain(..) {
            slot.hand(Handed::Wake);
        }
    }
}

impl<S, Q, C> GateObject<S, Q, C> {
    /// A stored lease whose waiter is gone goes to the first waiter (still
    /// stored as held: no write needed); with none waiting it is released in
    /// memory (stored with the next change). Whether a waiter took it.
    fn pass_on(&self, grant: Grant) -> bool {
        let next = self.waiters.borrow_mut().pop();
        match (next, grant) {
            (Some(slot), _) => {
                slot.hand(Handed::Go(grant));
                true
            }
            (None, Grant::Go { lease, .. }) => {
                if let Some(state) = self.state.borrow_mut().as_mut() {
                    state.gate.release(lease);
                }
                self.waiters.borrow().wake_first();
                false
            }
            (None, Grant::Wait { .. }) => false,
        }
    }
}

impl<S: GateStore, Q: QueueSend, C: Clock> GateObject<S, Q, C> {
    /// A gate object over its ports; nothing is read until the first call.
    pub fn new(store: S, queue: Q, clock: C) -> Self {
        GateObject {
            store,
            queue,
            clock,
            state: RefCell::new(None),
            waiters: RefCell::new(Waiters::default()),
            requests: RefCell::new(BTreeMap::new()),
            prepared: Cell::new(false),
            replaying: RefCell::new(BTreeSet::new()),
        }
    }

    /// Serve `op` for the topic called `name`, configured as `topic` (if it still is).
    pub async fn call(&self, name: &str, topic: Option<&Topic>, op: GateOp) -> Result<GateAnswer, ApiError> {
        if op != GateOp::Status {
            *self.requests.borrow_mut().entry(op.name()).or_default() += 1;
        }
        let bounds = topic.and_then(|t| t.queue.as_ref()).map(|q| q.dead_letters).unwrap_or_default();
        match op {
            GateOp::DeadLetter { message } => self.keep(message, bounds).await,
            GateOp::Room => {
                self.prepare().await?;
                let totals = self.store.dead_totals().map_err(unavailable)?;
                Ok(GateAnswer::Room(is_full(totals.count, totals.bytes, bounds)))
            }
            GateOp::DeadLetters { after, limit } => self.page(after, limit).await,
            GateOp::Discard { id } => {
                self.not_replaying(id)?;
                self.prepare().await?;
                match self.store.forget_dead(&[id]).map_err(unavailable)? {
                    0 => Err(ApiError::NotFound(format!("queue dead letter {id}"))),
                    _ => Ok(GateAnswer::Discarded(id)),
                }
            }
            GateOp::Replay { id } => {
                let (_, queue) = queue_of(name, topic)?;
                self.prepare().await?;
                let row = self.store.dead_letter(id).map_err(unavailable)?;
                let row = row.ok_or_else(|| ApiError::NotFound(format!("queue dead letter {id}")))?;
                self.not_replaying(id)?;
                let replayed = self.replay(&queue.binding, vec![row]).await?;
                let remaining = self.store.dead_totals().map_err(unavailable)?.count;
                Ok(GateAnswer::Replayed { replayed, remaining })
            }
            GateOp::ReplayAll => {
                let (_, queue) = queue_of(name, topic)?;
                self.prepare().await?;
                let busy = self.replaying.borrow().clone();
                let mut rows = Vec::new();
                let mut after = None;
                // The oldest not already being replayed by another call.
                while rows.len() < REPLAY_ALL_BATCH {
                    let page = self.store.dead_page(after, REPLAY_ALL_BATCH).map_err(unavailable)?;
                    let Some(last) = page.last().map(|r| r.id) else { break };
                    rows.extend(page.into_iter().filter(|r| !busy.contains(&r.id)));
                    after = Some(last);
                }
                rows.truncate(REPLAY_ALL_BATCH);
                let replayed = self.replay(&queue.binding, rows).await?;
                let remaining = self.store.dead_totals().map_err(unavailable)?.count;
                Ok(GateAnswer::Replayed { replayed, remaining })
            }
            GateOp::Acquire { wait_ms } => {
                let (topic, queue) = queue_of(name, topic)?;
                self.acquire(topic, queue, wait_ms).await
            }
            op @ (GateOp::Release { .. } | GateOp::Count { .. } | GateOp::Status) => {
                let (topic, queue) = queue_of(name, topic)?;
                self.change(name, topic, queue, op).await
            }
        }
    }

    /// `409 replay_in_progress` while dead letter `id`'s replay is being sent.
    fn not_replaying(&self, id: u64) -> Result<(), ApiError> {
        if self.replaying.borrow().contains(&id) { Err(ApiError::ReplayInProgress(id)) } else { Ok(()) }
    }

    /// Release, count or status: one change of the gate, stored before the answer.
    async fn change(
        &self,
        name: &str,
        topic: &Topic,
        queue: &QueueDelivery,
        op: GateOp,
    ) -> Result<GateAnswer, ApiError> {
        self.load(topic, queue).await?;
        let now = self.clock.now();
        if op == GateOp::Status {
            let status = match self.state.borrow().as_ref() {
                Some(GateState { gate, counters }) => json!({"topic": name, "in_flight": gate.in_flight(now),
                    "waiting": self.waiters.borrow().len(),
                    "forward_concurrency": queue.forward_concurrency,
                    "forward_rate_per_s": queue.forward_rate_per_s, "counters": counters}),
                None => return Err(ApiError::Internal("gate not loaded".into())),
            };
            return self.status(status, queue.dead_letters).await;
        }
        let (answer, handed, failing) = {
            let mut guard = self.state.borrow_mut();
            let Some(GateState { gate, counters }) = guard.as_mut() else {
                return Err(ApiError::Internal("gate not loaded".into()));
            };
            match op {
                GateOp::Release { lease, outcome } => {
                    let released = gate.release(lease);
                    // Counted and recorded only by the release that applied: a
                    // retried one (its answer lost) finds the lease gone.
                    let outcome = outcome.filter(|_| released);
                    if let Some(outcome) = &outcome {
                        let counter = if outcome.ok { Counter::Acked } else { Counter::Retried };
                        *counters.entry(counter.as_str().to_string()).or_default() += 1;
                    }
                    // The room goes to the first waiters, in order.
                    let mut handed = Vec::new();
                    let mut waiters = self.waiters.borrow_mut();
                    while !waiters.is_empty() {
                        let grant = gate.acquire(now);
                        if matches!(grant, Grant::Wait { .. }) {
                            break;
                        }
                        if let Some(slot) = waiters.pop() {
                            handed.push((slot, grant));
                        }
                    }
                    (GateAnswer::Released(released), handed, outcome)
                }
                GateOp::Count { counter } => {
                    *counters.entry(counter.as_str().to_string()).or_default() += 1;
                    (GateAnswer::Counted, Vec::new(), None)
                }
                _ => return Err(ApiError::Internal(format!("{} is not a change of the gate", op.name()))),
            }
        };
        let mut handoff = Handoff(handed);
        if let Err(e) = self.save().await {
            // Nothing handed is stored: each waiter looks again (and reloads).
            drop(handoff);
            self.waiters.borrow().wake_all();
            return Err(e);
        }
        let mut unheld = false;
        for (slot, grant) in std::mem::take(&mut handoff.0) {
            if Rc::strong_count(&slot) > 1 {
                slot.hand(Handed::Go(grant));
            } else {
                // Its waiter is gone (its request dropped while the lease was stored): pass it on.
                unheld |= !self.pass_on(grant);
            }
        }
        self.waiters.borrow().wake_first();
        if unheld {
            // A lease nobody took was released in memory: store that too (best effort: else it expires).
            let _ = self.save().await;
        }
        if let Some(f) = failing {
            // Only what a dead letter will say of it: a lost record loses no message.
            let failed = (!f.ok).then_some(Failing { first_failed_at: now, attempt: f.attempt, outcome: f.detail });
            let stale = now.saturating_sub(FAILING_KEEP_MS);
            let _ = self.store.record_forward(&f.idempotency_key, failed.as_ref(), stale);
        }
        Ok(answer)
    }

    /// A lease now, or after waiting (first come, first served) at most `wait_ms`.
    async fn acquire(&self, topic: &Topic, queue: &QueueDelivery, wait_ms: u64) -> Result<GateAnswer, ApiError> {
        let deadline = self.clock.now().saturating_add(wait_ms.min(MAX_HOLD_MS));
        let mut leave = Leave { object: self, me: None };
        loop {
            self.load(topic, queue).await?;
            let now = self.clock.now();
            // Only the first waiter (or a newcomer when none waits) may take room.
            let mine = match &leave.me {
                Some((id, _)) => self.waiters.borrow().is_first(*id),
                None => self.waiters.borrow().is_empty(),
            };
            let grant = match self.state.borrow_mut().as_mut() {
                Some(state) if mine => state.gate.acquire(now),
                Some(state) => Grant::Wait { retry_at: state.gate.acquire_hint(now) },
                None => return Err(ApiError::Internal("gate not loaded".into())),
            };
            let retry_at = match grant {
                Grant::Go { .. } => {
                    if let Some((id, _)) = leave.me.take() {
                        self.waiters.borrow_mut().leave(id);
                    }
                    self.save().await?;
                    return Ok(GateAnswer::Grant(grant));
                }
                Grant::Wait { retry_at } => retry_at,
            };
            if now >= deadline {
                let hint = retry_at.min(now.saturating_add(WAIT_HINT_MS)).max(now);
                return Ok(GateAnswer::Grant(Grant::Wait { retry_at: hint }));
            }
            let slot = match &leave.me {
                // Still queued (a wake, or the first's timer).
                Some((id, slot)) if self.waiters.borrow().contains(*id) => slot.clone(),
                // New, or taken out by a release whose store failed: (re)join at the back.
                _ => {
                    let joined = self.waiters.borrow_mut().join();
                    let slot = joined.1.clone();
                    leave.me = Some(joined);
                    slot
                }
            };
            let first = leave.me.as_ref().is_some_and(|(id, _)| self.waiters.borrow().is_first(*id));
            let until = if first { retry_at.min(deadline) } else { deadline };
            {
                // Its own block: the sleep (and its timer) ends with the select, not the loop below.
                let sleep = pin!(self.clock.sleep(until.saturating_sub(now).max(1)));
                let _ = select(slot.handed(), sleep).await;
            }
            loop {
                if let Some(Handed::Go(grant)) = slot.take() {
                    // Handed by a release, which stored it and took us out of the queue.
                    leave.me = None;
                    return Ok(GateAnswer::Grant(grant));
                }
                if !slot.is_promised() {
                    break;
                }
                // A release took us out of the queue and is storing our lease: wait
                // for it (or for a wake, if its store fails), even past the deadline.
                slot.handed().await;
            }
        }
    }

    /// The status: the gate's part, the request counts and the dead letters.
    async fn status(&self, mut status: Value, bounds: DeadLetterBounds) -> Result<GateAnswer, ApiError> {
        self.prepare().await?;
        let totals = self.store.dead_totals().map_err(unavailable)?;
        let oldest = self.store.dead_page(None, STATUS_DEAD_LETTERS).map_err(unavailable)?;
        let requests = self.requests.borrow().clone();
        status["requests"] = json!(requests);
        status["requests_total"] = json!(requests.values().sum::<u64>());
        status["dead_letter_count"] = json!(totals.count);
        status["dead_letter_bytes"] = json!(totals.bytes);
        status["max_queue_dead_letters"] = json!(bounds.count);
        status["max_queue_dead_letter_bytes"] = json!(bounds.bytes);
        status["dead_letters_full"] = json!(is_full(totals.count, totals.bytes, bounds));
        status["dead_letters"] = oldest
            .iter()
            .map(|r| json!({"id": r.id, "idempotency_key": r.letter.idempotency_key, "attempts": r.letter.attempts}))
            .collect();
        Ok(GateAnswer::Json(status))
    }

    /// Keep a dead-lettered message (whatever the topic's configuration is
    /// now), within `bounds`; past them `429 dead_letters_full`.
    async fn keep(&self, message: String, bounds: DeadLetterBounds) -> Result<GateAnswer, ApiError> {
        let parsed: QueueMessage = serde_json::from_str(&message)
            .map_err(|e| ApiError::BadRequest(format!("a dead letter is a lull queue message: {e}")))?;
        self.prepare().await?;
        // Kept already (its answer or its ack was lost, and the queue delivered it
        // again): the same row, never a second one, even at the bound.
        if let Some(id) = self.store.dead_letter_of(&parsed.idempotency_key).map_err(unavailable)? {
            return Ok(GateAnswer::Kept(id));
        }
        let totals = self.store.dead_totals().map_err(unavailable)?;
        let bytes = message.len() as u64;
        if totals.count.saturating_add(1) > bounds.count || totals.bytes.saturating_add(bytes) > bounds.bytes {
            return Err(ApiError::DeadLettersFull { retry_after_secs: FULL_RETRY_SECS });
        }
        let now = self.clock.now();
        let failing = self.store.failing(&parsed.idempotency_key).map_err(unavailable)?;
        let letter = NewDeadLetter {
            idempotency_key: parsed.idempotency_key,
            attempts: failing.as_ref().map_or(parsed.attempt, |f| f.attempt.max(parsed.attempt)),
            first_failed_at: failing.as_ref().map_or(now, |f| f.first_failed_at),
            kept_at: now,
            // Why the consumer dead-lettered it, else the failing forward's last outcome.
            outcome: parsed.outcome.or(failing.map(|f| f.outcome)).unwrap_or_else(|| DEAD_LETTERED_BY_QUEUE.into()),
            message,
            legacy: None,
        };
        let id = self.store.keep_dead(std::slice::from_ref(&letter)).map_err(unavailable)?;
        Ok(GateAnswer::Kept(id))
    }

    /// A page of dead letters, bodies included: ids after `after`, at most
    /// `limit` (1..=500) and [`PAGE_BYTES`] of bodies (at least one).
    async fn page(&self, after: Option<u64>, limit: usize) -> Result<GateAnswer, ApiError> {
        let limit = limit.clamp(1, MAX_PAGE);
        self.prepare().await?;
        let totals = self.store.dead_totals().map_err(unavailable)?;
        let rows = self.store.dead_page(after, limit + 1).map_err(unavailable)?;
        let mut page = Vec::new();
        let mut bytes = 0;
        let mut more = false;
        for (i, row) in rows.iter().enumerate() {
            bytes += row.letter.message.len();
            if i == limit || (i > 0 && bytes > PAGE_BYTES) {
                more = true;
                break;
            }
            page.push(row);
        }
        let next_after = if more { page.last().map(|r| r.id) } else { None };
        let dead_letters: Vec<Listed<'_>> = page.iter().map(|r| Listed::of(r)).collect();
        let page = Page { dead_letters, count: totals.count, bytes: totals.bytes, next_after };
        let text = serde_json::to_string(&page).map_err(|e| ApiError::Internal(format!("dead-letter page: {e}")))?;
        Ok(GateAnswer::Page(text))
    }

    /// Send `rows` back to `binding`'s queue, in order and in batches the queue
    /// takes; a batch's rows go once it is sent. How many went.
    async fn replay(&self, binding: &str, rows: Vec<DeadLetterRow>) -> Result<u64, ApiError> {
        let busy = self.replaying.borrow().clone();
        let rows: Vec<DeadLetterRow> = rows.into_iter().filter(|r| !busy.contains(&r.id)).collect();
        self.replaying.borrow_mut().extend(rows.iter().map(|r| r.id));
        let texts: Vec<String> = rows.iter().map(replayed_text).collect();
        let mut done = 0;
        let mut failed = None;
        for batch in queue_message::batches(&texts) {
            let ids: Vec<u64> = rows[done..done + batch.len()].iter().map(|r| r.id).collect();
            if let Err(e) = self.queue.send(binding, batch, 0).await {
                failed = Some(e);
                break;
            }
            // Sent: the rows go (a failure here sends them again on the next replay: at least once).
            if let Err(e) = self.store.forget_dead(&ids) {
                failed = Some(e.0);
                done += batch.len();
                break;
            }
            done += batch.len();
        }
        let mut replaying = self.replaying.borrow_mut();
        for row in &rows {
            replaying.remove(&row.id);
        }
        match failed {
            Some(why) if done == 0 => Err(ApiError::Unavailable { why, retry_after_secs: UNAVAILABLE_RETRY_SECS }),
            _ => Ok(done as u64),
        }
    }

    /// Make the tables and migrate the first releases' list of dead letters, once per object life.
    async fn prepare(&self) -> Result<(), ApiError> {
        if self.prepared.get() {
            return Ok(());
        }
        self.store.prepare().map_err(unavailable)?;
        if let Some(old) = self.store.legacy_dead_letters().await.map_err(unavailable)? {
            let now = self.clock.now();
            let letters: Vec<NewDeadLetter> = old
                .into_iter()
                .enumerate()
                .map(|(place, message)| {
                    let parsed = serde_json::from_str::<QueueMessage>(&message).ok();
                    NewDeadLetter {
                        idempotency_key: parsed.as_ref().map(|m| m.idempotency_key.clone()).unwrap_or_default(),
                        attempts: parsed.as_ref().map_or(0, |m| m.attempt),
                        first_failed_at: now,
                        kept_at: now,
                        outcome: "kept before dead letters were rows".into(),
                        message,
                        legacy: Some(u32::try_from(place).unwrap_or(u32::MAX)),
                    }
                })
                .collect();
            // Rows first (a place kept twice is one row), then the list goes.
            self.store.keep_dead(&letters).map_err(unavailable)?;
            self.store.forget_legacy_dead_letters().await.map_err(unavailable)?;
        }
        self.prepared.set(true);
        Ok(())
    }

    /// The stored gate (or a fresh one), brought to the topic's current bound.
    async fn load(&self, topic: &Topic, queue: &QueueDelivery) -> Result<(), ApiError> {
        let (limit, rate) = (queue.forward_concurrency, queue.forward_rate_per_s);
        let lease_ms = topic.delivery_timeout_ms + LEASE_MARGIN_MS;
        if self.state.borrow().is_none() {
            let stored = self.store.load().await.map_err(unavailable)?;
            // Another call may have loaded it while this one awaited.
            if self.state.borrow().is_none() {
                let loaded = stored
                    .unwrap_or_else(|| GateState { gate: Gate::new(limit, rate, lease_ms), counters: BTreeMap::new() });
                *self.state.borrow_mut() = Some(loaded);
            }
        }
        if let Some(state) = self.state.borrow_mut().as_mut() {
            state.gate.configure(limit, rate, lease_ms);
        }
        Ok(())
    }

    /// Store the gate; on failure memory may be ahead of storage: reload on the next call.
    async fn save(&self) -> Result<(), ApiError> {
        let snapshot = self.state.borrow().clone();
        if let Some(snapshot) = snapshot
            && let Err(e) = self.store.save(&snapshot).await
        {
            *self.state.borrow_mut() = None;
            return Err(unavailable(e));
        }
        Ok(())
    }
}

/// Whether a topic's dead letters are at `bounds`: the count reached, or no
/// room left for a message of the largest size.
pub fn is_full(count: u64, bytes: u64, bounds: DeadLetterBounds) -> bool {
    count >= bounds.count || bytes.saturating_add(queue_message::MAX_MESSAGE_BYTES as u64) > bounds.bytes
}

/// A page of dead letters as the API lists it.
#[derive(Serialize)]
struct Page<'a> {
    dead_letters: Vec<Listed<'a>>,
    count: u64,
    bytes: u64,
    next_after: Option<u64>,
}

/// What a listing reads of a kept message: its topic and body, borrowed as they are.
#[derive(Deserialize)]
struct Envelope<'a> {
    topic: String,
    #[serde(borrow)]
    body: &'a RawValue,
}

/// A kept row as the API lists it: the delivery's body as it was (its JSON
/// text, never parsed into numbers), or the message's text if it is not a lull message.
#[derive(Serialize)]
struct Listed<'a> {
    id: u64,
    idempotency_key: &'a str,
    attempts: u32,
    first_failed_at: u64,
    kept_at: u64,
    last_outcome: &'a str,
    bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}

impl<'a> Listed<'a> {
    fn of(row: &'a DeadLetterRow) -> Listed<'a> {
        let l = &row.letter;
        let envelope = serde_json::from_str::<Envelope<'a>>(&l.message).ok();
        let message = envelope.is_none().then_some(l.message.as_str());
        let (topic, body) = envelope.map_or((None, None), |e| (Some(e.topic), Some(e.body)));
        Listed {
            id: row.id,
            idempotency_key: &l.idempotency_key,
            attempts: l.attempts,
            first_failed_at: l.first_failed_at,
            kept_at: l.kept_at,
            last_outcome: &l.outcome,
            bytes: l.message.len(),
            topic,
            body,
            message,
        }
    }
}

/// The message a replay sends: the kept one, its next attempt after those
/// made, waits and failures reset (a replay starts a fresh `forward_max_attempts`) (the same idempotency key and body, byte for byte).
fn replayed_text(row: &DeadLetterRow) -> String {
    match serde_json::from_str::<QueueMessage>(&row.letter.message) {
        Ok(m) => {
            QueueMessage { attempt: row.letter.attempts.saturating_add(1), waits: 0, failed: 0, outcome: None, ..m }
                .to_text()
        }
        Err(_) => row.letter.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_answers_cross_as_json_and_back() {
        let message = r#"{"topic":"q","idempotency_key":"q/k/x.1","attempt":3,"body":{"n":"é\u0000"}}"#.to_string();
        let forwarded = Forwarded { idempotency_key: "q/k/x.1".into(), attempt: 2, ok: false, detail: "503".into() };
        let ops = [
            GateOp::Acquire { wait_ms: 2_000 },
            GateOp::Release { lease: 7, outcome: Some(forwarded) },
            GateOp::Release { lease: 7, outcome: None },
            GateOp::Count { counter: Counter::Requeued },
            GateOp::DeadLetter { message: message.clone() },
            GateOp::Room,
            GateOp::Status,
            GateOp::DeadLetters { after: Some(3), limit: 20 },
            GateOp::Replay { id: 4 },
            GateOp::ReplayAll,
            GateOp::Discard { id: 5 },
        ];
        for op in ops {
            let call = GateCall { topic: "q".into(), op };
            let json = serde_json::to_string(&call).unwrap();
            assert_eq!(serde_json::from_str::<GateCall>(&json).unwrap(), call, "{json}");
        }
        let kept = serde_json::to_string(&GateCall { topic: "q".into(), op: GateOp::DeadLetter { message } });
        assert!(kept.unwrap().contains(r#"\"n\":\"é\\u0000\""#), "the message's text, byte for byte");
        let answers = [
            (
                GateOp::Acquire { wait_ms: 0 },
                GateAnswer::Grant(Grant::Go { lease: 4, expires_at: 99 }),
                json!({"go": 4, "expires_at": 99}),
            ),
            (
                GateOp::Acquire { wait_ms: 0 },
                GateAnswer::Grant(Grant::Wait { retry_at: 50 }),
                json!({"wait_until": 50}),
            ),
            (GateOp::Release { lease: 4, outcome: None }, GateAnswer::Released(false), json!({"released": false})),
            (GateOp::Count { counter: Counter::Acked }, GateAnswer::Counted, json!({"ok": true})),
            (GateOp::DeadLetter { message: String::new() }, GateAnswer::Kept(12), json!({"kept": 12})),
            (GateOp::Room, GateAnswer::Room(true), json!({"full": true})),
            (
                GateOp::ReplayAll,
                GateAnswer::Replayed { replayed: 3, remaining: 9 },
                json!({"replayed": 3, "remaining": 9}),
            ),
            (GateOp::Discard { id: 2 }, GateAnswer::Discarded(2), json!({"discarded": 2})),
            (GateOp::Status, GateAnswer::Json(json!({"in_flight": 1})), json!({"in_flight": 1})),
            (
                GateOp::DeadLetters { after: None, limit: 1 },
                GateAnswer::Page(r#"{"count":0}"#.into()),
                json!({"count": 0}),
            ),
        ];
        for (op, answer, body) in answers {
            assert_eq!(answer.to_json(), body);
            assert_eq!(GateAnswer::from_json(&op, &body), Some(answer.clone()));
            assert_eq!(GateAnswer::from_text(&op, &answer.to_text()), Some(answer));
        }
        assert_eq!(GateAnswer::from_json(&GateOp::Acquire { wait_ms: 0 }, &json!({"error": {"code": "x"}})), None);
        assert!(serde_json::from_str::<GateCall>(r#"{"topic":"q","op":{"op":"explode"}}"#).is_err());
        let old = serde_json::from_str::<GateCall>(r#"{"topic":"q","op":{"op":"acquire"}}"#).unwrap();
        assert_eq!(old.op, GateOp::Acquire { wait_ms: 0 }, "an acquire without a wait does not wait");
    }

    #[test]
    fn full_means_no_room_for_one_more_message_of_the_largest_size() {
        let bounds = DeadLetterBounds { count: 3, bytes: 1_000_000 };
        assert!(!is_full(2, 0, bounds));
        assert!(is_full(3, 0, bounds), "the count");
        assert!(!is_full(0, 1_000_000 - 128_000, bounds));
        assert!(is_full(0, 1_000_000 - 127_999, bounds), "the bytes: a largest message would not fit");
    }

    #[test]
    fn a_replay_sends_the_same_key_and_body_as_its_next_attempt() {
        let message =
            r#"{"topic":"q","idempotency_key":"q/k/x.1","attempt":1,"waits":4,"body":{"big":12345678901234567890}}"#;
        let letter = NewDeadLetter {
            idempotency_key: "q/k/x.1".into(),
            attempts: 4,
            first_failed_at: 1,
            kept_at: 2,
            outcome: "503".into(),
            message: message.into(),
            legacy: None,
        };
        let row = DeadLetterRow { id: 9, letter };
        assert_eq!(
            replayed_text(&row),
            r#"{"topic":"q","idempotency_key":"q/k/x.1","attempt":5,"body":{"big":12345678901234567890}}"#
        );
        let listed = serde_json::to_string(&Listed::of(&row)).unwrap();
        assert!(listed.contains(r#""body":{"big":12345678901234567890}"#), "the body as it was: {listed}");
        assert!(listed.contains(r#""id":9"#) && listed.contains(r#""last_outcome":"503""#), "{listed}");
        let lossy = r#"{"n":123456789012345678901234,"d":0.10000000000000000000000000000000000001,"e":1e400}"#;
        let message = format!(r#"{{"topic":"q","idempotency_key":"q/k/x.2","attempt":1,"body":{lossy}}}"#);
        let row = DeadLetterRow { id: 10, letter: NewDeadLetter { message, ..row.letter } };
        let listed = serde_json::to_string(&Listed::of(&row)).unwrap();
        assert!(listed.contains(&format!(r#""body":{lossy}"#)), "never parsed into numbers: {listed}");
        let garbage = DeadLetterRow { id: 11, letter: NewDeadLetter { message: "not json".into(), ..row.letter } };
        let listed = serde_json::to_string(&Listed::of(&garbage)).unwrap();
        assert!(listed.contains(r#""message":"not json""#) && !listed.contains("body"), "{listed}");
    }
}
