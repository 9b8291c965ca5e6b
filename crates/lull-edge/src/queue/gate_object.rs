//! [`GateObject`]: the logic of a queue topic's `TopicGate` Durable Object
//! (named by the topic) over its [`GateStore`]: the topic's [`Gate`], its
//! counters and the dead letters it keeps, so the bound holds across
//! consumer batches, invocations and isolates. Each call is a typed
//! [`GateOp`] and gets a typed [`GateAnswer`]; both cross from the consumer
//! to the object as JSON ([`GateCall`]).
//!
//! Guarantees (storage: `STORAGE.md`):
//! - **A restart keeps the leases**: the gate is stored after each change,
//!   before the answer; a failed store forgets memory (the next call reloads)
//!   and answers `503`, so no lease is granted that storage does not hold.
//! - **Dead letters are kept whatever the topic is configured as now**, at
//!   most [`MAX_DEAD_LETTERS`]; past it `507 dead_letters_full` and the
//!   dead-letter queue keeps retrying the message.
//!
//! Not guaranteed: the dead letters are one stored value, rewritten whole on
//! each addition (it grows with their number, up to the bound).

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::http::ApiError;
use crate::ports::GateStore;
use crate::queue::gate::{Gate, Grant};
use crate::topic::Topic;

/// Dead letters a topic keeps at most; past it the dead-letter queue keeps retrying them.
pub const MAX_DEAD_LETTERS: usize = 1_000;
/// A lease outlives its forward's timeout by this much before it expires.
pub const LEASE_MARGIN_MS: u64 = 5_000;
/// Dead letters the status shows (the oldest); it gives the count of all.
pub const STATUS_DEAD_LETTERS: usize = 10;

/// A counter of the topic's consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// A message forwarded and acked.
    Acked,
    /// A message retried through the queue.
    Retried,
    /// A message sent to the queue again to wait for room.
    Requeued,
}

impl Counter {
    /// Its name in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Counter::Acked => "acked",
            Counter::Retried => "retried",
            Counter::Requeued => "requeued",
        }
    }
}

/// What the consumer asks a topic's gate object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum GateOp {
    /// A lease to forward now, or when to ask again.
    Acquire,
    /// The forward under `lease` ended.
    Release {
        /// The lease.
        lease: u64,
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
    /// In flight, bound, counters and the oldest dead letters.
    Status,
}

impl GateOp {
    /// A short name for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            GateOp::Acquire => "acquire",
            GateOp::Release { .. } => "release",
            GateOp::Count { .. } => "count",
            GateOp::DeadLetter { .. } => "dead-letter",
            GateOp::Status => "status",
        }
    }
}

/// A gate operation addressed to its topic: what crosses from the consumer
/// (or the status route) to the gate object, as JSON in the request's body.
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
    /// To [`GateOp::DeadLetter`]: `{"kept": count}`, the dead letters now kept.
    Kept(usize),
    /// To [`GateOp::Status`]: the status (`GET /v1/topics/{topic}/queue`).
    Status(Value),
}

impl GateAnswer {
    /// The JSON body.
    pub fn to_json(&self) -> Value {
        match self {
            GateAnswer::Grant(Grant::Go { lease, expires_at }) => json!({"go": lease, "expires_at": expires_at}),
            GateAnswer::Grant(Grant::Wait { retry_at }) => json!({"wait_until": retry_at}),
            GateAnswer::Released(released) => json!({"released": released}),
            GateAnswer::Counted => json!({"ok": true}),
            GateAnswer::Kept(count) => json!({"kept": count}),
            GateAnswer::Status(status) => status.clone(),
        }
    }

    /// The answer to `op` that `body` holds (as [`GateAnswer::to_json`] wrote it).
    pub fn from_json(op: &GateOp, body: &Value) -> Option<GateAnswer> {
        let number = |name: &str| body.get(name).and_then(Value::as_u64);
        Some(match op {
            GateOp::Acquire => match (number("go"), number("expires_at"), number("wait_until")) {
                (Some(lease), Some(expires_at), _) => GateAnswer::Grant(Grant::Go { lease, expires_at }),
                (None, _, Some(retry_at)) => GateAnswer::Grant(Grant::Wait { retry_at }),
                _ => return None,
            },
            GateOp::Release { .. } => GateAnswer::Released(body.get("released")?.as_bool()?),
            GateOp::Count { .. } => GateAnswer::Counted,
            GateOp::DeadLetter { .. } => GateAnswer::Kept(usize::try_from(number("kept")?).ok()?),
            GateOp::Status => GateAnswer::Status(body.clone()),
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

/// One queue topic's gate, counters and dead letters over its storage.
pub struct GateObject<S> {
    store: S,
    state: RefCell<Option<GateState>>,
}

fn internal(e: crate::ports::StoreError) -> ApiError {
    ApiError::Internal(e.0)
}

impl<S: GateStore> GateObject<S> {
    /// A gate object over `store`; nothing is read until the first call.
    pub fn new(store: S) -> Self {
        GateObject { store, state: RefCell::new(None) }
    }

    /// Serve `op` for the topic called `name`, configured as `topic` (if it
    /// still is), at `now` (unix ms).
    pub async fn call(&self, name: &str, topic: Option<&Topic>, op: GateOp, now: u64) -> Result<GateAnswer, ApiError> {
        if let GateOp::DeadLetter { message } = op {
            return self.keep(message).await;
        }
        let topic = topic.ok_or_else(|| ApiError::UnknownTopic(name.to_string()))?;
        let queue = topic.queue.as_ref().ok_or_else(|| ApiError::NotFound(format!("queue of topic {name:?}")))?;
        let lease_ms = topic.delivery_timeout_ms + LEASE_MARGIN_MS;
        self.load(queue.forward_concurrency, queue.forward_rate_per_s, lease_ms).await?;
        let (answer, changed) = {
            let mut guard = self.state.borrow_mut();
            let Some(GateState { gate, counters }) = guard.as_mut() else {
                return Err(ApiError::Internal("gate not loaded".into()));
            };
            match op {
                GateOp::Acquire => {
                    let grant = gate.acquire(now);
                    (GateAnswer::Grant(grant), matches!(grant, Grant::Go { .. }))
                }
                GateOp::Release { lease } => (GateAnswer::Released(gate.release(lease)), true),
                GateOp::Count { counter } => {
                    *counters.entry(counter.as_str().to_string()).or_default() += 1;
                    (GateAnswer::Counted, true)
                }
                GateOp::Status => {
                    let status = json!({"topic": name, "in_flight": gate.in_flight(now),
                                        "forward_concurrency": queue.forward_concurrency,
                                        "forward_rate_per_s": queue.forward_rate_per_s, "counters": counters});
                    (GateAnswer::Status(status), false)
                }
                GateOp::DeadLetter { .. } => return Err(ApiError::Internal("dead letters are kept above".into())),
            }
        };
        if changed {
            self.save().await?;
        }
        match answer {
            GateAnswer::Status(mut status) => {
                let dead = self.store.dead_letters().await.map_err(internal)?;
                let oldest: Vec<Value> = dead
                    .iter()
                    .take(STATUS_DEAD_LETTERS)
                    .filter_map(|d| serde_json::from_str::<Value>(d).ok())
                    .map(|m| json!({"idempotency_key": m["idempotency_key"], "attempt": m["attempt"]}))
                    .collect();
                status["dead_letter_count"] = json!(dead.len());
                status["dead_letters"] = json!(oldest);
                Ok(GateAnswer::Status(status))
            }
            answer => Ok(answer),
        }
    }

    /// Keep a dead-lettered message (whatever the topic's configuration is now).
    async fn keep(&self, message: String) -> Result<GateAnswer, ApiError> {
        let mut dead = self.store.dead_letters().await.map_err(internal)?;
        if dead.len() >= MAX_DEAD_LETTERS {
            return Err(ApiError::DeadLettersFull { limit: MAX_DEAD_LETTERS });
        }
        dead.push(message);
        self.store.save_dead_letters(&dead).await.map_err(internal)?;
        Ok(GateAnswer::Kept(dead.len()))
    }

    /// The stored gate (or a fresh one), brought to the topic's current bound.
    async fn load(&self, limit: u32, rate: Option<f64>, lease_ms: u64) -> Result<(), ApiError> {
        if self.state.borrow().is_none() {
            let stored = self.store.load().await.map_err(internal)?;
            let loaded = stored
                .unwrap_or_else(|| GateState { gate: Gate::new(limit, rate, lease_ms), counters: BTreeMap::new() });
            *self.state.borrow_mut() = Some(loaded);
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
            return Err(ApiError::Unavailable { why: e.0, retry_after_secs: crate::key::UNAVAILABLE_RETRY_SECS });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_answers_cross_as_json_and_back() {
        let message = r#"{"topic":"q","idempotency_key":"q/k/x.1","attempt":3,"body":{"n":"é\u0000"}}"#.to_string();
        let ops = [
            GateOp::Acquire,
            GateOp::Release { lease: 7 },
            GateOp::Count { counter: Counter::Requeued },
            GateOp::DeadLetter { message: message.clone() },
            GateOp::Status,
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
                GateOp::Acquire,
                GateAnswer::Grant(Grant::Go { lease: 4, expires_at: 99 }),
                json!({"go": 4, "expires_at": 99}),
            ),
            (GateOp::Acquire, GateAnswer::Grant(Grant::Wait { retry_at: 50 }), json!({"wait_until": 50})),
            (GateOp::Release { lease: 4 }, GateAnswer::Released(false), json!({"released": false})),
            (GateOp::Count { counter: Counter::Acked }, GateAnswer::Counted, json!({"ok": true})),
            (GateOp::DeadLetter { message: String::new() }, GateAnswer::Kept(12), json!({"kept": 12})),
            (GateOp::Status, GateAnswer::Status(json!({"in_flight": 1})), json!({"in_flight": 1})),
        ];
        for (op, answer, body) in answers {
            assert_eq!(answer.to_json(), body);
            assert_eq!(GateAnswer::from_json(&op, &body), Some(answer));
        }
        assert_eq!(GateAnswer::from_json(&GateOp::Acquire, &json!({"error": {"code": "x"}})), None);
        assert!(serde_json::from_str::<GateCall>(r#"{"topic":"q","op":{"op":"explode"}}"#).is_err());
    }
}
