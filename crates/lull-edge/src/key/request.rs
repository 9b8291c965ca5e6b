//! [`KeyRequest`]: the one form of a key operation, from the router to the
//! key's object, and [`KeyReply`], its answer. The router builds it from the
//! method, path, query and headers ([`crate::http::route`]); it crosses to
//! the Durable Object as one text, the argument of its `call` over RPC
//! ([`KeyCall::to_wire`]): the call as one line of JSON, then the event's body
//! (if any), byte for byte.

use lull_core::WindowId;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::ApiError;
use crate::names::Key;

/// What a request asks of a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum KeyRequest {
    /// `POST …/events`: accept one event.
    Event {
        /// The event's JSON. It crosses after the call's line, not in it.
        #[serde(skip)]
        body: String,
        /// The producer's `Idempotency-Key`, scoped by its caller
        /// (`crate::http::plan::scoped_key`): a repeat within the topic's
        /// `dedupe_window_ms` gets the first answer and stores nothing; with
        /// another body, `409 idempotency_key_reused`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idempotency_key: Option<String>,
        /// A client token's `events_per_minute`: at most this many of its holder's events per key and minute.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        events_per_minute: Option<u32>,
        /// Whose `events_per_minute` it spends (a client token's holder).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        holder: Option<String>,
    },
    /// `POST …/events:batch`, one key's share of a batch: accept these
    /// events in one transaction, all or nothing, in order.
    Events {
        /// Each event's JSON and producer `Idempotency-Key`. They cross after the call's line.
        #[serde(skip)]
        events: Vec<(String, Option<String>)>,
        /// A client token's `events_per_minute`, as for one event: the share is
        /// refused whole if its events do not all fit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        events_per_minute: Option<u32>,
        /// Whose `events_per_minute` it spends, as for one event.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        holder: Option<String>,
    },
    /// `GET …/keys/{key}`: the key's status.
    Status,
    /// `POST …/flush`: fire the open window now.
    Flush,
    /// `DELETE …/keys/{key}`: drop the open window.
    Cancel,
    /// `GET …/dead-letters`: a page of dead letters, windows after `after`, at most `limit`.
    DeadLetters {
        /// Start after this window id.
        after: Option<u64>,
        /// Page size (at most [`crate::key::MAX_PAGE`]).
        limit: usize,
    },
    /// `POST …/dead-letters/{window}/retry`: deliver one dead letter again.
    Replay {
        /// The dead letter's window.
        window: WindowId,
    },
    /// `POST …/dead-letters/retry`: deliver every dead letter again.
    ReplayAll,
    /// `POST /v1/topics/{topic}/recover`'s part for this key: deliver again
    /// every dead letter dead-lettered at or after `since` (unix ms).
    ReplaySince {
        /// Unix ms.
        since: u64,
    },
    /// `DELETE …/dead-letters/{window}`: forget one dead letter and its events.
    Discard {
        /// The dead letter's window.
        window: WindowId,
    },
    /// `GET …/timeline`: the key's recent log lines, entries numbered after `after`, at most `limit`.
    Timeline {
        /// Start after this entry number.
        after: Option<u64>,
        /// Page size (at most [`crate::key::timeline::TIMELINE_KEEP`]).
        limit: usize,
    },
}

/// The answer to a key request: an HTTP status and a JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyReply {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: serde_json::Value,
}

/// A key request addressed to its key: what crosses from the router to the
/// object, as one text ([`KeyCall::to_wire`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyCall {
    /// The topic's name.
    pub topic: String,
    /// The key.
    pub key: Key,
    /// What to do.
    pub request: KeyRequest,
}

/// One event of a batch as it crosses after the call's line.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireEvent {
    event: Box<RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    idempotency_key: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire<T, R> {
    topic: T,
    key: String,
    request: R,
}

impl KeyCall {
    /// The text the object reads: the call as one line of JSON (`{"topic",
    /// "key" (percent-encoded, as a route carries it, so the object checks it
    /// with the route's own parser), "request"}`; JSON text never holds a raw
    /// newline), a newline, then an event's JSON or a batch's events as
    /// `[{"event", "idempotency_key"?}, …]` (nothing else for other requests).
    pub fn to_wire(&self) -> Result<String, ApiError> {
        let wire = Wire { topic: &self.topic, key: self.key.encoded(), request: &self.request };
        let mut text = serde_json::to_string(&wire).map_err(|e| ApiError::Internal(e.to_string()))?;
        text.push('\n');
        match &self.request {
            KeyRequest::Event { body, .. } => text.push_str(body),
            KeyRequest::Events { events, .. } => {
                let wire = events
                    .iter()
                    .map(|(event, idempotency_key)| {
                        let event = RawValue::from_string(event.clone())?;
                        Ok(WireEvent { event, idempotency_key: idempotency_key.clone() })
                    })
                    .collect::<Result<Vec<_>, serde_json::Error>>()
                    .map_err(|e| ApiError::Internal(format!("batch event: {e}")))?;
                let events = serde_json::to_string(&wire).map_err(|e| ApiError::Internal(e.to_string()))?;
                text.push_str(&events);
            }
            _ => {}
        }
        Ok(text)
    }

    /// The call a text carries ([`KeyCall::to_wire`]).
    pub fn from_wire(mut text: String) -> Result<KeyCall, ApiError> {
        let line = text.find('\n').ok_or_else(|| ApiError::Internal("key call: no call line".into()))?;
        let body = text.split_off(line + 1);
        let wire: Wire<String, KeyRequest> =
            serde_json::from_str(&text[..line]).map_err(|e| ApiError::Internal(format!("key call: {e}")))?;
        let mut request = wire.request;
        match &mut request {
            KeyRequest::Event { body: event, .. } => *event = body,
            KeyRequest::Events { events, .. } => {
                let wire: Vec<WireEvent> =
                    serde_json::from_str(&body).map_err(|e| ApiError::Internal(format!("batch body: {e}")))?;
                *events = wire.into_iter().map(|w| (w.event.get().to_string(), w.idempotency_key)).collect();
            }
            _ => {}
        }
        Ok(KeyCall { topic: wire.topic, key: Key::from_path_segment(&wire.key)?, request })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_crosses_as_one_line_then_its_events_byte_for_byte() {
        let key = Key::from_path_segment("doc%E2%9C%93%2F1").unwrap();
        let requests = [
            KeyRequest::Event {
                body: "{\n  \"n\": 1,\n  \"s\": \"a\\nb\"\n}".into(),
                idempotency_key: Some("client:0123456789abcdef order\n1".into()),
                events_per_minute: Some(60),
                holder: Some("client:0123456789abcdef".into()),
            },
            KeyRequest::Event { body: "[]".into(), idempotency_key: None, events_per_minute: None, holder: None },
            KeyRequest::Events {
                events: vec![("{\n\"n\":1}".into(), Some("ingest p-1".into())), ("2".into(), None)],
                events_per_minute: None,
                holder: None,
            },
            KeyRequest::Status,
            KeyRequest::Flush,
            KeyRequest::Cancel,
            KeyRequest::DeadLetters { after: Some(7), limit: 20 },
            KeyRequest::Replay { window: WindowId(3) },
            KeyRequest::ReplayAll,
            KeyRequest::ReplaySince { since: 1_764_547_200_000 },
            KeyRequest::Discard { window: WindowId(4) },
            KeyRequest::Timeline { after: None, limit: 100 },
        ];
        for request in requests {
            let call = KeyCall { topic: "orders".into(), key: key.clone(), request };
            let wire = call.to_wire().unwrap();
            let line = wire.split('\n').next().unwrap();
            assert!(line.contains(r#""topic":"orders""#), "{wire}");
            assert!(!line.contains(r#""n""#), "the event stays out of the call's line: {wire}");
            assert_eq!(KeyCall::from_wire(wire).unwrap(), call);
        }
        for bad in [r#"{"topic":"t","key":"k","request":{"op":"nope"}}"#.to_string() + "\n", "no call line".into()] {
            assert_eq!(KeyCall::from_wire(bad).unwrap_err().code(), "internal");
        }
    }
}
