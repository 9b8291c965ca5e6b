//! What the queue consumer does with each message (`delivery = "queue"`):
//! pure decisions ([`admit`], [`after_grant`], [`after_forward`],
//! [`after_requeue`], [`after_keep`], [`wait_delay`], and before any of
//! them [`on_config_error`] and [`on_unreadable_batch`]) and
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
//! - **A dead letter is never forwarded again**: the consumer's copy says why
//!   it was dead-lettered (`outcome`) and is kept from whatever queue it
//!   arrives on. What the queue itself moves past `max_retries` carries the
//!   original body: only the queue's name (`LULL_DEAD_LETTER_QUEUE`) tells it
//!   apart; misnamed, it is forwarded again until its failed forwards reach
//!   `forward_max_attempts`, then the consumer's copy is kept — bounded.
//! - **A configuration that does not load loses nothing**: every message is
//!   retried, 5 s later doubling to 2 h ([`on_config_error`]), so it stays on
//!   its queue for 7.5 days ([`QUEUE_MAX_RETRIES`] retries) — then on the
//!   dead-letter queue as long again; a batch that cannot be read is retried
//!   whole ([`on_unreadable_batch`]), never acked.

use serde_json::json;

use crate::delivery::queue_message::QueueMessage;
use crate::log::Fact;
use crate::metrics::{Point, What, outcome_class};
use crate::names::idempotency_label;
use crate::ports::{Clock, Outbound, Outcome, Outgoing, QueueSend};
use crate::queue::gate::{Counter, Forwarded, GateAnswer, GateOp, Gates, Grant};
use crate::target::TargetState;
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
/// How long (s) a message waits on the delivery queue at most, its waits'
/// delays summed (for room, a gate that errs, or a held target): then it is a
/// dead letter instead (a day).
pub const MAX_WAIT_SECS: u64 = 86_400;
/// Waits on the delivery queue a message makes at most, however short (a
/// backstop to [`MAX_WAIT_SECS`]: each wait is at least 1 s).
pub const MAX_WAITS: u32 = 100_000;
/// The longest a dead letter waits on the dead-letter queue at once (s) for room to be kept.
pub(crate) const DEAD_LETTER_WAIT_CAP_SECS: u32 = 300;

/// The first delay (s) of a message retried because the worker's
/// configuration does not load; each next one doubles.
pub const CONFIG_RETRY_BASE_SECS: u32 = 5;
/// The longest delay (s) of a message retried because the configuration
/// does not load (2 h): a fixed configuration reaches every message within it.
pub const CONFIG_RETRY_CAP_SECS: u32 = 7_200;
/// The `max_retries` each of the worker's queue consumers is declared with in
/// `wrangler.toml` (Cloudflare's largest): with the delays above, a message
/// stays on its queue for [`CONFIG_RETRY_SPAN_SECS`] while the configuration
/// does not load.
pub const QUEUE_MAX_RETRIES: u32 = 100;
/// How long (s) a message stays on its queue while the configuration does not
/// load: the delays of its [`QUEUE_MAX_RETRIES`] retries, 5 s doubling to 2 h
/// by the 12th, then 2 h each — 651,035 s, 7.5 days, over the 7 days a topic
/// keeps an idle key by default (`retention_ms`).
pub const CONFIG_RETRY_SPAN_SECS: u64 = 651_035;

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

/// The delay (s) of a message's retry while the configuration does not load,
/// at its queue's `attempts`th delivery (from 1): [`CONFIG_RETRY_BASE_SECS`]
/// doubling per delivery, at most [`CONFIG_RETRY_CAP_SECS`].
pub(crate) fn config_retry_delay(attempts: u32) -> u32 {
    let doublings = attempts.max(1) - 1;
    let factor = 1u32.checked_shl(doublings.min(31)).unwrap_or(u32::MAX);
    CONFIG_RETRY_BASE_SECS.saturating_mul(factor).min(CONFIG_RETRY_CAP_SECS)
}

/// How a message ends its batch when the worker's configuration does not
/// load (a topic naming an unset secret, bad JSON): never acked — it was
/// never forwarded and its key counted it delivered — but retried later each
/// time ([`config_retry_delay`]), so a fix deployed within
/// [`CONFIG_RETRY_SPAN_SECS`] reaches it before its queue gives it up.
pub(crate) fn on_config_error(attempts: u32) -> Settle {
    Settle::Retry { delay_secs: Some(config_retry_delay(attempts)) }
}

/// How a batch ends whose messages cannot be read (`batch.messages()`
/// failed): none can be settled one by one and none may be acked unread (a
/// batch the handler leaves unsettled is acked when it returns), so the batch
/// is retried as a whole, [`CONFIG_RETRY_CAP_SECS`] later (its deliveries are
/// unknown, and what fails once likely fails again): [`QUEUE_MAX_RETRIES`]
/// such retries span 200 h.
pub(crate) fn on_unreadable_batch() -> Settle {
    Settle::Retry { delay_secs: Some(CONFIG_RETRY_CAP_SECS) }
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

/// Read a message's `text`; `dead_letter` if it came from the dead-letter
/// queue (by its name). A copy the consumer sent to the dead-letter queue is
/// kept by what it carries (its `outcome`) from whatever queue it comes: a
/// renamed or unset `LULL_DEAD_LETTER_QUEUE` never forwards it again.
pub(crate) fn admit<'t>(text: &str, dead_letter: bool, topics: &'t Topics) -> Admit<'t> {
    let message: QueueMessage = match serde_json::from_str(text) {
        Ok(message) => message,
        Err(e) => return Admit::Refuse(None, format!("not a lull message: {e}")),
    };
    if dead_letter || message.is_dead_letter() {
        return Admit::Keep(message);
    }
    match topics.get(&message.topic).filter(|t| t.queue.is_some()) {
        Some(topic) => Admit::Forward(message, topic),
        None => Admit::Refuse(Some(message), "not a queue topic here".into()),
    }
}

/// The delay of a message's next wait on its queue when nothing says when
/// room comes: it has waited `waits` times before; doubling from
/// [`WAIT_BASE_SECS`], at most `cap` (and [`MAX_DELAY_SECS`]).
pub(crate) fn wait_delay(waits: u32, cap: u32) -> u32 {
    let doubled = WAIT_BASE_SECS.saturating_mul(1u32.checked_shl(waits.min(31)).unwrap_or(u32::MAX));
    doubled.min(cap).clamp(1, MAX_DELAY_SECS)
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

/// What a gate's answer to `Acquire` at `now` means for a message that
/// waited `waits` times before. Told when its turn is likely, it waits on its
/// queue until [`WAIT_EARLY_MS`] before that, spread by ±[`WAIT_SPREAD_PERCENT`] (`spread` picks
/// where: [`spread_of`]) and bounded by [`WAIT_CAP_SECS`], so a backlog behind
/// a slow target comes back at the target's pace; with no answer it waits
/// longer each time ([`wait_delay`]).
pub(crate) fn after_grant(answer: Result<Grant, String>, now: u64, message: &QueueMessage, spread: u64) -> AfterGrant {
    let waits = message.waits;
    match answer {
        Ok(Grant::Go { lease, .. }) => AfterGrant::Go(lease),
        _ if waits >= MAX_WAITS || message.waited_s >= MAX_WAIT_SECS => AfterGrant::DeadLetter,
        Ok(Grant::Wait { retry_at }) => {
            // Back a little before its turn: the gate holds it until then.
            let ms = retry_at.saturating_sub(now).saturating_sub(WAIT_EARLY_MS).min(u64::from(WAIT_CAP_SECS) * 1000);
            let percent = 100 - WAIT_SPREAD_PERCENT + spread % (2 * WAIT_SPREAD_PERCENT + 1);
            let secs = (ms * percent / 100).div_ceil(1000);
            AfterGrant::Requeue { delay_secs: (secs as u32).clamp(WAIT_BASE_SECS, WAIT_CAP_SECS) }
        }
        Err(_) => AfterGrant::Requeue { delay_secs: wait_delay(waits, WAIT_CAP_SECS) },
    }
}

/// A message told its turn comes back this much before it: the gate holds
/// its `Acquire` open (up to [`GATE_WAIT_BUDGET_MS`]) until the room is there,
/// while one back late leaves the target idle.
pub(crate) const WAIT_EARLY_MS: u64 = GATE_WAIT_BUDGET_MS / 2;
/// How far a message's wait is spread around the gate's estimate (percent either way).
pub(crate) const WAIT_SPREAD_PERCENT: u64 = 10;

/// Where in its spread a message's `waits`th wait falls: the same for the
/// same message and wait (a redelivered batch decides alike), different
/// across messages (their returns do not bunch).
pub(crate) fn spread_of(idempotency_key: &str, waits: u32) -> u64 {
    crate::target::stable_hash(idempotency_key.bytes().chain(waits.to_le_bytes()))
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
        Err(_) => Some(wait_delay(waits, DEAD_LETTER_WAIT_CAP_SECS)),
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
        let spread = spread_of(key, message.waits);
        let lease = match after_grant(answer.clone(), self.clock.now(), &message, spread) {
            AfterGrant::Go(lease) => lease,
            AfterGrant::Requeue { delay_secs } => {
                // No room soon, or no answer: on the queue again; this delivery made no forward.
                let why = answer.err().unwrap_or_else(|| NO_ROOM.into());
                return self.requeue(binding, &message.waiting(attempts, delay_secs), delay_secs, &why).await;
            }
            AfterGrant::DeadLetter => {
                let why = answer.err().unwrap_or_else(|| NO_ROOM.into());
                let (waits, waited) = (message.waits, message.waited_s);
                let outcome = format!("waited {waits} times ({waited} s) for the topic's gate (last: {why})");
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
        let started = self.clock.now();
        let outcome = self.outbound.send(out).await;
        let latency_ms = self.clock.now().saturating_sub(started) as f64;
        self.clock.point(Point { latency_ms, ..Point::new(name, What::Attempt, outcome_class(&outcome)) });
        let forwarded = Forwarded::of(key, attempt, &outcome);
        let mut target = None;
        for _ in 0..RELEASE_TRIES {
            let release = GateOp::Release { lease, outcome: Some(forwarded.clone()) };
            if let Ok(answer) = self.gates.ask(name, release).await {
                if let GateAnswer::Released { target: view, .. } = answer {
                    target = view;
                }
                break;
            }
        }
        // A throttle (or a 410) spends no try: the message waits, as for room, until the target's
        // time — within the topic's `max_throttled_ms` of waits; past it, it counts as failed.
        let throttled_ms = message.waited_s.saturating_mul(1000);
        if forwarded.verdict().is_held() && throttled_ms < topic.target_terms.max_throttled_ms {
            let now = self.clock.now();
            let until = match target.map(|t| t.state) {
                Some(TargetState::Paused { until }) => until,
                _ => now.saturating_add(u64::from(WAIT_CAP_SECS) * 1000),
            };
            if let AfterGrant::Requeue { delay_secs } =
                after_grant(Ok(Grant::Wait { retry_at: until }), now, &message, spread_of(key, message.waits))
            {
                let copy = message.waiting(attempts, delay_secs);
                return self.requeue(binding, &copy, delay_secs, &outcome.detail).await;
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
    fn a_configuration_error_retries_every_message_later_each_time_for_longer_than_the_retention() {
        let retention_secs = crate::topic::DEFAULT_RETENTION_MS / 1000;
        let mut span: u64 = 0;
        let mut last = 0;
        for attempts in 1..=QUEUE_MAX_RETRIES {
            let Settle::Retry { delay_secs: Some(delay) } = on_config_error(attempts) else {
                panic!("attempt {attempts}: {:?}, not a retry with a delay", on_config_error(attempts));
            };
            assert!(delay >= last, "attempt {attempts}: {delay} s after {last} s");
            assert!(delay > last || delay == CONFIG_RETRY_CAP_SECS, "attempt {attempts}: grows until the cap");
            assert!(delay <= CONFIG_RETRY_CAP_SECS && CONFIG_RETRY_CAP_SECS <= MAX_DELAY_SECS);
            span += u64::from(delay);
            last = delay;
        }
        assert_eq!(on_config_error(1), Settle::Retry { delay_secs: Some(CONFIG_RETRY_BASE_SECS) });
        assert_eq!(last, CONFIG_RETRY_CAP_SECS, "capped");
        assert_eq!(on_config_error(u32::MAX), Settle::Retry { delay_secs: Some(CONFIG_RETRY_CAP_SECS) });
        assert_eq!(on_config_error(0), on_config_error(1), "a runtime that does not count: the first");
        assert!(
            span >= retention_secs,
            "{QUEUE_MAX_RETRIES} retries span {span} s, under the {retention_secs} s promised"
        );
        assert_eq!(span, CONFIG_RETRY_SPAN_SECS, "the span the manual states (7.5 days)");
    }

    #[test]
    fn a_batch_whose_messages_cannot_be_read_is_retried_never_acked() {
        let Settle::Retry { delay_secs: Some(delay) } = on_unreadable_batch() else {
            panic!("{:?}: not a retry with a delay", on_unreadable_batch());
        };
        let retention_secs = crate::topic::DEFAULT_RETENTION_MS / 1000;
        assert!(u64::from(delay) * u64::from(QUEUE_MAX_RETRIES) >= retention_secs, "{delay} s each");
        assert!(delay <= MAX_DELAY_SECS);
    }

    /// The consumers `wrangler.toml` declares: each entry's settings (`key = value`).
    fn declared_consumers() -> Vec<Vec<(String, String)>> {
        let toml = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wrangler.toml"));
        let pairs = |text: &str| -> Vec<(String, String)> {
            text.split(['\n', ','])
                .map(|l| l.split('#').next().unwrap_or("").trim().trim_matches(['{', '}']).trim())
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
                .collect()
        };
        let mut entries = Vec::new();
        let mut lines = toml.lines().peekable();
        while let Some(line) = lines.next() {
            // `[[queues.consumers]]`, or an environment's (`[[env.….queues.consumers]]`).
            if line.trim().starts_with("[[") && line.trim().ends_with("queues.consumers]]") {
                let mut body = String::new();
                while let Some(next) = lines.next_if(|l| !l.trim_start().starts_with('[')) {
                    body.push_str(next);
                    body.push('\n');
                }
                entries.push(pairs(&body));
            } else if line.trim_start().starts_with("queues.consumers") {
                while let Some(next) = lines.next_if(|l| l.trim() != "]") {
                    entries.push(pairs(next));
                }
            }
        }
        entries
    }

    #[test]
    fn wrangler_toml_gives_every_consumer_the_retries_delays_and_dead_letter_queue_the_span_needs() {
        let consumers = declared_consumers();
        assert!(consumers.len() >= 4, "both queues, locally and in production: {consumers:?}");
        for entry in consumers {
            let get = |k: &str| entry.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
            let queue = get("queue").unwrap_or_default();
            assert_eq!(get("max_retries"), Some(QUEUE_MAX_RETRIES.to_string().as_str()), "{queue}");
            assert!(get("retry_delay").is_some(), "{queue}: a retry_delay");
            let parking = if queue == "lull-dead-letters" { "lull-parked" } else { "lull-dead-letters" };
            assert_eq!(get("dead_letter_queue"), Some(parking), "{queue}: where a message goes past its retries");
        }
    }

    #[test]
    fn a_message_is_forwarded_kept_or_refused() {
        let topics = Topics::parse(TOPICS).unwrap();
        assert!(matches!(admit(&message("q"), false, &topics), Admit::Forward(_, t) if t.name == "q"));
        assert!(matches!(admit(&message("q"), true, &topics), Admit::Keep(m) if m.topic == "q"));
        assert!(matches!(admit(&message("gone"), true, &topics), Admit::Keep(_)), "kept whatever the topic is now");
        let letter = r#"{"topic":"q","idempotency_key":"q/k/x.1","attempt":4,"failed":4,"outcome":"503","body":{}}"#;
        assert!(matches!(admit(letter, false, &topics), Admit::Keep(_)), "a dead letter by what it carries");
        let Admit::Refuse(Some(_), why) = admit(&message("hook"), false, &topics) else { panic!() };
        assert_eq!(why, "not a queue topic here");
        assert!(matches!(admit(&message("gone"), false, &topics), Admit::Refuse(Some(_), _)));
        let Admit::Refuse(None, why) = admit("{not json", false, &topics) else { panic!() };
        assert!(why.starts_with("not a lull message"));
    }

    #[test]
    fn the_gate_decides_go_or_a_requeue_never_a_retry() {
        let waited = |waits: u32, secs: u64| -> QueueMessage {
            let text = format!(
                r#"{{"topic":"q","idempotency_key":"q/k/x.1","attempt":1,"waits":{waits},"waited_s":{secs},"body":{{}}}}"#
            );
            serde_json::from_str(&text).unwrap()
        };
        let go = Grant::Go { lease: 7, expires_at: 99 };
        assert_eq!(after_grant(Ok(go), 1_000, &waited(0, 0), 0), AfterGrant::Go(7));
        // Its turn in 11 s, back 1 s early: 9 s at the low end of the spread, 11 s at the high end, whatever it waited before.
        let turn = Grant::Wait { retry_at: 12_000 };
        assert_eq!(after_grant(Ok(turn), 1_000, &waited(0, 0), 0), AfterGrant::Requeue { delay_secs: 9 });
        assert_eq!(after_grant(Ok(turn), 1_000, &waited(0, 0), 10), AfterGrant::Requeue { delay_secs: 10 });
        assert_eq!(
            after_grant(Ok(turn), 1_000, &waited(9, 0), 20),
            AfterGrant::Requeue { delay_secs: 11 },
            "no doubling"
        );
        let soon = Grant::Wait { retry_at: 2_300 };
        assert_eq!(
            after_grant(Ok(soon), 1_000, &waited(0, 0), 0),
            AfterGrant::Requeue { delay_secs: 1 },
            "at least 1 s"
        );
        let far = Grant::Wait { retry_at: u64::MAX };
        assert_eq!(
            after_grant(Ok(far), 0, &waited(0, 0), 20),
            AfterGrant::Requeue { delay_secs: WAIT_CAP_SECS },
            "bounded"
        );
        assert_eq!(
            after_grant(Err("gate acquire: 503".into()), 0, &waited(0, 0), 0),
            AfterGrant::Requeue { delay_secs: 1 },
            "an error waits too"
        );
        assert_eq!(
            after_grant(Err("gate acquire: 503".into()), 0, &waited(3, 0), 0),
            AfterGrant::Requeue { delay_secs: 8 },
            "no answer: the backoff, 1, 2, 4, 8 s"
        );
        assert_eq!(
            after_grant(Err("gate acquire: 503".into()), 0, &waited(40, 0), 0),
            AfterGrant::Requeue { delay_secs: WAIT_CAP_SECS }
        );
        let wait = Grant::Wait { retry_at: 0 };
        assert!(matches!(after_grant(Ok(wait), 0, &waited(MAX_WAITS - 1, 0), 0), AfterGrant::Requeue { .. }));
        assert_eq!(after_grant(Ok(wait), 0, &waited(MAX_WAITS, 0), 0), AfterGrant::DeadLetter, "waited its bound");
        assert_eq!(after_grant(Err("gate: 503".into()), 0, &waited(MAX_WAITS, 0), 0), AfterGrant::DeadLetter);
        assert_eq!(
            after_grant(Ok(go), 0, &waited(u32::MAX, 0), 0),
            AfterGrant::Go(7),
            "a lease is taken whenever it comes"
        );
        // A day of waits on the queue, however many: a dead letter.
        assert!(matches!(after_grant(Ok(wait), 0, &waited(9, MAX_WAIT_SECS - 1), 0), AfterGrant::Requeue { .. }));
        assert_eq!(after_grant(Ok(wait), 0, &waited(9, MAX_WAIT_SECS), 0), AfterGrant::DeadLetter, "waited a day");
        // The spread differs across messages and waits, and is the same for the same ones.
        let spreads: std::collections::BTreeSet<u64> =
            (0..50).map(|i| spread_of(&format!("q/k{i}/x.1"), 0) % (2 * WAIT_SPREAD_PERCENT + 1)).collect();
        assert!(spreads.len() > 10, "{spreads:?}");
        assert_eq!(spread_of("q/k/x.1", 3), spread_of("q/k/x.1", 3));
        assert_ne!(spread_of("q/k/x.1", 3), spread_of("q/k/x.1", 4));
        assert_eq!(wait_delay(0, 300), 1);
        assert_eq!(wait_delay(8, 300), 256);
        assert_eq!(wait_delay(9, 300), 300, "capped");
        assert_eq!(wait_delay(u32::MAX, 300), 300);
    }

    #[test]
    fn outcomes_settle_the_message() {
        let ok = Outcome { ok: true, detail: "200".into(), status: Some(200), retry_after_ms: None };
        let refused = Outcome { ok: false, detail: "500".into(), status: Some(500), retry_after_ms: None };
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
