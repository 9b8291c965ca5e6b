//! Admin calls (an admin token): a key's status and dead letters, a queue
//! topic's status and dead letters, and minting client tokens. The answers
//! are typed for their stable fields; a key's status keeps every other field
//! in `other`, so printing one loses nothing.

use std::collections::BTreeMap;

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::client::{Call, Lull};
use crate::code::open_enum;
use crate::defaults;
use crate::error::{Error, Result};

open_enum! {
    /// Where a key is in its life (`state`).
    KeyState {
        /// Nothing open, due or running.
        Idle = "idle",
        /// A window collects events.
        Open = "open",
        /// A window fired and waits for the alarm.
        Due = "due",
        /// A delivery is in flight.
        Delivering = "delivering",
        /// A delivery failed and waits for its retry.
        Retrying = "retrying",
    }
}

open_enum! {
    /// Why a window fired.
    Reason {
        /// A burst's first event (`leading`).
        Leading = "leading",
        /// The quiet period passed.
        Quiet = "quiet",
        /// `max_wait_ms` passed.
        MaxWait = "max_wait",
        /// Flushed.
        Flush = "flush",
        /// The window was full.
        Full = "full",
        /// A retry.
        Retry = "retry",
        /// A dead letter replayed.
        Replay = "replay",
    }
}

/// The events a window holds (sequence numbers and times, unix ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// The first event's sequence number.
    pub first: u64,
    /// The last event's sequence number.
    pub last: u64,
    /// When the first came.
    pub first_at: u64,
    /// When the last came.
    pub last_at: u64,
}

/// A key's window whose every attempt failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyDeadLetter {
    /// Its window id.
    pub window: u64,
    /// Its events.
    pub span: Span,
    /// Why it fired.
    pub reason: Reason,
    /// Attempts made.
    pub attempts: u32,
    /// When the last failed (unix ms).
    pub failed_at: u64,
}

/// A key's status (`GET …/keys/{key}`), or its status after a change
/// (replay, discard: without `stored_events`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeyStatus {
    /// The topic.
    pub topic: String,
    /// The key.
    pub key: String,
    /// This life of the key (`null` for a key from before incarnations).
    pub incarnation: Option<String>,
    /// Where it is.
    pub state: KeyState,
    /// Windows queued behind a delivery.
    pub queued_count: u64,
    /// Dead letters held.
    pub dead_letter_count: u64,
    /// The oldest 10 dead letters.
    pub dead_letters: Vec<KeyDeadLetter>,
    /// Events still held (in `GET …/keys/{key}` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_events: Option<u64>,
    /// Every other field, as the API sent it (`open`, `run`, `stats`, …).
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// A page of a key's dead letters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyDeadLetterPage {
    /// The page, by window id.
    pub dead_letters: Vec<KeyDeadLetter>,
    /// All the key's dead letters.
    pub count: u64,
    /// The next page's `after`; `None` on the last page.
    pub next_after: Option<u64>,
}

/// Where a page starts and how long it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Page {
    /// Ids after this one (`after`); `None`: from the first.
    pub after: Option<u64>,
    /// At most this many (1–[`defaults::PAGE_MAX`]); `None`: the API's default (100).
    pub limit: Option<u32>,
}

impl Page {
    fn query(self) -> Result<Vec<(&'static str, String)>> {
        let mut query = Vec::new();
        if let Some(after) = self.after {
            query.push(("after", after.to_string()));
        }
        if let Some(limit) = self.limit {
            if !(1..=defaults::PAGE_MAX).contains(&limit) {
                return Err(Error::Input(format!("a page's limit is 1–{}, not {limit}", defaults::PAGE_MAX)));
            }
            query.push(("limit", limit.to_string()));
        }
        Ok(query)
    }
}

/// The consumer's counters of a queue topic (each present once counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCounters {
    /// Forwards acked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked: Option<u64>,
    /// Forwards retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried: Option<u64>,
    /// Messages sent back to wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeued: Option<u64>,
    /// Messages sent to the dead-letter queue by the consumer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_lettered: Option<u64>,
}

/// One of the oldest dead letters a queue topic's status lists.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueDeadLetterSummary {
    /// Its id.
    pub id: u64,
    /// The message's idempotency key.
    pub idempotency_key: String,
    /// Forwards made.
    pub attempts: u64,
}

/// A queue topic's status (`GET …/queue`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueStatus {
    /// The topic.
    pub topic: String,
    /// Forwards holding a lease now.
    pub in_flight: u64,
    /// Held `Acquire`s waiting for a lease.
    pub waiting: u64,
    /// Forwards in flight at most.
    pub forward_concurrency: u32,
    /// Forwards started per second at most, if set.
    pub forward_rate_per_s: Option<f64>,
    /// The consumer's counters.
    pub counters: QueueCounters,
    /// What the topic's gate object served since it started, by operation.
    pub requests: BTreeMap<String, u64>,
    /// Their sum.
    pub requests_total: u64,
    /// Dead letters kept.
    pub dead_letter_count: u64,
    /// Their bytes.
    pub dead_letter_bytes: u64,
    /// The bound on their count.
    pub max_queue_dead_letters: u64,
    /// The bound on their bytes.
    pub max_queue_dead_letter_bytes: u64,
    /// Events of the topic are refused (`429 dead_letters_full`).
    pub dead_letters_full: bool,
    /// The oldest 10.
    pub dead_letters: Vec<QueueDeadLetterSummary>,
}

/// A kept queue dead letter.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QueueDeadLetter {
    /// Its id.
    pub id: u64,
    /// The message's idempotency key.
    pub idempotency_key: String,
    /// Forwards made.
    pub attempts: u64,
    /// When its first forward failed (unix ms).
    pub first_failed_at: u64,
    /// When it was kept (unix ms).
    pub kept_at: u64,
    /// The last failed forward's outcome.
    pub last_outcome: String,
    /// The kept message's size.
    pub bytes: u64,
    /// A lull message's topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// A lull message's delivery body, byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Box<RawValue>>,
    /// Another message's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A page of a queue topic's dead letters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QueueDeadLetterPage {
    /// The page, oldest first.
    pub dead_letters: Vec<QueueDeadLetter>,
    /// All the topic's dead letters.
    pub count: u64,
    /// All their bytes.
    pub bytes: u64,
    /// The next page's `after`; `None` on the last page.
    pub next_after: Option<u64>,
}

/// Dead letters sent back through the queue by one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueReplayed {
    /// Sent back (and forgotten) by this call.
    pub replayed: u64,
    /// Still kept.
    pub remaining: u64,
}

/// A queue dead letter forgotten.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueDiscarded {
    /// Its id.
    pub discarded: u64,
}

open_enum! {
    /// What a client token may do.
    TokenOp {
        /// Post events (always granted).
        Events = "events",
        /// Flush its keys.
        Flush = "flush",
        /// Cancel its keys' open windows.
        Cancel = "cancel",
    }
}

/// Which keys a client token covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenScope {
    /// One key.
    Key(String),
    /// Every key starting with this (non-empty).
    Prefix(String),
}

/// What to mint (`POST …/client-tokens`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MintRequest {
    /// Its keys.
    pub scope: TokenScope,
    /// Its lifetime in seconds (1–86,400); `None`: the API's default (3,600).
    pub ttl_s: Option<u32>,
    /// Its holder's events per key and minute at most.
    pub events_per_minute: Option<u32>,
    /// What it may do besides posting events.
    pub ops: Vec<TokenOp>,
    /// Its holder (tokens of one holder share idempotency keys and `events_per_minute`).
    pub sub: Option<String>,
}

impl MintRequest {
    /// A token for `scope` with the API's defaults.
    pub fn new(scope: TokenScope) -> MintRequest {
        MintRequest { scope, ttl_s: None, events_per_minute: None, ops: Vec::new(), sub: None }
    }

    fn body(&self) -> serde_json::Value {
        let mut body = serde_json::Map::new();
        let (name, value) = match &self.scope {
            TokenScope::Key(key) => ("key", key),
            TokenScope::Prefix(prefix) => ("key_prefix", prefix),
        };
        body.insert(name.into(), value.clone().into());
        if let Some(ttl) = self.ttl_s {
            body.insert("ttl_s".into(), ttl.into());
        }
        if let Some(n) = self.events_per_minute {
            body.insert("events_per_minute".into(), n.into());
        }
        if !self.ops.is_empty() {
            body.insert(
                "ops".into(),
                self.ops.iter().map(|op| serde_json::Value::from(op.as_str())).collect::<serde_json::Value>(),
            );
        }
        if let Some(sub) = &self.sub {
            body.insert("sub".into(), sub.clone().into());
        }
        body.into()
    }
}

/// A minted client token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MintedToken {
    /// The JWT.
    pub token: String,
    /// Its `exp` (unix seconds).
    pub expires_at: u64,
}

impl Lull {
    /// A key's status (`GET /v1/topics/{topic}/keys/{key}`); a key never seen answers too.
    ///
    /// # Errors
    /// [`Error::Api`] (`403` without an admin token, `404 unknown_topic`, `400 invalid_key`, …).
    pub async fn key_status(&self, topic: &str, key: &str) -> Result<KeyStatus> {
        self.call(Call::new(Method::GET, Lull::key_path(topic, key, "")?)).await
    }

    /// A page of a key's dead letters.
    ///
    /// # Errors
    /// As [`Lull::key_status`]; [`Error::Input`] for a limit outside 1–500.
    pub async fn key_dead_letters(&self, topic: &str, key: &str, page: Page) -> Result<KeyDeadLetterPage> {
        let mut call = Call::new(Method::GET, Lull::key_path(topic, key, "/dead-letters")?);
        call.query = page.query()?;
        self.call(call).await
    }

    /// Deliver one of a key's dead letters again; the key's status after it.
    ///
    /// # Errors
    /// As [`Lull::key_status`]; `404 not_found` for a window that is not a dead letter.
    pub async fn replay_key_dead_letter(&self, topic: &str, key: &str, window: u64) -> Result<KeyStatus> {
        self.call(Call::new(Method::POST, Lull::key_path(topic, key, &format!("/dead-letters/{window}/retry"))?)).await
    }

    /// Deliver every dead letter of a key again; the key's status after it.
    ///
    /// # Errors
    /// As [`Lull::key_status`].
    pub async fn replay_key_dead_letters(&self, topic: &str, key: &str) -> Result<KeyStatus> {
        self.call(Call::new(Method::POST, Lull::key_path(topic, key, "/dead-letters/retry")?)).await
    }

    /// Forget one of a key's dead letters and its events; the key's status after it.
    ///
    /// # Errors
    /// As [`Lull::replay_key_dead_letter`].
    pub async fn discard_key_dead_letter(&self, topic: &str, key: &str, window: u64) -> Result<KeyStatus> {
        self.call(Call::new(Method::DELETE, Lull::key_path(topic, key, &format!("/dead-letters/{window}"))?)).await
    }

    /// A queue topic's status (`GET /v1/topics/{topic}/queue`).
    ///
    /// # Errors
    /// [`Error::Api`]: `404 not_found` for a topic that delivers by webhook.
    pub async fn queue_status(&self, topic: &str) -> Result<QueueStatus> {
        self.call(Call::new(Method::GET, Lull::topic_path(topic, "/queue")?)).await
    }

    /// A page of a queue topic's dead letters (oldest first, at most 4 MiB of bodies).
    ///
    /// # Errors
    /// As [`Lull::queue_status`]; [`Error::Input`] for a limit outside 1–500.
    pub async fn queue_dead_letters(&self, topic: &str, page: Page) -> Result<QueueDeadLetterPage> {
        let mut call = Call::new(Method::GET, Lull::topic_path(topic, "/queue/dead-letters")?);
        call.query = page.query()?;
        self.call(call).await
    }

    /// Send one queue dead letter back through the topic's queue.
    ///
    /// # Errors
    /// As [`Lull::queue_status`]; `404` for an unknown id, `409 replay_in_progress`.
    pub async fn replay_queue_dead_letter(&self, topic: &str, id: u64) -> Result<QueueReplayed> {
        self.call(Call::new(Method::POST, Lull::topic_path(topic, &format!("/queue/dead-letters/{id}/retry"))?)).await
    }

    /// Send the oldest 100 queue dead letters back; call again while `remaining` > 0.
    ///
    /// # Errors
    /// As [`Lull::queue_status`].
    pub async fn replay_queue_dead_letters(&self, topic: &str) -> Result<QueueReplayed> {
        self.call(Call::new(Method::POST, Lull::topic_path(topic, "/queue/dead-letters/retry")?)).await
    }

    /// Forget one queue dead letter.
    ///
    /// # Errors
    /// As [`Lull::replay_queue_dead_letter`].
    pub async fn discard_queue_dead_letter(&self, topic: &str, id: u64) -> Result<QueueDiscarded> {
        self.call(Call::new(Method::DELETE, Lull::topic_path(topic, &format!("/queue/dead-letters/{id}"))?)).await
    }

    /// Mint a client token (`POST /v1/topics/{topic}/client-tokens`).
    ///
    /// # Errors
    /// [`Error::Api`]: `409 client_tokens_off`, `400 bad_request` / `invalid_key`, …
    pub async fn mint_client_token(&self, topic: &str, request: &MintRequest) -> Result<MintedToken> {
        let body = request.body().to_string();
        self.call(Call::new(Method::POST, Lull::topic_path(topic, "/client-tokens")?).body(body)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_status_keeps_every_field() {
        let text = r#"{"topic":"docs","key":"doc-42","incarnation":"8kq2m7x0ba","state":"open","wait_ms":2000,"queued_count":0,"queued":[],"dead_letter_count":1,"dead_letters":[{"window":4,"span":{"first":13,"last":15,"first_at":1,"last_at":2},"reason":"quiet","attempts":5,"failed_at":3}],"stats":{"events":12},"stored_events":1}"#;
        let status: KeyStatus = serde_json::from_str(text).unwrap();
        assert_eq!((status.state.clone(), status.dead_letters[0].reason.clone()), (KeyState::Open, Reason::Quiet));
        assert_eq!(status.stored_events, Some(1));
        assert_eq!(status.other["stats"]["events"], 12);
        let back: serde_json::Value = serde_json::to_value(&status).unwrap();
        assert_eq!(back, serde_json::from_str::<serde_json::Value>(text).unwrap());
    }

    #[test]
    fn mint_requests_say_only_what_is_set() {
        let mut request = MintRequest::new(TokenScope::Key("doc-1".into()));
        assert_eq!(request.body().to_string(), r#"{"key":"doc-1"}"#);
        request.ops = vec![TokenOp::Events, TokenOp::Flush];
        request.ttl_s = Some(600);
        request.events_per_minute = Some(5);
        request.sub = Some("u7".into());
        assert_eq!(
            request.body(),
            serde_json::json!({"key": "doc-1", "ttl_s": 600, "events_per_minute": 5, "ops": ["events", "flush"], "sub": "u7"})
        );
        let prefix = MintRequest::new(TokenScope::Prefix("user-7/".into()));
        assert_eq!(prefix.body().to_string(), r#"{"key_prefix":"user-7/"}"#);
    }

    #[test]
    fn pages_check_their_limit() {
        assert!(Page { after: Some(3), limit: Some(500) }.query().is_ok());
        assert!(matches!(Page { after: None, limit: Some(0) }.query(), Err(Error::Input(_))));
        assert!(matches!(Page { after: None, limit: Some(501) }.query(), Err(Error::Input(_))));
    }
}
