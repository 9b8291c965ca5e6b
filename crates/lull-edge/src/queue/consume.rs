//! What the queue consumer does with each message (`delivery = "queue"`):
//! pure decisions ([`admit`], [`after_grant`], [`after_forward`],
//! [`after_requeue`], [`after_keep`]) and [`Consumer::handle`], which carries
//! them out over the queue side's ports.
//!
//! A message is forwarded to its topic's target, signed as a webhook is, once
//! the topic's gate object grants a lease — so at most `forward_concurrency`
//! forwards are in flight for the topic, across batches and isolates, and
//! starts keep to `forward_rate_per_s`. A 2xx acks the message; anything else
//! retries it with the queue's `retry_delay`, and past `max_retries` the queue
//! moves it to its dead-letter queue, whose messages the consumer keeps (in
//! the topic's gate object) before it acks them. A message the gate cannot
//! admit soon is sent to the queue again with the delay the gate gives, then
//! acked: waiting for room never uses up a message's retries.
//!
//! Guarantees:
//! - **Nothing is acked unsettled**: a message is acked only after its
//!   forward got a 2xx, its copy was sent to the queue again, or the gate
//!   object kept it as a dead letter; every other path retries it.
//! - **Waiting is bounded**: a message waits for the gate at most
//!   [`GATE_WAIT_BUDGET_MS`] in its batch.

use serde_json::json;

use crate::delivery::queue_message::QueueMessage;
use crate::log::Fact;
use crate::names::idempotency_label;
use crate::ports::{Clock, GateAnswer, GateOp, Gates, Outbound, Outcome, Outgoing, QueueSend};
use crate::queue::gate::Grant;
use crate::queue::gate_object::Counter;
use crate::topic::{Topic, Topics};

/// How long a message may wait for the gate inside one batch before it is
/// sent to the queue again (with the gate's delay) instead.
pub const GATE_WAIT_BUDGET_MS: u64 = 2_000;
/// Tries of a lease's release (a lost release holds room until the lease expires).
pub const RELEASE_TRIES: u32 = 3;
/// The longest delay a queue takes for a message (Cloudflare Queues: 12 h).
pub const MAX_DELAY_SECS: u32 = 43_200;
/// The delay of a retry when the gate gave no answer.
pub const GATE_ERROR_RETRY_SECS: u32 = 1;

/// What to do with a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Done: ack it.
    Ack,
    /// Retry it through the queue (a retry counts toward `max_retries`), after `delay_secs` if set
    /// (else the queue's `retry_delay`).
    Retry {
        /// The delay, if not the queue's.
        delay_secs: Option<u32>,
    },
    /// Send it to its queue again after `delay_secs`, then ack it (waiting uses up no retry).
    Requeue {
        /// The delay.
        delay_secs: u32,
    },
    /// A dead letter: keep it in its topic's gate object, then ack it.
    KeepDeadLetter,
}

/// How a message ends its batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settle {
    /// Acked.
    Ack,
    /// Retried, after `delay_secs` if set (else the queue's `retry_delay`).
    Retry {
        /// The delay, if not the queue's.
        delay_secs: Option<u32>,
    },
}

/// A message as first read.
#[derive(Debug)]
pub enum Admit<'t> {
    /// Forward it to `topic`'s target.
    Forward(QueueMessage, &'t Topic),
    /// A dead letter of its topic: keep it.
    Keep(QueueMessage),
    /// Not something to forward: retry it (never dropped: past its retries it
    /// waits in the dead-letter queue for a person), with why.
    Refuse(Option<QueueMessage>, String),
}

/// Read a message's `text`; `dead_letter` if it came from the dead-letter queue.
pub fn admit<'t>(text: &str, dead_letter: bool, topics: &'t Topics) -> Admit<'t> {
    let message: QueueMessage = match serde_json::from_str(text) {
        Ok(message) => message,
        Err(e) => return Admit::Refuse(None, format!("not a lull message: {e}")),
    };
    if dead_letter {
        return Admit::Keep(message);
    }
    match topics.get(&message.topic).filter(|t| t.queue.is_some()) {
        Some(topic) => Admit::Forward(message, topic),
        None => Admit::Refuse(Some(message), "not a queue topic here".into()),
    }
}

/// The gate's answer to a message waiting since `started`, at `now`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AfterGrant {
    /// Forward now under this lease.
    Go(u64),
    /// Ask again at this time (unix ms), within the budget.
    WaitUntil(u64),
    /// No room soon, or no answer: what to do, and the counter it adds.
    Decided(Verdict, Option<Counter>),
}

/// What a gate's answer to `acquire` means for a message waiting since `started`, at `now`.
pub fn after_grant(answer: Result<Grant, String>, started: u64, now: u64) -> AfterGrant {
    match answer {
        Ok(Grant::Go { lease, .. }) => AfterGrant::Go(lease),
        Ok(Grant::Wait { retry_at }) if retry_at < started.saturating_add(GATE_WAIT_BUDGET_MS) => {
            AfterGrant::WaitUntil(retry_at)
        }
        Ok(Grant::Wait { retry_at }) => {
            let wait_s = retry_at.saturating_sub(now).div_ceil(1000);
            let delay_secs = u32::try_from(wait_s).unwrap_or(u32::MAX).clamp(1, MAX_DELAY_SECS);
            AfterGrant::Decided(Verdict::Requeue { delay_secs }, None)
        }
        Err(_) => {
            AfterGrant::Decided(Verdict::Retry { delay_secs: Some(GATE_ERROR_RETRY_SECS) }, Some(Counter::Retried))
        }
    }
}

/// A forward's outcome: a 2xx acks, anything else retries.
pub fn after_forward(outcome: &Outcome) -> (Settle, Counter) {
    if outcome.ok { (Settle::Ack, Counter::Acked) } else { (Settle::Retry { delay_secs: None }, Counter::Retried) }
}

/// A requeue with `delay_secs`: sent, the message is done (and counted); not
/// sent, it is retried with the same delay.
pub fn after_requeue(sent: &Result<(), String>, delay_secs: u32) -> (Settle, Option<Counter>) {
    match sent {
        Ok(()) => (Settle::Ack, Some(Counter::Requeued)),
        Err(_) => (Settle::Retry { delay_secs: Some(delay_secs) }, None),
    }
}

/// A dead letter kept is done; one not kept stays on the dead-letter queue.
pub fn after_keep(kept: &Result<(), String>) -> Settle {
    match kept {
        Ok(()) => Settle::Ack,
        Err(_) => Settle::Retry { delay_secs: None },
    }
}

/// The consumer's work over the queue side's ports.
pub struct Consumer<'a, G, Q, O, C> {
    /// The topics' gate objects.
    pub gates: G,
    /// The queues (to send a message again).
    pub queue: Q,
    /// The signed forward to a target.
    pub outbound: O,
    /// Time, pauses and log lines.
    pub clock: C,
    /// The topics as configured now.
    pub topics: &'a Topics,
}

impl<G: Gates, Q: QueueSend, O: Outbound, C: Clock> Consumer<'_, G, Q, O, C> {
    fn log(&self, event: &'static str, fields: serde_json::Value) {
        self.clock.log(&Fact::new(event, fields).line(&[]));
    }

    /// An idempotency key as this topic's log lines show it (its key hashed unless `log_keys`).
    fn label(&self, topic: &str, idempotency_key: &str) -> String {
        idempotency_label(idempotency_key, self.topics.get(topic).is_some_and(|t| t.log_keys))
    }

    /// Count an outcome in the topic's gate object (best effort: a lost count loses no message).
    async fn count(&self, topic: &str, counter: Option<Counter>) {
        if let Some(counter) = counter {
            let _ = self.gates.ask(topic, GateOp::Count { counter }).await;
        }
    }

    /// Handle one message (`id` for logs, `text` its body), from the
    /// dead-letter queue if `dead_letter`.
    pub async fn handle(&self, id: &str, text: &str, dead_letter: bool) -> Settle {
        let (message, topic) = match admit(text, dead_letter, self.topics) {
            Admit::Forward(message, topic) => (message, topic),
            Admit::Keep(message) => return self.keep(message, text).await,
            Admit::Refuse(None, why) => {
                self.log("queue_retry", json!({"id": id, "why": why}));
                return Settle::Retry { delay_secs: None };
            }
            Admit::Refuse(Some(message), why) => {
                self.log(
                    "queue_retry",
                    json!({"topic": message.topic,
                           "idempotency_key": self.label(&message.topic, &message.idempotency_key), "why": why}),
                );
                return Settle::Retry { delay_secs: None };
            }
        };
        let (name, key) = (message.topic.as_str(), message.idempotency_key.as_str());
        let shown = self.label(name, key);
        // A lease from the topic's gate, waiting here while that is short.
        let started = self.clock.now();
        let lease = loop {
            let answer = match self.gates.ask(name, GateOp::Acquire).await {
                Ok(GateAnswer::Grant(grant)) => Ok(grant),
                Ok(_) => Err("the gate gave no answer".to_string()),
                Err(e) => Err(e),
            };
            let why = answer.as_ref().err().cloned();
            match after_grant(answer, started, self.clock.now()) {
                AfterGrant::Go(lease) => break lease,
                AfterGrant::WaitUntil(until) => self.clock.sleep(until.saturating_sub(self.clock.now()).max(1)).await,
                AfterGrant::Decided(Verdict::Requeue { delay_secs }, _) => {
                    // No room soon: on the queue again after the gate's delay; this one is done.
                    let binding = topic.queue.as_ref().map(|q| q.binding.as_str()).unwrap_or_default();
                    let sent = self.queue.send(binding, &[text.to_string()], delay_secs).await;
                    if let Err(e) = &sent {
                        self.log("queue_retry", json!({"topic": name, "idempotency_key": shown, "why": e}));
                    }
                    let (settle, counter) = after_requeue(&sent, delay_secs);
                    self.count(name, counter).await;
                    return settle;
                }
                AfterGrant::Decided(verdict, counter) => {
                    self.log("queue_retry", json!({"topic": name, "idempotency_key": shown, "why": why}));
                    self.count(name, counter).await;
                    return match verdict {
                        Verdict::Retry { delay_secs } => Settle::Retry { delay_secs },
                        _ => Settle::Retry { delay_secs: None },
                    };
                }
            }
        };
        let out = Outgoing {
            topic: name.to_string(),
            target: topic.target.clone(),
            body: message.body.get().to_string(),
            idempotency_key: key.to_string(),
            attempt: message.attempt,
            timeout_ms: topic.delivery_timeout_ms,
            queue: None,
        };
        let outcome = self.outbound.send(out).await;
        for _ in 0..RELEASE_TRIES {
            if self.gates.ask(name, GateOp::Release { lease }).await.is_ok() {
                break;
            }
        }
        let (settle, counter) = after_forward(&outcome);
        let event = if outcome.ok { "queue_ack" } else { "queue_retry" };
        self.log(event, json!({"topic": name, "idempotency_key": shown, "outcome": outcome.detail}));
        self.count(name, Some(counter)).await;
        settle
    }

    /// Keep a dead letter in its topic's gate object (whatever the topic is configured as now).
    async fn keep(&self, message: QueueMessage, text: &str) -> Settle {
        let op = GateOp::DeadLetter { message: text.to_string() };
        let kept = self.gates.ask(&message.topic, op).await.map(drop);
        self.log(
            "queue_dead_letter",
            json!({"topic": message.topic, "idempotency_key": self.label(&message.topic, &message.idempotency_key),
                   "kept": kept.is_ok(),
                   "why": kept.as_ref().err()}),
        );
        after_keep(&kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPICS: &str = r#"{"q": {"target": "https://a/x", "wait_ms": 1, "delivery": "queue"},
                             "hook": {"target": "https://a/y", "wait_ms": 1}}"#;

    fn message(topic: &str) -> String {
        format!(r#"{{"topic":"{topic}","idempotency_key":"{topic}/k/x.1","attempt":1,"body":{{"n":1}}}}"#)
    }

    #[test]
    fn a_message_is_forwarded_kept_or_refused() {
        let topics = Topics::parse(TOPICS).unwrap();
        assert!(matches!(admit(&message("q"), false, &topics), Admit::Forward(_, t) if t.name == "q"));
        assert!(matches!(admit(&message("q"), true, &topics), Admit::Keep(m) if m.topic == "q"));
        assert!(matches!(admit(&message("gone"), true, &topics), Admit::Keep(_)), "kept whatever the topic is now");
        let Admit::Refuse(Some(_), why) = admit(&message("hook"), false, &topics) else { panic!() };
        assert_eq!(why, "not a queue topic here");
        assert!(matches!(admit(&message("gone"), false, &topics), Admit::Refuse(Some(_), _)));
        let Admit::Refuse(None, why) = admit("{not json", false, &topics) else { panic!() };
        assert!(why.starts_with("not a lull message"));
    }

    #[test]
    fn the_gate_decides_go_wait_requeue_or_retry() {
        let go = Grant::Go { lease: 7, expires_at: 99 };
        assert_eq!(after_grant(Ok(go), 1_000, 1_000), AfterGrant::Go(7));
        let soon = Grant::Wait { retry_at: 2_999 };
        assert_eq!(after_grant(Ok(soon), 1_000, 1_500), AfterGrant::WaitUntil(2_999), "within the budget");
        let late = Grant::Wait { retry_at: 3_000 };
        assert_eq!(
            after_grant(Ok(late), 1_000, 1_500),
            AfterGrant::Decided(Verdict::Requeue { delay_secs: 2 }, None),
            "past the budget: requeued after the gate's delay, rounded up"
        );
        let now = Grant::Wait { retry_at: 3_000 };
        assert_eq!(
            after_grant(Ok(now), 0, 3_000),
            AfterGrant::Decided(Verdict::Requeue { delay_secs: 1 }, None),
            "at least 1 s"
        );
        let far = Grant::Wait { retry_at: u64::MAX };
        assert_eq!(
            after_grant(Ok(far), 0, 0),
            AfterGrant::Decided(Verdict::Requeue { delay_secs: MAX_DELAY_SECS }, None)
        );
        assert_eq!(
            after_grant(Err("gate acquire: 503".into()), 0, 0),
            AfterGrant::Decided(Verdict::Retry { delay_secs: Some(1) }, Some(Counter::Retried))
        );
    }

    #[test]
    fn outcomes_settle_the_message() {
        let ok = Outcome { ok: true, detail: "200".into() };
        let refused = Outcome { ok: false, detail: "503".into() };
        assert_eq!(after_forward(&ok), (Settle::Ack, Counter::Acked));
        assert_eq!(after_forward(&refused), (Settle::Retry { delay_secs: None }, Counter::Retried));
        assert_eq!(after_requeue(&Ok(()), 5), (Settle::Ack, Some(Counter::Requeued)));
        assert_eq!(after_requeue(&Err("queue".into()), 5), (Settle::Retry { delay_secs: Some(5) }, None));
        assert_eq!(after_keep(&Ok(())), Settle::Ack);
        assert_eq!(after_keep(&Err("507".into())), Settle::Retry { delay_secs: None });
    }
}
