//! A key's deliveries: the alarm's loop (take the next due fire, mark it
//! begun, send it, record the outcome), what a delivery carries
//! ([`Loaded::job`]), and the alarm's own failures.
//!
//! A delivery sets no alarm of its own. It runs inside `alarm()`, and the
//! runtime holds the alarm that woke the key until the handler ends: a handler
//! cut short (the object died mid-delivery) runs again, and its load finds the
//! delivery marked begun, counts the attempt failed and arms the key's own
//! alarm. Its end arms what the key needs next (a due fire, a deadline, or the
//! idle key's collection).

use lull_core::Fire;
use serde_json::json;
use serde_json::value::RawValue;

use super::memory::{Job, Loaded};
use super::state::LastDelivery;
use super::{ALARM_RETRY, KeyObject, json_error};
use crate::delivery::body::{Delivery, Payload, idempotency_key};
use crate::delivery::queue_message;
use crate::error::ApiError;
use crate::log::Fact;
use crate::ports::{Bodies, Host, Outbound, Outcome, Outgoing, Store, ToQueue};
use crate::topic::{MAX_WINDOW_BYTES, PayloadMode, Topic, Topics};

impl Loaded {
    /// The delivery of `fire` for `topic` (or why there is none).
    pub(super) fn job(&self, fire: Fire, topic: Option<&Topic>, store: &impl Store) -> Result<Job, ApiError> {
        let Some(topic) = topic else {
            return Ok(Job { fire, out: Err("topic is no longer configured".into()) });
        };
        let (first, last) = match topic.payload {
            PayloadMode::All => (fire.span.first, fire.span.last),
            PayloadMode::First => (fire.span.first, fire.span.first),
            PayloadMode::Last => (fire.span.last, fire.span.last),
        };
        // A body too large to build is a failed attempt (retried, then a dead
        // letter), never a stuck key: windows are bounded by `max_window_bytes`,
        // but one formed before that bound existed may not be.
        // Every row of the span, except under `all` for a window formed under
        // `last` or `first` (the topic changed): it carries the events it kept.
        let rows = match store.bodies(first, last, MAX_WINDOW_BYTES)? {
            Bodies::Read(rows) => rows,
            Bodies::TooLarge(bytes) => {
                let why =
                    format!("the window's events are {bytes} bytes, over the {MAX_WINDOW_BYTES} a delivery carries");
                return Ok(Job { fire, out: Err(why) });
            }
        };
        let raws =
            rows.into_iter().map(|r| RawValue::from_string(r).map_err(json_error)).collect::<Result<Vec<_>, _>>()?;
        let payload = match (topic.payload, raws.first()) {
            (PayloadMode::All, _) => Payload::Events(raws.iter().map(|r| r.as_ref()).collect()),
            (_, Some(raw)) => Payload::Event(raw),
            (_, None) => return Ok(Job { fire, out: Err(format!("window {} has no event row", fire.window)) }),
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
            topic: self.topic.clone(),
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
    /// The alarm went off: deliver what is due, then re-arm. When the work
    /// fails, the key arms its own retry with a capped backoff
    /// ([`alarm_failed`](Self::alarm_failed)) and the error is returned, so the
    /// runtime also retries the alarm should that re-arm have failed too: a
    /// key holding work is never left without an alarm.
    pub async fn alarm(&self, topics: &Topics) -> Result<(), ApiError> {
        match self.run_alarm(topics).await {
            Ok(()) => {
                self.alarm_failures.set(0);
                Ok(())
            }
            Err(error) => {
                self.alarm_failed(&error).await;
                Err(error)
            }
        }
    }

    /// The alarm could not do its work: log it, and arm again after a backoff
    /// that doubles with each failure in a row (`ALARM_RETRY`). If that
    /// re-arm fails too, memory is dropped (the next call reloads, and a load
    /// always arms) and the runtime's own retry of the failed handler remains.
    pub async fn alarm_failed(&self, error: &ApiError) {
        let failures = self.alarm_failures.get().saturating_add(1);
        self.alarm_failures.set(failures);
        let backoff = ALARM_RETRY.ceiling(failures);
        let again = self.host.now().saturating_add(backoff);
        let fact =
            Fact::new("alarm_error", json!({"error": error.message(), "failures": failures, "retry_in_ms": backoff}));
        self.host.log(&fact.line(&[]));
        let _ = self.with(|l| {
            l.armed = Some(again);
            Ok(())
        });
        if let Err(e) = self.host.set_alarm(again).await {
            self.forget();
            self.host.log(&Fact::new("alarm_error", json!({"error": e.0, "rearm": false})).line(&[]));
        }
    }

    async fn run_alarm(&self, topics: &Topics) -> Result<(), ApiError> {
        if !self.load(None).await? {
            return Ok(());
        }
        self.with(|l| {
            l.ks.io.requests += 1;
            Ok(())
        })?;
        let now = self.host.now();
        let collect = self.with(|l| {
            l.armed = None; // the alarm that woke us is spent
            if let Some(topic) = topics.get(&l.topic) {
                l.retention_ms = topic.retention_ms;
                l.set_log_keys(topic.log_keys);
            }
            let idle_since = l.touched;
            let due = l.ks.is_idle() && now >= idle_since.saturating_add(l.retention_ms);
            Ok(due.then(|| l.line(&Fact::new("collected", json!({"idle_ms": now - idle_since})))))
        })?;
        if let Some(line) = collect {
            // Everything goes: rows, snapshot, remembered keys, alarm. A request
            // after this starts a fresh key, with a new incarnation.
            self.forget();
            self.store.erase().await?;
            self.host.log(&line);
            return Ok(());
        }
        let topic = self.with(|l| Ok(topics.get(&l.topic)))?;
        if let Some(topic) = topic {
            self.follow(topic).await?;
        }
        loop {
            // Take the next due fire and mark its delivery begun (the alarm running now guards it).
            let job = self
                .op(|l, batch, now| {
                    let effects = l.ks.timeout(now);
                    l.apply(effects, batch)?;
                    let (fire, effects) = l.ks.begin_delivery();
                    l.apply(effects, batch)?;
                    let Some(fire) = fire else {
                        if !batch.writes.is_empty() || !batch.logs.is_empty() {
                            l.snapshot(batch)?;
                        }
                        return Ok(None);
                    };
                    let job = l.job(fire, topics.get(&l.topic), &self.store)?;
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
                let fire = job.fire;
                let last = LastDelivery {
                    window: fire.window,
                    attempt: fire.attempt,
                    at: now,
                    ok: outcome.ok,
                    outcome: outcome.detail,
                };
                let effects = l.ks.delivered(&fire, last).map_err(|e| ApiError::Internal(e.to_string()))?;
                l.apply(effects, batch)?;
                l.snapshot(batch)
            })
            .await?;
        }
        Ok(())
    }
}
