//! A key's deliveries: the alarm's loop (take the next due fire, mark it
//! begun, send it, record the outcome), what a delivery carries
//! ([`Loaded::job`]), and the alarm's own failures.
//!
//! A delivery sets no alarm of its own. It runs inside `alarm()`, and the
//! runtime holds the alarm that woke the key until the handler ends: a handler
//! cut short (the object died mid-delivery) runs again, and its load finds the
//! delivery marked begun, counts the attempt failed and arms the key's own
//! alarm. Until the loop finds nothing due, the alarm running stands for
//! anything that falls due meanwhile (a window filled during a delivery is
//! taken by the loop): no request arms for it. That last look arms what the
//! key needs next (a deadline, a retry, or the idle key's collection).

use lull_core::Fire;
use serde_json::json;
use serde_json::value::RawValue;

use super::admit::Pass;
use super::memory::{Batch, Job, Loaded};
use super::state::{Counted, Effect, LastDelivery};
use super::{ALARM_RETRY, KeyObject, json_error};
use crate::delivery::body::{Delivery, Payload, idempotency_key};
use crate::delivery::queue_message;
use crate::error::ApiError;
use crate::log::Fact;
use crate::metrics::{What, outcome_class};
use crate::ports::{Bodies, Host, Outbound, Outcome, Outgoing, Store, ToQueue};
use crate::queue::gate::{Forwarded, Gates};
use crate::target::Verdict;
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

/// What the alarm's first step of a delivery found.
// One per alarm step, moved once: boxing would allocate per delivery (and the lint fires on 64-bit targets only).
#[allow(clippy::large_enum_variant)]
enum Step {
    /// Nothing due.
    Idle,
    /// A fire due, committed; whether it may go needs a request.
    Due(Fire),
    /// The due fire was held by the target, in the same step.
    Held,
    /// The due fire was begun in the same step (its job; `None`: it was stale), under this pass.
    Begun(Option<Job>, Pass),
}

impl Loaded {
    /// The target holds the due `fire` until `until`: it goes then, as the same attempt.
    fn hold_due(&mut self, fire: &Fire, now: u64, until: u64, batch: &mut Batch) -> Result<(), ApiError> {
        let effects = self.ks.hold(fire, now, until).map_err(|e| ApiError::Internal(e.to_string()))?;
        self.apply(effects, batch)?;
        self.snapshot(batch)
    }

    /// Add the snapshot if the step wrote a row or a log fact (a served
    /// deadline asks for it anyway: `Batch::snapshot_due`).
    fn snapshot_if_changed(&mut self, batch: &mut Batch) -> Result<(), ApiError> {
        if batch.writes.is_empty() && batch.logs.is_empty() { Ok(()) } else { self.snapshot(batch) }
    }

    /// Take the next due fire and mark its delivery begun (the alarm running
    /// now guards it): its job, or `None` if no fire is current (the loop
    /// ends there: the alarm is spent, and what the key needs next is armed).
    fn begin(&mut self, topic: Option<&Topic>, store: &impl Store, batch: &mut Batch) -> Result<Option<Job>, ApiError> {
        let (fire, effects) = self.ks.begin_delivery();
        self.apply(effects, batch)?;
        let Some(fire) = fire else {
            self.armed = None;
            self.snapshot_if_changed(batch)?;
            return Ok(None);
        };
        let job = self.job(fire, topic, store)?;
        self.snapshot(batch)?;
        Ok(Some(job))
    }
}

impl<S: Store, H: Host, O: Outbound, G: Gates> KeyObject<S, H, O, G> {
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
            // The alarm that woke us stands for whatever falls due until the
            // loop below finds nothing due: that last look arms what the key
            // needs next. Meanwhile no request arms for a fire the loop will take.
            l.armed = Some(now);
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
            let name = self.with(|l| Ok(l.topic.clone()))?;
            self.forget();
            self.store.erase().await?;
            self.host.log(&line);
            self.hand_over(&name).await;
            return Ok(());
        }
        let topic = self.with(|l| Ok(topics.get(&l.topic)))?;
        if let Some(topic) = topic {
            self.follow(topic).await?;
        }
        // A webhook topic's target decides when its deliveries go (a queue topic's consumer asks for itself).
        let webhook = topic.filter(|t| t.queue.is_none());
        let key = self.with(|l| Ok(l.key.as_str().to_string()))?;
        loop {
            // Serve the deadlines passed and find the next due fire. When the
            // isolate's copy of the target's state decides whether it may go
            // (or the topic has no target to ask), it is held or begun in the
            // same step: one snapshot for both. Else the step is committed and
            // the topic's object asked before the next.
            let step = self
                .op(|l, batch, now| {
                    let effects = l.ks.timeout(now);
                    l.apply(effects, batch)?;
                    let (due, effects) = l.ks.due();
                    l.apply(effects, batch)?;
                    let Some(fire) = due else {
                        // The loop's last look: the alarm that woke us is spent, arm what the key needs next.
                        l.armed = None;
                        l.snapshot_if_changed(batch)?;
                        return Ok(Step::Idle);
                    };
                    let known = match webhook {
                        Some(topic) => self.pass_known(topic, &key, now),
                        None => Some(Pass::Go { lease: None, view: None }),
                    };
                    match known {
                        Some(Pass::Hold { until }) => l.hold_due(&fire, now, until, batch).map(|()| Step::Held),
                        Some(pass) => Ok(Step::Begun(l.begin(topics.get(&l.topic), &self.store, batch)?, pass)),
                        None => {
                            l.snapshot_if_changed(batch)?;
                            Ok(Step::Due(fire))
                        }
                    }
                })
                .await?;
            let (job, pass) = match step {
                Step::Idle => break,
                Step::Held => continue,
                Step::Begun(job, pass) => (Ok(job), pass),
                Step::Due(due) => {
                    let pass = match webhook {
                        Some(topic) => self.pass(topic, &key).await,
                        None => Pass::Go { lease: None, view: None },
                    };
                    if let Pass::Hold { until } = pass {
                        // Held by the target (paused, disabled, a probe out, or no room): the same attempt goes then.
                        self.op(|l, batch, now| l.hold_due(&due, now, until, batch)).await?;
                        continue;
                    }
                    // Take the next due fire and mark its delivery begun (the alarm running now guards it).
                    (self.op(|l, batch, _| l.begin(topics.get(&l.topic), &self.store, batch)).await, pass)
                }
            };
            let job = match job {
                Ok(Some(job)) => job,
                Ok(None) | Err(_) => {
                    if let Some(topic) = webhook {
                        self.give_back(topic, pass).await;
                    }
                    job?;
                    break;
                }
            };
            let started = self.host.now();
            // What the topic's object is told after the outcome is stored (a
            // delivery's answer is never left to be found "interrupted").
            let mut tell_after = None;
            let (outcome, again) = match job.out {
                Ok(out) => {
                    let (idempotency_key, attempt) = (out.idempotency_key.clone(), out.attempt);
                    let outcome = self.outbound.send(out).await;
                    let forwarded = Forwarded::of(&idempotency_key, attempt, &outcome);
                    let again = match webhook {
                        // A throttle (or a 410) waits for the target's time: asked first.
                        Some(topic) if Verdict::of(&outcome).is_held() => {
                            let told = self.tell(topic, pass, forwarded).await;
                            Some((self.again_at(topic, &key, told, &outcome), topic.target_terms))
                        }
                        Some(topic) => {
                            tell_after = Some((topic, forwarded));
                            None
                        }
                        None => None,
                    };
                    (outcome, again)
                }
                Err(why) => {
                    if let Some(topic) = webhook {
                        self.give_back(topic, pass).await;
                    }
                    (Outcome::failed(why), None)
                }
            };
            // A webhook topic's attempt is counted (a queue topic's forwards are its consumer's).
            let counted = webhook.map(|_| Counted {
                what: What::Attempt,
                outcome: outcome_class(&outcome),
                reason: "",
                latency_ms: self.host.now().saturating_sub(started),
            });
            let stored = self
                .op(|l, batch, now| {
                    let fire = job.fire;
                    let last = LastDelivery {
                        window: fire.window,
                        attempt: fire.attempt,
                        at: now,
                        ok: outcome.ok,
                        outcome: outcome.detail,
                    };
                    // A throttle (or a 410) spends no attempt, within the topic's `max_throttled_ms`.
                    let effects = match again {
                        Some((until, terms)) => l.ks.throttled(&fire, last, until, terms.max_throttled_ms),
                        None => l.ks.delivered(&fire, last),
                    }
                    .map_err(|e| ApiError::Internal(e.to_string()))?;
                    l.apply(effects, batch)?;
                    l.apply(counted.into_iter().map(Effect::Count).collect(), batch)?;
                    l.snapshot(batch)
                })
                .await;
            // The lease goes back (and the target hears of it) whether or not the outcome was stored.
            if let Some((topic, forwarded)) = tell_after {
                self.tell(topic, pass, forwarded).await;
            }
            stored?;
        }
        if let Some(topic) = topic {
            self.tell_dead_letters(&topic.name).await?;
            self.hand_over(&topic.name).await;
        }
        Ok(())
    }
}
