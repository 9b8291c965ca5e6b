//! [`KeyObject`]: one key's whole logic — accept, alarm, flush, cancel,
//! replay, discard, status, recovery from storage — over the three
//! [`ports`](crate::ports), with no Workers API in it. The Durable Object is a
//! thin shell around it; the native fault harness drives the same type with
//! fakes that fail or crash at every write and every await.
//!
//! This file holds the await points (load, arm, commit, send) and the
//! request's dispatch; [`request`] the typed request, [`state`] what a key
//! keeps and decides, `memory` the key as loaded and how effects become rows,
//! `load` recovery from storage, `deliver` the alarm's delivery loop,
//! [`timeline`] the recent log. The stored format and the commit protocol
//! with what each failure leaves behind: `STORAGE.md`.
//!
//! Guarantees:
//! - **One row per request's events**: accepting writes the events alone, the
//!   events one request brings for the key sharing a row (the very first
//!   event of a key also writes its first snapshot). The snapshot is written
//!   only when something else changes the key (a delivery begins or ends,
//!   flush, cancel, replay, discard, an alarm serves a deadline); on load the newest snapshot is restored and
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
//!   a crash counts as a failed attempt at load and is retried as the next one
//!   (the runtime runs the alarm whose handler was cut short again).
//! - No `RefCell` borrow is held across an `await` (state is touched only in
//!   `KeyObject::with`, whose closure cannot await).

mod admit;
mod deliver;
mod load;
mod memory;
pub(crate) mod per_minute;
pub(crate) mod request;
mod rows;
pub(crate) mod state;
pub(crate) mod timeline;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use lull_core::Retry;

use crate::error::ApiError;
use crate::isolate::Isolate;
use crate::key::state::Effect;
use crate::key::timeline::{TIMELINE_KEEP, Timeline};
use crate::metrics::{Point, What};
use crate::names::Key;
use crate::ports::{Host, Outbound, Store};
use crate::queue::gate::Gates;
use crate::topic::Topic;
use memory::{Batch, Loaded};
use per_minute::{PerMinute, Taken};
pub use request::{KeyCall, KeyReply, KeyRequest};

/// Dead letters per page at most (`GET …/dead-letters?limit=`).
pub const MAX_PAGE: usize = 500;
/// Dead letters per page unless asked.
pub const DEFAULT_PAGE: usize = 100;
/// Queued windows and dead letters the status shows (oldest first); it gives counts of all.
pub(crate) const STATUS_FEW: usize = 10;
/// A failed `alarm()` tries again after 1 s, doubling per failure in a row, up to 60 s.
pub(crate) const ALARM_RETRY: Retry = Retry::backoff(u32::MAX, 1_000, 60_000);
/// `Retry-After` when storage failed (seconds): the crate's, named here too.
pub(crate) use crate::error::UNAVAILABLE_RETRY_SECS;
/// `Retry-After` at the pending bound when no retry is scheduled (seconds).
pub(crate) const FULL_RETRY_SECS: u64 = 60;
/// Producer idempotency keys a key remembers (the oldest is forgotten first).
pub const DEDUPE_SLOTS: u32 = 4_096;
/// Events one row holds at most: a request's events for the key share rows of at most this many.
pub const MAX_ROW_EVENTS: usize = 1_000;
/// Bodies' bytes one shared row holds at most (a Durable Object's SQLite
/// takes rows up to 2 MB; one event, at most `MAX_BODY_BYTES`, always fits).
pub const MAX_ROW_BYTES: usize = 1024 * 1024;
/// Superseded event rows (of `last` and `first` windows) held before a
/// snapshot frees them: bounds a never-quiet window's rows, and what a load replays.
pub const CHECKPOINT_ROWS: usize = 64;

/// One key's logic over its storage, host, outbound call and its topic's object.
pub struct KeyObject<S, H, O, G> {
    store: S,
    host: H,
    outbound: O,
    /// The topic's object: its target's state and its bound on deliveries.
    gates: G,
    /// What the isolate's objects share: target states, metric sums.
    isolate: Rc<Isolate>,
    loaded: RefCell<Option<Loaded>>,
    alarm_failures: Cell<u32>,
    /// What the key committed lately; kept across a reload, lost when the object stops.
    timeline: RefCell<Timeline>,
    /// Client token holders' events this minute; kept across a reload, lost when the object stops.
    per_minute: RefCell<PerMinute>,
}

fn json_error(e: serde_json::Error) -> ApiError {
    ApiError::Internal(e.to_string())
}

impl<S: Store, H: Host, O: Outbound, G: Gates> KeyObject<S, H, O, G> {
    /// A key over its storage, host, outbound call and topic's object, with
    /// what its isolate shares; nothing is read until the first call.
    pub fn new(store: S, host: H, outbound: O, gates: G, isolate: Rc<Isolate>) -> Self {
        let timeline = RefCell::new(Timeline::new(host.now()));
        let (loaded, alarm_failures, per_minute) = (RefCell::new(None), Cell::new(0), RefCell::default());
        KeyObject { store, host, outbound, gates, isolate, loaded, alarm_failures, timeline, per_minute }
    }

    /// The storage (for tests and the shell).
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The host (for the shell: its per-invocation state).
    pub fn host(&self) -> &H {
        &self.host
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

    /// Run `f`, arm the alarm if the deadline moved earlier, commit; all or nothing.
    async fn op<R>(&self, f: impl FnOnce(&mut Loaded, &mut Batch, u64) -> Result<R, ApiError>) -> Result<R, ApiError> {
        let now = self.host.now();
        let mut changed = false;
        let outcome = self.with(|l| {
            let mut batch = Batch::default();
            let result = f(l, &mut batch, now);
            // A refusal after part of the operation was applied (a batch's later event) changed memory.
            changed = !batch.writes.is_empty() || !batch.events.is_empty();
            let result = result?;
            l.store_events(now, &mut batch);
            if !batch.writes.is_empty() {
                l.touched = l.touched.max(now);
            }
            if (!l.persisted && !batch.writes.is_empty()) || batch.snapshot_due {
                l.snapshot(&mut batch)?;
            }
            // A key that never stored anything and stores nothing now has nothing to collect either.
            let alarm = if l.persisted || !batch.writes.is_empty() { l.arm_earlier(now) } else { None };
            batch.lines = l.lines(&batch.logs);
            Ok((result, batch, alarm))
        });
        let (result, batch, alarm) = match outcome {
            Ok(done) => done,
            // A refusal before anything was applied changes nothing; any other failure may have changed memory.
            Err(e @ (ApiError::NotFound(_) | ApiError::TooManyPending { .. } | ApiError::IdempotencyKeyReused))
                if !changed =>
            {
                return Err(e);
            }
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
            return Err(e.into());
        }
        if batch.writes.is_empty() {
            self.counted(batch.points);
            return Ok(());
        }
        match self.store.commit(batch.writes) {
            Ok(rows) => {
                let _ = self.with(|l| {
                    l.ks.io.rows_written += rows;
                    if batch.accepting {
                        l.ks.io.accept_rows_written += rows;
                    }
                    Ok(())
                });
                self.committed(batch.lines);
                self.counted(batch.points);
                Ok(())
            }
            Err(e) => {
                self.forget();
                Err(e.into())
            }
        }
    }

    /// Keep what a committed operation did in the timeline, and log what the
    /// log gets ([`Fact::logged`](crate::log::Fact::logged)).
    /// `n` events of `topic` answered `reply`: counted accepted, or refused by its code.
    fn count_events(&self, topic: &str, n: u32, reply: &Result<KeyReply, ApiError>) {
        let outcome = match reply {
            Ok(_) => "accepted",
            Err(e) => e.code(),
        };
        self.counted(vec![Point { count: f64::from(n), ..Point::new(topic, What::Events, outcome) }]);
    }

    /// Write the data points of a committed batch, and count them in the isolate's sums.
    fn counted(&self, points: Vec<Point>) {
        for point in points {
            self.isolate.tally.add(&point);
            self.host.point(point);
        }
    }

    fn committed(&self, lines: Vec<(String, bool)>) {
        let at = self.host.now();
        let mut timeline = self.timeline.borrow_mut();
        for (line, logged) in lines {
            if logged {
                self.host.log(&line);
            }
            timeline.push(at, line);
        }
    }

    /// Serve one request for `(topic, key)`.
    pub async fn request(&self, topic: &Topic, key: &Key, request: KeyRequest) -> Result<KeyReply, ApiError> {
        self.load(Some((topic, key))).await?;
        self.with(|l| {
            l.retention_ms = topic.retention_ms;
            l.set_log_keys(topic.log_keys);
            l.ks.io.requests += 1;
            Ok(())
        })?;
        self.follow(topic).await?;
        match request {
            KeyRequest::Event { body, idempotency_key, events_per_minute, holder } => {
                let taken = self.take_minute(events_per_minute, holder.as_deref(), 1);
                let reply = match taken {
                    Ok(taken) => {
                        let reply = self.op(|l, batch, now| l.accept(topic, body, idempotency_key, now, batch)).await;
                        self.settle_minute(taken, &reply);
                        reply
                    }
                    Err(e) => Err(e),
                };
                self.count_events(&topic.name, 1, &reply);
                self.hand_over(&topic.name).await;
                reply
            }
            KeyRequest::Events { events, events_per_minute, holder } => {
                // The share's whole count first: all of it fits the holder's minute, or none is taken.
                let count = u32::try_from(events.len()).unwrap_or(u32::MAX);
                let reply = match self.take_minute(events_per_minute, holder.as_deref(), count) {
                    Ok(taken) => {
                        // One transaction for the key's events; if one is refused, none is stored.
                        let reply = self
                            .op(|l, batch, now| {
                                let mut accepted = Vec::with_capacity(events.len());
                                for (body, producer_key) in events {
                                    accepted.push(l.accept(topic, body, producer_key, now, batch)?.body);
                                }
                                Ok(KeyReply { status: 202, body: serde_json::json!({ "accepted": accepted }) })
                            })
                            .await;
                        self.settle_minute(taken, &reply);
                        reply
                    }
                    Err(e) => Err(e),
                };
                self.count_events(&topic.name, count, &reply);
                self.hand_over(&topic.name).await;
                reply
            }
            KeyRequest::Status => {
                let rows = self.store.event_rows()?;
                self.with(|l| Ok(KeyReply { status: 200, body: l.status(self.store.size(), rows) }))
            }
            KeyRequest::DeadLetters { after, limit } => {
                self.with(|l| Ok(KeyReply { status: 200, body: l.dead_letters(after, limit) }))
            }
            KeyRequest::Timeline { after, limit } => {
                let body = self.timeline.borrow().page(after, limit.clamp(1, TIMELINE_KEEP));
                Ok(KeyReply { status: 200, body })
            }
            KeyRequest::ReplaySince { since } => {
                let replayed = self.with(|l| {
                    Ok(l.ks.engine().dead_letters().iter().filter(|d| d.failed_at >= since).count() as u64)
                })?;
                let mut reply = self.change(|l, now| l.change(KeyRequest::ReplaySince { since }, now)).await?;
                let left = reply.body["dead_letter_count"].as_u64().unwrap_or(0);
                reply.body = serde_json::json!({"replayed": replayed, "dead_letter_count": left});
                Ok(reply)
            }
            change => self.change(|l, now| l.change(change, now)).await,
        }
    }

    /// Take room for `events` in a client token holder's `events_per_minute`
    /// (nothing to take without one), before the request changes anything.
    fn take_minute(
        &self,
        per_minute: Option<u32>,
        holder: Option<&str>,
        events: u32,
    ) -> Result<Option<Taken>, ApiError> {
        let Some(per_minute) = per_minute else { return Ok(None) };
        // A call from before holders were named counts as one holder per key, as it did.
        let holder = holder.unwrap_or("");
        self.per_minute.borrow_mut().take(holder, per_minute, events, self.host.now()).map(Some)
    }

    /// A request that stored nothing gives back the room it took.
    fn settle_minute(&self, taken: Option<Taken>, reply: &Result<KeyReply, ApiError>) {
        if let (Some(taken), Err(_)) = (taken, reply) {
            self.per_minute.borrow_mut().give_back(taken);
        }
    }

    /// Bring the key to its topic's policy (from its next burst) and window terms, if they changed.
    async fn follow(&self, topic: &Topic) -> Result<(), ApiError> {
        if self.with(|l| Ok(l.ks.follows(topic)))? {
            return Ok(());
        }
        self.op(|l, batch, now| {
            let effects = l.ks.set_policy(topic, now);
            l.apply(effects, batch)?;
            l.snapshot(batch)
        })
        .await
    }

    /// An operation other than an event: its effects, a snapshot, the status as the answer.
    async fn change(
        &self,
        f: impl FnOnce(&mut Loaded, u64) -> Result<Vec<Effect>, ApiError>,
    ) -> Result<KeyReply, ApiError> {
        self.op(|l, batch, now| {
            let effects = f(l, now)?;
            // A flush or cancel of a key that holds nothing changes nothing: nothing is stored.
            if effects.is_empty() && !l.persisted {
                return Ok(());
            }
            l.apply(effects, batch)?;
            l.snapshot(batch)?;
            Ok(())
        })
        .await?;
        self.with(|l| Ok(KeyReply { status: 200, body: l.ks.status(&l.topic, l.key.as_str(), STATUS_FEW) }))
    }
}
