//! A fired window as Cloudflare Queue messages (`delivery = "queue"`): the
//! same JSON body and idempotency key as a webhook delivery, in one message,
//! or — when the window is larger than a message can hold — in parts, each
//! saying so (`"part": {"index", "count"}`, index from 0) and each with its
//! own idempotency key naming the window and the part
//! (`{window's key}.part-{index}-of-{count}`).
//!
//! Guarantees: every message is at most [`MAX_MESSAGE_BYTES`]; every event
//! of the window is in exactly one part, in order; the split depends only on
//! the window's events, so each attempt splits it the same way and a
//! receiver deduplicating on the key keeps every part exactly once.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::delivery::body::{Delivery, Payload};

/// The largest message a queue takes (bytes of its JSON).
pub const MAX_MESSAGE_BYTES: usize = 128_000;
/// Room kept for the envelope around a part's body (topic, idempotency key, attempt).
pub(crate) const ENVELOPE_BYTES: usize = 4_000;
/// The largest event a queue topic accepts (`max_body_bytes`): with the
/// delivery's own fields it always fits in one part.
pub const MAX_QUEUE_EVENT_BYTES: usize = 120_000;

/// Bytes of messages per `sendBatch` at most (the queue takes 256 KB, metadata included).
pub(crate) const BATCH_BYTES: usize = 200_000;
/// Messages per `sendBatch` at most.
pub(crate) const BATCH_MESSAGES: usize = 100;

/// `messages` in order, grouped as `sendBatch` takes them: at most
/// [`BATCH_MESSAGES`] and [`BATCH_BYTES`] each (a message alone may be larger: it goes alone).
pub(crate) fn batches(messages: &[String]) -> Vec<&[String]> {
    let mut batches = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, message) in messages.iter().enumerate() {
        let full = i - start == BATCH_MESSAGES || (i > start && bytes + message.len() > BATCH_BYTES);
        if full {
            batches.push(&messages[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += message.len();
    }
    if start < messages.len() {
        batches.push(&messages[start..]);
    }
    batches
}

/// Which part of a split window a message holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Part {
    /// From 0.
    pub index: usize,
    /// How many parts the window has.
    pub count: usize,
}

/// One message on the queue: what the consumer forwards, and to whom.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct QueueMessage {
    /// The topic (its target, signing and bound are the consumer's to look up).
    pub topic: String,
    /// Sent as `Idempotency-Key`: the window's, or the part's.
    pub idempotency_key: String,
    /// The attempt number this message's first delivery forwards as: the
    /// key's attempt at the window, or, for a copy sent again to wait (or a
    /// replayed dead letter), the attempt it had reached. A delivery the queue
    /// counts `attempts` forwards as `attempt + attempts - 1` ([`QueueMessage::forward_attempt`]).
    pub attempt: u32,
    /// How many times this message was sent to a queue again to wait (for the
    /// gate, or on the dead-letter queue for room): each wait is longer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waits: u32,
    /// How long (s) its waits on the queue came to, by their delays (absent: 0).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub waited_s: u64,
    /// Forwards of this message that failed before this copy was sent (to
    /// wait, or to the dead-letter queue): carried across copies, so failures
    /// count toward the topic's `forward_max_attempts` however often it waited.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: u32,
    /// Why the consumer sent it to the dead-letter queue (set only on that copy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The delivery's JSON body, as a webhook would get it (plus `part` when split).
    pub body: Box<RawValue>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

impl QueueMessage {
    /// The attempt a delivery the queue counts as its `attempts`th (1, 2, …) forwards as.
    pub(crate) fn forward_attempt(&self, attempts: u32) -> u32 {
        self.attempt.saturating_add(attempts.max(1) - 1)
    }

    /// Forwards that failed before a delivery the queue counts as its
    /// `attempts`th: those carried, and one for each redelivery of this copy
    /// (the queue redelivers after a failed forward — or, rarely, after a
    /// copy could not be sent to wait: counted too, erring toward the bound).
    pub(crate) fn failed_before(&self, attempts: u32) -> u32 {
        self.failed.saturating_add(attempts.max(1) - 1)
    }

    /// This message sent again to wait `delay_secs` after a delivery counted
    /// `attempts` that made no forward (or a throttled one): the copy's first
    /// delivery forwards as the attempt this one would have, it carries the
    /// failures so far, and it has waited once more, that much longer.
    pub(crate) fn waiting(&self, attempts: u32, delay_secs: u32) -> QueueMessage {
        QueueMessage {
            topic: self.topic.clone(),
            idempotency_key: self.idempotency_key.clone(),
            attempt: self.forward_attempt(attempts),
            waits: self.waits.saturating_add(1),
            waited_s: self.waited_s.saturating_add(u64::from(delay_secs)),
            failed: self.failed_before(attempts),
            outcome: None,
            body: self.body.clone(),
        }
    }

    /// The copy the consumer sends to the dead-letter queue: `attempt` the last
    /// forward made, `failed` forwards failed, and why (`outcome`); waits reset.
    pub(crate) fn dead_letter(&self, attempt: u32, failed: u32, outcome: String) -> QueueMessage {
        QueueMessage {
            topic: self.topic.clone(),
            idempotency_key: self.idempotency_key.clone(),
            attempt,
            waits: 0,
            waited_s: 0,
            failed,
            outcome: Some(outcome),
            body: self.body.clone(),
        }
    }

    /// A copy the consumer sent to the dead-letter queue ([`QueueMessage::dead_letter`]):
    /// it says why (`outcome`), which no delivery or replay carries.
    pub(crate) fn is_dead_letter(&self) -> bool {
        self.outcome.is_some()
    }

    /// The message as the queue carries it (its body byte for byte).
    pub(crate) fn to_text(&self) -> String {
        // A RawValue, strings and numbers always serialise.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Why a window cannot go as messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SplitError {
    /// One event alone is larger than a message can hold (bytes).
    EventTooLarge(usize),
    /// JSON could not be written.
    Json(String),
}

impl core::fmt::Display for SplitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SplitError::EventTooLarge(n) => write!(f, "an event of {n} bytes does not fit in a queue message"),
            SplitError::Json(e) => write!(f, "queue message: {e}"),
        }
    }
}

#[derive(Serialize)]
struct WithPart<'a> {
    #[serde(flatten)]
    delivery: &'a Delivery<'a>,
    part: Part,
}

fn json<T: Serialize>(value: &T) -> Result<String, SplitError> {
    serde_json::to_string(value).map_err(|e| SplitError::Json(e.to_string()))
}

/// `delivery` as messages for `topic`: one if it fits, else parts of its events.
pub(crate) fn messages(
    topic: &str,
    delivery: &Delivery<'_>,
    idempotency_key: &str,
    attempt: u32,
) -> Result<Vec<QueueMessage>, SplitError> {
    let budget = MAX_MESSAGE_BYTES - ENVELOPE_BYTES;
    let message = |body: String, key: String| -> Result<QueueMessage, SplitError> {
        let body = RawValue::from_string(body).map_err(|e| SplitError::Json(e.to_string()))?;
        Ok(QueueMessage {
            topic: topic.to_string(),
            idempotency_key: key,
            attempt,
            waits: 0,
            waited_s: 0,
            failed: 0,
            outcome: None,
            body,
        })
    };
    let whole = json(delivery)?;
    let events = match &delivery.payload {
        _ if whole.len() <= budget => return Ok(vec![message(whole, idempotency_key.to_string())?]),
        Payload::Events(events) => events,
        Payload::Event(event) => return Err(SplitError::EventTooLarge(event.get().len())),
    };
    // The delivery's own fields with no event, and a part's room for events.
    let empty = Delivery { payload: Payload::Events(Vec::new()), ..*delivery };
    let fixed = json(&WithPart { delivery: &empty, part: Part { index: 999_999, count: 999_999 } })?.len();
    let room = budget.saturating_sub(fixed);
    let mut groups: Vec<Vec<&RawValue>> = vec![Vec::new()];
    let mut used = 0;
    for event in events {
        let size = event.get().len() + 1; // and its comma
        if size > room {
            return Err(SplitError::EventTooLarge(event.get().len()));
        }
        if used + size > room {
            groups.push(Vec::new());
            used = 0;
        }
        used += size;
        if let Some(group) = groups.last_mut() {
            group.push(*event);
        }
    }
    let count = groups.len();
    groups
        .into_iter()
        .enumerate()
        .map(|(index, events)| {
            let part = Part { index, count };
            let body = json(&WithPart { delivery: &Delivery { payload: Payload::Events(events), ..*delivery }, part })?;
            message(body, format!("{idempotency_key}.part-{index}-of-{count}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lull_core::{Reason, WindowId};

    fn raw(json: String) -> Box<RawValue> {
        RawValue::from_string(json).unwrap()
    }

    fn delivery<'a>(payload: Payload<'a>, count: u64) -> Delivery<'a> {
        Delivery {
            topic: "orders",
            key: "c42",
            window: WindowId(7),
            reason: Reason::Quiet,
            count,
            first_at: 1,
            last_at: 2,
            payload,
        }
    }

    #[test]
    fn a_window_that_fits_is_one_message_with_the_webhook_body_and_key() {
        let e = raw(r#"{"n":1}"#.into());
        let d = delivery(Payload::Events(vec![&e]), 1);
        let out = messages("orders", &d, "orders/c42/k.7", 2).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].body.get(), d.to_json().unwrap());
        assert_eq!((out[0].idempotency_key.as_str(), out[0].attempt), ("orders/c42/k.7", 2));
    }

    #[test]
    fn a_large_window_is_split_in_order_every_event_once_each_part_fitting() {
        let big: Vec<Box<RawValue>> =
            (0..40).map(|i| raw(format!(r#"{{"i":{i},"pad":"{}"}}"#, "x".repeat(10_000)))).collect();
        let d = delivery(Payload::Events(big.iter().map(|b| b.as_ref()).collect()), 40);
        let out = messages("orders", &d, "orders/c42/k.7", 1).unwrap();
        assert!(out.len() >= 4, "{} parts", out.len());
        let mut seen = Vec::new();
        for (i, m) in out.iter().enumerate() {
            assert!(serde_json::to_string(m).unwrap().len() <= MAX_MESSAGE_BYTES);
            assert_eq!(m.idempotency_key, format!("orders/c42/k.7.part-{i}-of-{}", out.len()));
            let body: serde_json::Value = serde_json::from_str(m.body.get()).unwrap();
            assert_eq!(body["part"], serde_json::json!({"index": i, "count": out.len()}));
            assert_eq!(
                (body["window"].as_u64(), body["count"].as_u64()),
                (Some(7), Some(40)),
                "the window's own count"
            );
            seen.extend(body["events"].as_array().unwrap().iter().map(|e| e["i"].as_u64().unwrap()));
        }
        assert_eq!(seen, (0..40).collect::<Vec<u64>>());
        let again = messages("orders", &d, "orders/c42/k.7", 2).unwrap();
        assert_eq!(
            again.iter().map(|m| m.body.get()).collect::<Vec<_>>(),
            out.iter().map(|m| m.body.get()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn messages_go_in_batches_the_queue_takes_in_order() {
        let small: Vec<String> = (0..250).map(|i| format!("{i}")).collect();
        let sizes: Vec<usize> = batches(&small).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [100, 100, 50]);
        let big: Vec<String> = (0..5).map(|i| format!("{i}{}", "x".repeat(90_000))).collect();
        let grouped = batches(&big);
        assert_eq!(grouped.iter().map(|b| b.len()).collect::<Vec<_>>(), [2, 2, 1]);
        assert!(grouped.iter().all(|b| b.iter().map(String::len).sum::<usize>() <= BATCH_BYTES));
        assert_eq!(grouped.concat(), big, "every message once, in order");
        assert!(batches(&[]).is_empty());
    }

    #[test]
    fn a_waiting_copy_keeps_its_attempt_count_and_body() {
        let text = r#"{"topic":"q","idempotency_key":"q/k/x.1","attempt":2,"body":{"big":12345678901234567890}}"#;
        let m: QueueMessage = serde_json::from_str(text).unwrap();
        assert_eq!(m.to_text(), text, "a message that never waited is written as it was read");
        assert_eq!((m.forward_attempt(1), m.forward_attempt(3), m.forward_attempt(0)), (2, 4, 2));
        // Third delivery (attempt 4) found no room: the copy's first delivery is attempt 4 again.
        let copy = m.waiting(3, 1);
        assert_eq!((copy.attempt, copy.waits, copy.forward_attempt(1)), (4, 1, 4));
        assert_eq!(copy.body.get(), m.body.get());
        assert!(copy.to_text().contains(r#""waits":1"#));
        assert_eq!((copy.waiting(1, 30).waits, copy.waiting(1, 30).waited_s), (2, 31), "its 1 s before, and 30 more");
        // Two deliveries of the original failed (the third waited): the copy carries 2, its redeliveries add on.
        assert_eq!((m.failed_before(3), copy.failed, copy.failed_before(1), copy.failed_before(2)), (2, 2, 2, 3));
        assert!(copy.to_text().contains(r#""failed":2"#));
        assert_eq!(copy.waiting(2, 1).failed, 3, "carried across copies");
        let dead = copy.dead_letter(4, 4, "503".into());
        assert_eq!((dead.waits, dead.failed, dead.outcome.as_deref()), (0, 4, Some("503")));
        assert!(dead.is_dead_letter() && !m.is_dead_letter() && !copy.is_dead_letter());
        let read: QueueMessage = serde_json::from_str(&dead.to_text()).unwrap();
        assert!(read.is_dead_letter(), "it says so on the queue");
    }

    #[test]
    fn an_event_larger_than_a_message_is_refused() {
        let huge = raw(format!(r#""{}""#, "y".repeat(MAX_MESSAGE_BYTES)));
        let d = delivery(Payload::Event(&huge), 1);
        assert!(matches!(messages("orders", &d, "k", 1), Err(SplitError::EventTooLarge(_))));
        let d = delivery(Payload::Events(vec![&huge]), 1);
        assert!(matches!(messages("orders", &d, "k", 1), Err(SplitError::EventTooLarge(_))));
    }
}
