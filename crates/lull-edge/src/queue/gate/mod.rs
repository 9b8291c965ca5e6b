//! [`GateObject`]: the logic of a queue topic's `TopicGate` Durable Object
//! (named by the topic) over its ports — [`GateStore`] (the gate, dead-letter
//! rows, failing forwards), [`QueueSend`] (replays go back on the topic's
//! queue) and [`Clock`] (a waiter's timer): the topic's [`Gate`], its
//! counters, the forwards waiting for a lease ([`Waiters`]) and the dead
//! letters it keeps, so the bound holds across consumer batches, invocations
//! and isolates. Each call is a typed [`GateOp`] and gets a typed
//! [`GateAnswer`]; both cross to the object as JSON ([`GateCall`]).
//!
//! This file holds the object, its await points (load, save, commit) and the
//! dispatch of one [`GateOp`] to its handler; [`op`] the operations and their
//! answers as they cross, [`lease`] the bound itself, [`wait`] its waiters,
//! `acquire` leases granted, waited for and released, `dead_letters` the rows
//! kept, paged, replayed and discarded, `status` the counters and the status,
//! [`store`] the storage port. The stored format: `STORAGE.md` §6.
//!
//! Guarantees:
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

mod acquire;
mod dead_letters;
pub(crate) mod lease;
pub(crate) mod op;
mod status;
pub(crate) mod store;
mod target;
pub(crate) mod wait;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use crate::http::ApiError;
use crate::ports::{Clock, QueueSend};
use crate::target::Target;
use crate::topic::{QueueDelivery, Topic};
pub(crate) use lease::Gate;
pub use lease::{Grant, MAX_LIMIT};
pub use op::Forwarded;
pub use op::{Counter, GateAnswer, GateCall, GateOp, GateStatus, Gates, StatusLetter, TargetStatus, TopicStatus};
pub use store::{DeadLetterRow, DeadTotals, Failing, GateState, GateStore, NewDeadLetter};
use wait::{Handed, Slot, Waiters};

/// A lease outlives its forward's timeout by this much before it expires.
pub(crate) const LEASE_MARGIN_MS: u64 = 5_000;
/// Dead letters the status shows (the oldest); it gives the count of all.
pub(crate) const STATUS_DEAD_LETTERS: usize = 10;
/// The longest an `Acquire` is held open, whatever it asks.
pub const MAX_HOLD_MS: u64 = 10_000;
/// Bytes of message bodies a page of dead letters holds at most (at least one letter).
pub const PAGE_BYTES: usize = 4 * 1024 * 1024;
/// Dead letters one `POST …/queue/dead-letters/retry` replays at most; the answer says how many remain.
pub const REPLAY_ALL_BATCH: usize = 100;
/// Keys one `POST /v1/topics/{topic}/recover` replays the dead letters of at most; the answer says how many remain.
pub const RECOVER_KEYS: usize = 50;
/// How long a failing forward is remembered after its last failure (its first
/// failure and last outcome, for its dead letter): 14 days, the longest a
/// queue keeps a message.
pub(crate) const FAILING_KEEP_MS: u64 = 14 * 24 * 60 * 60 * 1000;
/// A dead letter's `last_outcome` when nothing says more (the queue moved it past its `max_retries`).
pub(crate) const DEAD_LETTERED_BY_QUEUE: &str = "dead-lettered by the queue";
/// `Retry-After` of `429 dead_letters_full` (seconds).
pub(crate) const FULL_RETRY_SECS: u64 = 60;

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

fn not_loaded() -> ApiError {
    ApiError::Internal("gate not loaded".into())
}

/// A configured topic, or `404`.
fn topic_of<'t>(name: &str, topic: Option<&'t Topic>) -> Result<&'t Topic, ApiError> {
    topic.ok_or_else(|| ApiError::UnknownTopic(name.to_string()))
}

/// A queue topic's settings, or `404`.
fn queue_of<'t>(name: &str, topic: Option<&'t Topic>) -> Result<(&'t Topic, &'t QueueDelivery), ApiError> {
    let topic = topic.ok_or_else(|| ApiError::UnknownTopic(name.to_string()))?;
    let queue = topic.queue.as_ref().ok_or_else(|| ApiError::NotFound(format!("queue of topic {name:?}")))?;
    Ok((topic, queue))
}

/// The leases a change is handing to the waiters it took out of the queue,
/// while it stores them: if the change ends before handing them (its
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

    /// The clock (for the shell: its per-invocation state).
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Serve `op` for the topic called `name`, configured as `topic` (if it still is).
    pub async fn call(&self, name: &str, topic: Option<&Topic>, op: GateOp) -> Result<GateAnswer, ApiError> {
        if op != GateOp::Status {
            *self.requests.borrow_mut().entry(op.name()).or_default() += 1;
        }
        // Dead letters are kept within the bounds of the topic as configured now, or the defaults.
        let bounds = topic.and_then(|t| t.queue.as_ref()).map(|q| q.dead_letters).unwrap_or_default();
        match op {
            GateOp::Acquire { wait_ms } => self.acquire(name, topic_of(name, topic)?, wait_ms).await,
            GateOp::Release { lease, outcome } => self.release(name, topic_of(name, topic)?, lease, outcome).await,
            GateOp::Report { outcome } => self.report(name, topic_of(name, topic)?, outcome).await,
            GateOp::Target => self.target(topic_of(name, topic)?).await,
            GateOp::Resume => self.resume(name, topic_of(name, topic)?).await,
            GateOp::Topic => self.topic_status(name, topic_of(name, topic)?).await,
            GateOp::Tally { counts } => self.tally(topic_of(name, topic)?, counts).await,
            GateOp::Metrics => self.totals(topic_of(name, topic)?).await,
            GateOp::DeadKey { key, at } => {
                self.prepare().await?;
                self.store.record_dead_key(&key, at)?;
                Ok(GateAnswer::Counted { ok: true })
            }
            GateOp::DeadKeys { since, after, limit } => {
                self.prepare().await?;
                let (keys, remaining) = self.store.dead_keys(since, after.as_deref(), limit.clamp(1, RECOVER_KEYS))?;
                Ok(GateAnswer::DeadKeys { keys, remaining })
            }
            GateOp::ForgetDeadKeys { keys } => {
                self.prepare().await?;
                self.store.forget_dead_keys(&keys)?;
                Ok(GateAnswer::Counted { ok: true })
            }
            GateOp::Count { counter } => {
                let (topic, _) = queue_of(name, topic)?;
                self.count(topic, counter).await
            }
            GateOp::Status => {
                let (topic, queue) = queue_of(name, topic)?;
                self.status(name, topic, queue).await
            }
            GateOp::DeadLetter { message } => self.keep(message, bounds).await,
            GateOp::Room => self.room(bounds).await,
            GateOp::DeadLetters { after, limit } => self.page(after, limit).await,
            GateOp::Replay { id } => {
                let (_, queue) = queue_of(name, topic)?;
                self.replay_one(&queue.binding, id).await
            }
            GateOp::ReplayAll => {
                let (_, queue) = queue_of(name, topic)?;
                self.replay_all(&queue.binding).await
            }
            GateOp::Discard { id } => self.discard(id).await,
        }
    }

    /// The stored gate (or a fresh one), brought to the topic's current bound
    /// (a topic with none: [`MAX_LIMIT`] leases, no rate — only probes take them).
    async fn load(&self, topic: &Topic) -> Result<(), ApiError> {
        let (limit, rate) = topic.forward.map_or((MAX_LIMIT, None), |f| (f.concurrency, f.rate_per_s));
        let lease_ms = topic.delivery_timeout_ms + LEASE_MARGIN_MS;
        if self.state.borrow().is_none() {
            let stored = self.store.load().await?;
            // Another call may have loaded it while this one awaited.
            if self.state.borrow().is_none() {
                let loaded = stored.unwrap_or_else(|| GateState {
                    gate: Gate::new(limit, rate, lease_ms),
                    counters: BTreeMap::new(),
                    target: Target::default(),
                    metrics: BTreeMap::new(),
                });
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
            return Err(ApiError::from(e));
        }
        Ok(())
    }

    /// Store a change of the gate, then hand the leases it granted to the
    /// waiters taken out for them (`handed`), and wake the first waiter to
    /// look again. If the store fails nothing handed is stored: each waiter
    /// looks again (and reloads).
    async fn commit(&self, handed: Vec<(Rc<Slot>, Grant)>) -> Result<(), ApiError> {
        let mut handoff = Handoff(handed);
        if let Err(e) = self.save().await {
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
        Ok(())
    }
}
