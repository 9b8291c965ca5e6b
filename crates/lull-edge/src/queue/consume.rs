//! What the queue consumer does with each message (`delivery = "queue"`):
//! pure decisions ([`admit`], [`after_grant`], [`after_forward`],
//! [`after_requeue`], [`after_keep`], [`wait_delay`]) and
//! [`Consumer::handle`], which carries them out over the queue side's ports.
//!
//! A message is forwarded to its topic's target, signed as a webhook is, once
//! the topic's gate object grants a lease — so at most `forward_concurrency`
//! forwards are in flight for the topic, across batches and isolates, and
//! starts keep to `forward_rate_per_s`. The gate holds the request open while
//! it waits for room (at most [`GATE_WAIT_BUDGET_MS`]). A 2xx acks the
//! message; anything else retries it with the queue's `retry_delay`, until
//! its failed forwards — counted across the copies sent back to wait
//! ([`QueueMessage::failed_before`]) — reach the topic's
//! `forward_max_attempts`: then the consumer sends it to the dead-letter queue
//! itself and acks it (the queue's own move past `max_retries` stays a
//! backstop). Dead-letter queue messages the consumer keeps (as rows in the
//! topic's gate object) before it acks them. The forward carries the attempt
//! as the queue counts it ([`QueueMessage::forward_attempt`]): it grows on
//! every redelivery.
//!
//! Guarantees:
//! - **Nothing is acked unsettled**: a message is acked only after its
//!   forward got a 2xx, its copy was sent to a queue again, or the gate
//!   object kept it as a dead letter; every other path retries it.
//! - **Waiting is not failing**: a message the gate has no room for within
//!   the budget, or that the gate cannot answer for, is sent to its queue
//!   again with a delay (counted `requeued`) and acked: no queue retry is
//!   spent. Only when that send fails is it retried.
//! - **A dead letter is never given up**: one the gate cannot keep (the
//!   topic's bound is reached, or the gate errs) waits on the dead-letter
//!   queue (sent to it again, with delays doubling from 1 s to
//!   [`DEAD_LETTER_WAIT_CAP_SECS`]) until it can be kept.
//! - **A wait does not inflate the count**: the copy carries the attempt it
//!   had reached ([`QueueMessage::waiting`]).
//! - **A message that keeps failing ends as a dead letter**: at
//!   `forward_max_attempts` failed forwards, however its deliveries
//!   interleaved with waits, and after [`MAX_WAITS`] waits (a gate that never
//!   answers, or never has room), it goes to the dead-letter queue with why
//!   (its `outcome`); only if that send fails is it retried.

use serde_json::json;

use crate::delivery::queue_message::QueueMessage;
use crate::log::Fact;
use crate::names::idempotency_label;
use crate::ports::{Clock, Outbound, Outcome, Outgoing, QueueSend};
use crate::queue::gate::{Counter, Forwarded, GateAnswer, GateOp, Gates, Grant};
use crate::topic::{DEFAULT_FORWARD_MAX_ATTEMPTS, Topic, Topics};

/// Why a message waits when the gate answered, but with no room.
const NO_ROOM: &str = "no room within the budget";

/// How long the gate may hold a message's `Acquire` open waiting for room
/// before it is sent to the queue again (with a delay) instead.
pub const GATE_WAIT_BUDGET_MS: u64 = 2_000;
/// Tries of a lease's release (a lost release holds room until the lease expires).
pub(crate) const RELEASE_TRIES: u32 = 3;
/// The longest delay a queue takes for a message (Cloudflare Queues: 12 h).
pub const MAX_DELAY_SECS: u32 = 43_200;
/// A message's first wait on its queue (s); each next one doubles.
pub(crate) const WAIT_BASE_SECS: u32 = 1;
/// The longest a message waits on the delivery queue for room at once (s).
pub(crate) const WAIT_CAP_SECS: u32 = 60;
/// Waits on the delivery queue a message makes at most (for room, or for a
/// gate that errs); the next is a dead letter instead. About a day at the
/// `WAIT_CAP_SECS` cap.
pub const MAX_WAITS: u32 = 1_440;
/// The longest a dead letter waits on the dead-letter queue at once (s) for room to be kept.
pub(crate) const DEAD_LETTER_WAIT_CAP_SECS: u32 = 300;

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
pub(crate) enum Admit<'t> {
    /// Forward it to `topic`'s target.
    Forward(QueueMessage, &'t Topic),
    /// A dead letter of its topic: keep it.
    Keep(QueueMessage),
    /// Not something to forward: retry it (never dropped: past its retries it
    /// waits in the dead-letter queue for a person), with why.
    Refuse(Option<QueueMessage>, String),
}

/// Read a message's `text`; `dead_letter` if it came from the dead-letter queue.
pub(crate) fn admit<'t>(text: &str, dead_letter: bool, topics: &'t Topics) -> Admit<'t> {
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

/// The delay of a message's next wait on its queue: it has waited `waits`
/// times before; at least `hint_secs` (when room is expected), doubling from
/// [`WAIT_BASE_SECS`], at most `cap` (and [`MAX_DELAY_SECS`]).
pub(crate) fn wait_delay(waits: u32, hint_secs: u32, cap: u32) -> u32 {
    let doubled = WAIT_BASE_SECS.saturating_mul(1u32.checked_shl(waits.min(31)).unwrap_or(u32::MAX));
    doubled.min(cap).max(hint_secs).clamp(1, MAX_DELAY_SECS)
}

/// The gate's answer to a message's `Acquire`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AfterGrant {
    /// Forward now under this lease.
    Go(u64),
    /// No room within the budget, or no answer: send it to the queue again after this delay.
    Requeue {
        /// The delay (s).
        delay_secs: u32,
    },
    /// No room or no answer, and it waited [`MAX_WAITS`] times: a dead letter.
    DeadLetter,
}

/// What a gate's answer to `Acquire` at `now` means for a message that waited `waits` times before.
pub(crate) fn after_grant(answer: Result<Grant, String>, now: u64, waits: u32) -> AfterGrant {
    match answer {
        Ok(Grant::Go { lease, .. }) => AfterGrant::Go(lease),
        _ if waits >= MAX_WAITS => AfterGrant::DeadLetter,
        Ok(Grant::Wait { retry_at }) => {
            let hint = u32::try_from(retry_at.saturating_sub(now).div_ceil(1000)).unwrap_or(MAX_DELAY_SECS);
            AfterGrant::Requeue { delay_secs: wait_delay(waits, hint, WAIT_CAP_SECS) }
        }
        Err(_) => AfterGrant::Requeue { delay_secs: wait_delay(waits, 0, WAIT_CAP_SECS) },
    }
}

/// What a forward's outcome means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterForward {
    /// A 2xx: ack.
    Ack,
    /// Failed: retry (the queue counts the delivery).
    Retry,
    /// Failed, and its failed forwards reached `forward_max_attempts`: a dead letter.
    DeadLetter {
        /// Its failed forwards, this one included.
        failed: u32,
    },
}

/// A forward's outcome for a message whose forwards failed `failed_before`
/// times before (across its copies), under `max_attempts` (`forward_max_attempts`).
pub(crate) fn after_forward(outcome: &Outcome, failed_before: u32, max_attempts: u32) -> AfterForward {
    if outcome.ok {
        return AfterForward::Ack;
    }
    let failed = failed_before.saturating_add(1);
    if failed >= max_attempts { AfterForward::DeadLetter { failed } } else { AfterForward::Retry }
}

/// A message sent to the dead-letter queue by the consumer: sent, it is done
/// (and counted); not sent, it is retried (the queue's own `max_retries` then
/// moves it there).
pub(crate) fn after_dead_letter_send(sent: &Result<(), String>) -> (Settle, Option<Counter>) {
    match sent {
        Ok(()) => (Settle::Ack, Some(Counter::DeadLettered)),
        Err(_) => (Settle::Retry { delay_secs: None }, None),
    }
}

/// A copy sent to wait `delay_secs`: sent, the message is done (and counted);
/// not sent, it is retried with the same delay (the fallback: it spends a retry).
pub(crate) fn after_requeue(sent: &Result<(), String>, delay_secs: u32) -> (Settle, Option<Counter>) {
    match sent {
        Ok(()) => (Settle::Ack, Some(Counter::Requeued)),
        Err(_) => (Settle::Retry { delay_secs: Some(delay_secs) }, None),
    }
}

/// A dead letter kept is done (`None`); one not kept waits on the dead-letter
/// queue for this long (it has waited `waits` times before).
pub(crate) fn after_keep(kept: &Result<(), String>, waits: u32) -> Option<u32> {
    match kept {
        Ok(()) => None,
        Err(_) => Some(wait_delay(waits, 0, DEAD_LETTER_WAIT_CAP_SECS)),
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
    /// Time and log lines.
    pub clock: C,
    /// The topics as configured now.
    pub topics: &'a Topics,
    /// The producer binding of the dead-letter queue (a dead letter waits there for room).
    pub dead_letters: &'a str,
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

    /// Send `copy` to `binding` after `delay_secs`: acked if sent (and counted
    /// `requeued`), else retried with that delay.
    async fn requeue(&self, binding: &str, copy: &QueueMessage, delay_secs: u32, why: &str) -> Settle {
        let sent = self.queue.send(binding, &[copy.to_text()], delay_secs).await;
        let shown = self.label(&copy.topic, &copy.idempotency_key);
        self.log(
            "queue_requeue",
            json!({"topic": copy.topic, "idempotency_key": shown, "queue": binding, "delay_s": delay_secs,
                   "why": why, "sent": sent.is_ok(), "error": sent.as_ref().err()}),
        );
        let (settle, counter) = after_requeue(&sent, delay_secs);
        self.count(&copy.topic, counter).await;
        settle
    }

    /// Send `copy` to the dead-letter queue (no delay): acked if sent (and
    /// counted `dead_lettered`), else retried.
    async fn to_dead_letters(&self, copy: &QueueMessage) -> Settle {
        let sent = self.queue.send(self.dead_letters, &[copy.to_text()], 0).await;
        self.log(
            "queue_to_dead_letters",
            json!({"topic": copy.topic, "idempotency_key": self.label(&copy.topic, &copy.idempotency_key),
                   "attempt": copy.attempt, "failed": copy.failed, "why": copy.outcome,
                   "sent": sent.is_ok(), "error": sent.as_ref().err()}),
        );
        let (settle, counter) = after_dead_letter_send(&sent);
        self.count(&copy.topic, counter).await;
        settle
    }

    /// Handle one message (`id` for logs, `text` its body, `attempts` the
    /// queue's count of its deliveries, from 1), from the dead-letter queue if `dead_letter`.
    pub async fn handle(&self, id: &str, text: &str, attempts: u32, dead_letter: bool) -> Settle {
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
        let (binding, max_attempts) = topic
            .queue
            .as_ref()
            .map_or(("", DEFAULT_FORWARD_MAX_ATTEMPTS), |q| (q.binding.as_str(), q.forward_max_attempts));
        // A lease from the topic's gate, which holds the call while it waits for room.
        let answer = match self.gates.ask(name, GateOp::Acquire { wait_ms: GATE_WAIT_BUDGET_MS }).await {
            Ok(GateAnswer::Grant(grant)) => Ok(grant),
            Ok(_) => Err("the gate gave another answer".to_string()),
            Err(e) => Err(e),
        };
        let lease = match after_grant(answer.clone(), self.clock.now(), message.waits) {
            AfterGrant::Go(lease) => lease,
            AfterGrant::Requeue { delay_secs } => {
                // No room soon, or no answer: on the queue again; this delivery made no forward.
                let why = answer.err().unwrap_or_else(|| NO_ROOM.into());
                return self.requeue(binding, &message.waiting(attempts), delay_secs, &why).await;
            }
            AfterGrant::DeadLetter => {
                let why = answer.err().unwrap_or_else(|| NO_ROOM.into());
                let outcome = format!("waited {MAX_WAITS} times for the topic's gate (last: {why})");
                let made = message.forward_attempt(attempts).saturating_sub(1);
                return self
                    .to_dead_letters(&message.dead_letter(made, message.failed_before(attempts), outcome))
                    .await;
            }
        };
        let attempt = message.forward_attempt(attempts);
        let out = Outgoing {
            topic: name.to_string(),
            target: topic.target.clone(),
            body: message.body.get().to_string(),
            idempotency_key: key.to_string(),
            attempt,
            timeout_ms: topic.delivery_timeout_ms,
            queue: None,
        };
        let outcome = self.outbound.send(out).await;
        let forwarded =
            Forwarded { idempotency_key: key.to_string(), attempt, ok: outcome.ok, detail: outcome.detail.clone() };
        for _ in 0..RELEASE_TRIES {
            let release = GateOp::Release { lease, outcome: Some(forwarded.clone()) };
            if self.gates.ask(name, release).await.is_ok() {
                break;
            }
        }
        let event = if outcome.ok { "queue_ack" } else { "queue_retry" };
        self.log(
            event,
            json!({"topic": name, "idempotency_key": self.label(name, key), "attempt": attempt,
                   "outcome": outcome.detail}),
        );
        match after_forward(&outcome, message.failed_before(attempts), max_attempts) {
            AfterForward::Ack => Settle::Ack,
            AfterForward::Retry => Settle::Retry { delay_secs: None },
            AfterForward::DeadLetter { failed } => {
                self.to_dead_letters(&message.dead_letter(attempt, failed, outcome.detail)).await
            }
        }
    }

    /// Keep a dead letter in its topic's gate object (whatever the topic is
    /// configured as now); one it cannot keep waits on the dead-letter queue.
    async fn keep(&self, message: QueueMessage, text: &str) -> Settle {
        let op = GateOp::DeadLetter { message: text.to_string() };
        let kept = self.gates.ask(&message.topic, op).await.map(drop);
        self.log(
            "queue_dead_letter",
            json!({"topic": message.topic, "idempotency_key": self.label(&message.topic, &message.idempotency_key),
                   "kept": kept.is_ok(),
                   "why": kept.as_ref().err()}),
        );
        match after_keep(&kept, message.waits) {
            None => Settle::Ack,
            Some(delay_secs) => {
                let copy = QueueMessage { waits: message.waits.saturating_add(1), ..message };
                let why = kept.err().unwrap_or_default();
                self.requeue(self.dead_letters, &copy, delay_secs, &why).await
            }
        }
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
    fn the_gate_decides_go_or_a_requeue_never_a_retry() {
        let go = Grant::Go { lease: 7, expires_at: 99 };
        assert_eq!(after_grant(Ok(go), 1_000, 0), AfterGrant::Go(7));
        let soon = Grant::Wait { retry_at: 2_500 };
        assert_eq!(
            after_grant(Ok(soon), 1_000, 0),
            AfterGrant::Requeue { delay_secs: 2 },
            "the gate's hint, rounded up"
        );
        assert_eq!(
            after_grant(Ok(soon), 1_000, 3),
            AfterGrant::Requeue { delay_secs: 8 },
            "or the backoff: 1, 2, 4, 8 s"
        );
        let far = Grant::Wait { retry_at: u64::MAX };
        assert_eq!(after_grant(Ok(far), 0, 0), AfterGrant::Requeue { delay_secs: MAX_DELAY_SECS });
        assert_eq!(
            after_grant(Err("gate acquire: 503".into()), 0, 0),
            AfterGrant::Requeue { delay_secs: 1 },
            "an error waits too"
        );
        assert_eq!(
            after_grant(Err("gate acquire: 503".into()), 0, 40),
            AfterGrant::Requeue { delay_secs: WAIT_CAP_SECS }
        );
        let wait = Grant::Wait { retry_at: 0 };
        assert!(matches!(after_grant(Ok(wait), 0, MAX_WAITS - 1), AfterGrant::Requeue { .. }));
        assert_eq!(after_grant(Ok(wait), 0, MAX_WAITS), AfterGrant::DeadLetter, "waited its bound");
        assert_eq!(after_grant(Err("gate: 503".into()), 0, MAX_WAITS), AfterGrant::DeadLetter);
        assert_eq!(after_grant(Ok(go), 0, u32::MAX), AfterGrant::Go(7), "a lease is taken whenever it comes");
        assert_eq!(wait_delay(0, 0, 300), 1);
        assert_eq!(wait_delay(8, 0, 300), 256);
        assert_eq!(wait_delay(9, 0, 300), 300, "capped");
        assert_eq!(wait_delay(u32::MAX, 0, 300), 300);
    }

    #[test]
    fn outcomes_settle_the_message() {
        let ok = Outcome { ok: true, detail: "200".into() };
        let refused = Outcome { ok: false, detail: "503".into() };
        assert_eq!(after_forward(&ok, 3, 4), AfterForward::Ack);
        assert_eq!(after_forward(&refused, 0, 4), AfterForward::Retry);
        assert_eq!(after_forward(&refused, 2, 4), AfterForward::Retry);
        assert_eq!(after_forward(&refused, 3, 4), AfterForward::DeadLetter { failed: 4 }, "the fourth failure");
        assert_eq!(after_forward(&refused, 9, 4), AfterForward::DeadLetter { failed: 10 });
        assert_eq!(after_forward(&refused, 0, 1), AfterForward::DeadLetter { failed: 1 });
        assert_eq!(after_dead_letter_send(&Ok(())), (Settle::Ack, Some(Counter::DeadLettered)));
        assert_eq!(after_dead_letter_send(&Err("queue".into())), (Settle::Retry { delay_secs: None }, None));
        assert_eq!(after_requeue(&Ok(()), 5), (Settle::Ack, Some(Counter::Requeued)));
        assert_eq!(after_requeue(&Err("queue".into()), 5), (Settle::Retry { delay_secs: Some(5) }, None));
        assert_eq!(after_keep(&Ok(()), 0), None);
        assert_eq!(after_keep(&Err("429".into()), 0), Some(1), "it waits on the dead-letter queue");
        assert_eq!(after_keep(&Err("429".into()), 20), Some(DEAD_LETTER_WAIT_CAP_SECS));
    }
}
