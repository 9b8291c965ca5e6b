//! What a target receives: one `POST` per window, with a JSON body, an
//! `Idempotency-Key` stable across retries, an attempt number and the Standard
//! Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`: see
//! [`crate::delivery::signing`]).

use lull_core::{Reason, WindowId};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::names::Key;

/// The header naming a window; the same on every attempt.
pub(crate) const IDEMPOTENCY_HEADER: &str = "Idempotency-Key";
/// The header with the attempt number (1, 2, …).
pub(crate) const ATTEMPT_HEADER: &str = "Lull-Attempt";

/// `{topic}/{key}/{incarnation}.{window}`, the key percent-encoded (headers
/// are ASCII). The incarnation names this life of the key, so a key collected
/// and created again never repeats one; keys created before incarnations
/// existed keep `{topic}/{key}/{window}`.
pub(crate) fn idempotency_key(topic: &str, key: &Key, incarnation: Option<&str>, window: WindowId) -> String {
    match incarnation {
        Some(life) => format!("{topic}/{}/{life}.{window}", key.encoded()),
        None => format!("{topic}/{}/{window}", key.encoded()),
    }
}

/// The payloads a delivery carries, stored as the JSON the producers sent.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Payload<'a> {
    /// Every event of the window, in order (`payload: "all"`).
    Events(Vec<&'a RawValue>),
    /// One event (`payload: "last"` or `"first"`).
    Event(&'a RawValue),
}

/// The body of a delivery.
#[derive(Serialize)]
pub(crate) struct Delivery<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The key, as sent.
    pub key: &'a str,
    /// The window id (also in the idempotency key).
    pub window: WindowId,
    /// Why the window fired: `leading`, `quiet`, `max_wait`, `flush`, `full`, `retry` or `replay`.
    pub reason: Reason,
    /// Events in the window.
    pub count: u64,
    /// When the first event was accepted (unix ms).
    pub first_at: u64,
    /// When the last event was accepted (unix ms).
    pub last_at: u64,
    /// `events` or `event`.
    #[serde(flatten)]
    pub payload: Payload<'a>,
}

impl Delivery<'_> {
    /// The JSON body.
    pub(crate) fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_string()).unwrap()
    }

    #[test]
    fn a_delivery_carries_the_window_and_its_events() {
        let (a, b) = (raw(r#"{"n":1}"#), raw(r#"{"n":2}"#));
        let key = Key::from_path_segment("customer%2F42").unwrap();
        let all = Delivery {
            topic: "orders",
            key: key.as_str(),
            window: WindowId(7),
            reason: Reason::MaxWait,
            count: 2,
            first_at: 1_000,
            last_at: 2_000,
            payload: Payload::Events(vec![&a, &b]),
        };
        assert_eq!(
            all.to_json().unwrap(),
            r#"{"topic":"orders","key":"customer/42","window":7,"reason":"max_wait","count":2,"first_at":1000,"last_at":2000,"events":[{"n":1},{"n":2}]}"#
        );
        let last = Delivery { payload: Payload::Event(&b), ..all };
        assert!(last.to_json().unwrap().ends_with(r#""event":{"n":2}}"#));
        assert_eq!(idempotency_key("orders", &key, None, WindowId(7)), "orders/customer%2F42/7");
        assert_eq!(idempotency_key("orders", &key, Some("k3x9"), WindowId(7)), "orders/customer%2F42/k3x9.7");
    }
}
