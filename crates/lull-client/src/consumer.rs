//! A consumer of lull's queued windows through Cloudflare Queues' HTTP pull
//! API: [`PullQueue::pull`] leases messages, [`PullQueue::settle`] acks them
//! or asks for retries. A message is what lull-edge queued,
//! `{topic, idempotency_key, attempt, body}` ([`QueuedMessage`]), `body`
//! being the window as a webhook receives it.
//!
//! Guarantees:
//! - The base URL's path is kept: `{base}/accounts/{account}/queues/{queue}/messages/pull`.
//! - A message whose body is not a lull message is still returned (its
//!   [`Message::content`] says why), so its lease can be acked or retried.
//! - Not guaranteed: exactly once. A message whose visibility timeout passes
//!   before its ack comes again; deduplicate on its idempotency key ([`crate::Seen`]).

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::client::{base_url, bearer, excerpt, http_client, retry_after, segment};
use crate::defaults;
use crate::error::{CloudflareError, CloudflareMessage, Error, Result};
use crate::retry::{RetryPolicy, retrying};
use crate::seen::Seen;

/// Where a queue is and who may read it.
#[derive(Clone, PartialEq, Eq)]
pub struct PullConfig {
    /// Cloudflare's API ([`defaults::CLOUDFLARE_API_BASE`]), or another base (a path kept).
    pub base: String,
    /// The account's id.
    pub account_id: String,
    /// The queue's id.
    pub queue_id: String,
    /// An API token allowed to read and write the queue.
    pub api_token: String,
}

impl std::fmt::Debug for PullConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullConfig")
            .field("base", &self.base)
            .field("account_id", &self.account_id)
            .field("queue_id", &self.queue_id)
            .finish_non_exhaustive()
    }
}

impl PullConfig {
    /// A queue on Cloudflare's API ([`defaults::CLOUDFLARE_API_BASE`]).
    pub fn new(account_id: impl Into<String>, queue_id: impl Into<String>, api_token: impl Into<String>) -> Self {
        PullConfig {
            base: defaults::CLOUDFLARE_API_BASE.into(),
            account_id: account_id.into(),
            queue_id: queue_id.into(),
            api_token: api_token.into(),
        }
    }
}

/// A message's lease, named in its ack or retry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaseId(pub String);

/// A message to give back to the queue, after `delay` (none: the queue's own delay).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Its lease.
    pub lease_id: LeaseId,
    /// How long it stays invisible (whole seconds, rounded up; at most [`defaults::MAX_RETRY_DELAY`]).
    pub delay: Option<Duration>,
}

/// What an ack request settled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// Messages acked.
    pub acked: u64,
    /// Messages retried.
    pub retried: u64,
    /// Cloudflare's warnings (a list, or a map written `key: value`).
    pub warnings: Vec<String>,
}

/// lull's message on the queue: one window (or one part of a large window).
#[derive(Clone, Debug, PartialEq)]
pub struct QueuedMessage<T = serde_json::Value> {
    /// The topic.
    pub topic: String,
    /// The window's (or part's) idempotency key: the same on every attempt.
    pub idempotency_key: String,
    /// The attempt this message's first delivery stands for (see [`QueuedMessage::lull_attempt`]).
    pub attempt: u32,
    /// Why lull's consumer dead-lettered it (only on a dead-letter copy).
    pub outcome: Option<String>,
    /// The window, decoded as `T`.
    pub body: T,
    /// The window's JSON text as it was queued: what a webhook receives, byte for byte.
    pub window_json: String,
}

impl<T> QueuedMessage<T> {
    /// The attempt lull-edge would forward this delivery as (`Lull-Attempt`):
    /// `attempt + attempts − 1`, `attempts` being the queue's count of its
    /// deliveries (from 1; 0 counts as 1).
    pub fn lull_attempt(&self, attempts: u32) -> u32 {
        self.attempt.saturating_add(attempts.max(1) - 1)
    }
}

/// A message's body that is not a lull message (or not a `T`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undecodable {
    /// The body's text.
    pub text: String,
    /// Why it could not be decoded.
    pub reason: String,
}

/// One leased message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message<T = serde_json::Value> {
    /// The queue's id of the message.
    pub id: String,
    /// Its lease (ack or retry it by this).
    pub lease_id: LeaseId,
    /// When it was sent (unix ms).
    pub timestamp_ms: u64,
    /// Deliveries of it the queue counted, this one included.
    pub attempts: u32,
    /// lull's message, or why the body is not one.
    pub content: Result<QueuedMessage<T>, Undecodable>,
}

impl<T> Message<T> {
    /// The `Lull-Attempt` lull-edge would forward this delivery with
    /// ([`QueuedMessage::lull_attempt`]); `None` for a body that is not lull's.
    pub fn lull_attempt(&self) -> Option<u32> {
        self.content.as_ref().ok().map(|m| m.lull_attempt(self.attempts))
    }

    /// The idempotency key, if the body is lull's.
    pub fn idempotency_key(&self) -> Option<&str> {
        self.content.as_ref().ok().map(|m| m.idempotency_key.as_str())
    }
}

/// A queue read through the HTTP pull API.
#[derive(Clone)]
pub struct PullQueue {
    http: reqwest::Client,
    config: PullConfig,
    /// `{base}/accounts/{account}/queues/{queue}/messages`.
    messages: String,
    authorization: String,
    retry: RetryPolicy,
}

impl std::fmt::Debug for PullQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullQueue").field("config", &self.config).field("retry", &self.retry).finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Envelope<R> {
    #[serde(default)]
    success: bool,
    #[serde(default)]
    errors: Vec<CloudflareMessage>,
    result: Option<R>,
}

#[derive(Deserialize)]
struct PullResult {
    #[serde(default)]
    messages: Vec<WireMessage>,
    #[serde(default)]
    message_backlog_count: Option<u64>,
}

/// One pull's messages, and what the queue said was left.
#[derive(Clone, Debug, PartialEq)]
pub struct Pulled<T = serde_json::Value> {
    /// The messages leased, in the queue's order.
    pub messages: Vec<Message<T>>,
    /// Messages the queue still held (`message_backlog_count`), if it said.
    pub backlog: Option<u64>,
}

/// What [`PullQueue::pull_new`] leased.
#[derive(Clone, Debug, PartialEq)]
pub struct Fresh<T = serde_json::Value> {
    /// Messages to handle, in the queue's order.
    pub messages: Vec<Message<T>>,
    /// Messages of windows already handled in this run: to ack, not to handle.
    pub duplicates: Vec<Message<T>>,
}

impl<T> Fresh<T> {
    /// The duplicates' leases, to ack.
    pub fn duplicate_leases(&self) -> Vec<LeaseId> {
        self.duplicates.iter().map(|m| m.lease_id.clone()).collect()
    }
}

#[derive(Deserialize)]
struct WireMessage {
    id: String,
    body: Box<RawValue>,
    #[serde(default)]
    timestamp_ms: u64,
    #[serde(default)]
    attempts: u32,
    lease_id: String,
}

#[derive(Deserialize)]
struct AckResult {
    #[serde(default, rename = "ackCount")]
    ack_count: u64,
    #[serde(default, rename = "retryCount")]
    retry_count: u64,
    #[serde(default)]
    warnings: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct WireQueued<'a> {
    topic: String,
    idempotency_key: String,
    attempt: u32,
    #[serde(default)]
    outcome: Option<String>,
    #[serde(borrow)]
    body: &'a RawValue,
}

/// lull's message in a pulled body: a JSON string holding the message's JSON
/// (how the API returns JSON bodies), or the message's JSON itself.
fn decode_queued<T: DeserializeOwned>(body: &RawValue) -> Result<QueuedMessage<T>, Undecodable> {
    let text: String = if body.get().starts_with('"') {
        serde_json::from_str(body.get()).map_err(|e| Undecodable { text: body.get().into(), reason: e.to_string() })?
    } else {
        body.get().to_string()
    };
    let fail = |reason: String| Undecodable { text: text.clone(), reason };
    let wire: WireQueued<'_> = serde_json::from_str(&text)
        .map_err(|e| fail(format!("not a lull message ({{topic, idempotency_key, attempt, body}}): {e}")))?;
    let window = serde_json::from_str(wire.body.get()).map_err(|e| fail(format!("body: {e}")))?;
    Ok(QueuedMessage {
        topic: wire.topic,
        idempotency_key: wire.idempotency_key,
        attempt: wire.attempt,
        outcome: wire.outcome,
        body: window,
        window_json: wire.body.get().to_string(),
    })
}

/// Cloudflare's warnings, a list or a map, as lines.
fn warnings(value: Option<serde_json::Value>) -> Vec<String> {
    let text = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    match value {
        Some(serde_json::Value::Array(list)) => list.iter().map(text).collect(),
        Some(serde_json::Value::Object(map)) => map.iter().map(|(k, v)| format!("{k}: {}", text(v))).collect(),
        Some(serde_json::Value::Null) | None => Vec::new(),
        Some(other) => vec![text(&other)],
    }
}

/// Whole seconds, rounded up.
fn whole_seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

impl PullQueue {
    /// A queue to pull from, retrying a pull or an ack at most
    /// [`defaults::PULL_MAX_ATTEMPTS`] times within [`defaults::PULL_MAX_ELAPSED`].
    ///
    /// # Errors
    /// [`Error::Config`] for a base that is not an `http(s)://` URL, or an
    /// empty account id, queue id or token.
    pub fn new(config: PullConfig) -> Result<PullQueue> {
        let base = base_url(&config.base, "the Cloudflare API base URL")?;
        let mut ids = Vec::new();
        for (value, what) in [(&config.account_id, "the Cloudflare account id"), (&config.queue_id, "the queue id")] {
            if value.trim().is_empty() {
                return Err(Error::Config(format!("{what} is empty")));
            }
            ids.push(segment(value.trim(), what).map_err(|e| Error::Config(e.to_string()))?);
        }
        let authorization = bearer(&config.api_token, "the Cloudflare API token")?;
        Ok(PullQueue {
            http: http_client()?,
            messages: format!("{base}/accounts/{}/queues/{}/messages", ids[0], ids[1]),
            config,
            authorization,
            retry: RetryPolicy {
                max_attempts: defaults::PULL_MAX_ATTEMPTS,
                max_elapsed: defaults::PULL_MAX_ELAPSED,
                ..RetryPolicy::default()
            },
        })
    }

    /// This queue retrying its requests with `policy` ([`RetryPolicy::none`]: never).
    pub fn with_retry(mut self, policy: RetryPolicy) -> PullQueue {
        self.retry = policy;
        self
    }

    /// What it was made from.
    pub fn config(&self) -> &PullConfig {
        &self.config
    }

    /// Lease at most `max` messages (1–[`defaults::PULL_MAX_BATCH`]), each
    /// invisible to other pulls for `visibility` (whole milliseconds, at most
    /// [`defaults::MAX_VISIBILITY`]) unless settled first. Each message's body
    /// is decoded as lull's message with its window as `T`.
    ///
    /// # Errors
    /// [`Error::Input`] for `max` or `visibility` out of range;
    /// [`Error::Cloudflare`] for a refusal; [`Error::Transport`]; [`Error::Decode`].
    pub async fn pull<T: DeserializeOwned>(&self, max: u8, visibility: Duration) -> Result<Vec<Message<T>>> {
        Ok(self.pull_with_backlog(max, visibility).await?.messages)
    }

    /// [`PullQueue::pull`], with the backlog the queue reported.
    ///
    /// # Errors
    /// As [`PullQueue::pull`].
    pub async fn pull_with_backlog<T: DeserializeOwned>(&self, max: u8, visibility: Duration) -> Result<Pulled<T>> {
        if !(1..=defaults::PULL_MAX_BATCH).contains(&max) {
            return Err(Error::Input(format!("a pull takes 1–{} messages, not {max}", defaults::PULL_MAX_BATCH)));
        }
        if visibility.is_zero() || visibility > defaults::MAX_VISIBILITY {
            return Err(Error::Input(format!(
                "a visibility timeout is above zero and at most {} s, not {visibility:?}",
                defaults::MAX_VISIBILITY.as_secs()
            )));
        }
        let body = serde_json::json!({"batch_size": max, "visibility_timeout_ms": visibility.as_millis()});
        let result: PullResult = self.post("pull", &body).await?;
        let messages = result
            .messages
            .into_iter()
            .map(|m| Message {
                content: decode_queued(&m.body),
                id: m.id,
                lease_id: LeaseId(m.lease_id),
                timestamp_ms: m.timestamp_ms,
                attempts: m.attempts,
            })
            .collect();
        Ok(Pulled { messages, backlog: result.message_backlog_count })
    }

    /// [`PullQueue::pull`], split by what this run already handled: a
    /// message whose idempotency key `seen` holds (a redelivery, or a
    /// window's copy) goes to `duplicates`, the rest to `messages`. Ack the
    /// duplicates ([`Fresh::duplicate_leases`], [`PullQueue::settle`]) rather
    /// than handling them twice, once the messages are in hand (so a failed
    /// ack leaves no message unaccounted for). Record each key in `seen` once
    /// its window is handled.
    ///
    /// # Errors
    /// As [`PullQueue::pull`].
    pub async fn pull_new<T: DeserializeOwned>(&self, max: u8, visibility: Duration, seen: &Seen) -> Result<Fresh<T>> {
        let (duplicates, messages) = (self.pull::<T>(max, visibility).await?)
            .into_iter()
            .partition(|m| m.idempotency_key().is_some_and(|key| seen.contains(key)));
        Ok(Fresh { messages, duplicates })
    }

    /// Ack `acks` and give `retries` back to the queue, in one request (none
    /// when both are empty).
    ///
    /// # Errors
    /// [`Error::Input`] for a retry delay over [`defaults::MAX_RETRY_DELAY`];
    /// otherwise as [`PullQueue::pull`].
    pub async fn settle(&self, acks: &[LeaseId], retries: &[Retry]) -> Result<Settled> {
        if acks.is_empty() && retries.is_empty() {
            return Ok(Settled::default());
        }
        let mut wire_retries = Vec::with_capacity(retries.len());
        for retry in retries {
            let mut entry = serde_json::json!({"lease_id": retry.lease_id});
            if let Some(delay) = retry.delay {
                if delay > defaults::MAX_RETRY_DELAY {
                    return Err(Error::Input(format!(
                        "a retry's delay is at most {} s, not {delay:?}",
                        defaults::MAX_RETRY_DELAY.as_secs()
                    )));
                }
                entry["delay_seconds"] = whole_seconds(delay).into();
            }
            wire_retries.push(entry);
        }
        let acks: Vec<_> = acks.iter().map(|lease| serde_json::json!({"lease_id": lease})).collect();
        let body = serde_json::json!({"acks": acks, "retries": wire_retries});
        let result: AckResult = self.post("ack", &body).await?;
        Ok(Settled { acked: result.ack_count, retried: result.retry_count, warnings: warnings(result.warnings) })
    }

    /// `POST {messages}/{what}` with `body`, retried; the envelope's `result`.
    async fn post<R: DeserializeOwned>(&self, what: &'static str, body: &serde_json::Value) -> Result<R> {
        let url = format!("{}/{what}", self.messages);
        let body = body.to_string();
        retrying(&self.retry, None, || async {
            let response = self
                .http
                .post(&url)
                .header("authorization", &self.authorization)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await
                .map_err(Error::Transport)?;
            let status = response.status().as_u16();
            let wait = retry_after(&response);
            let text = response.text().await.map_err(Error::Transport)?;
            let envelope = serde_json::from_str::<Envelope<R>>(&text);
            match envelope {
                Ok(Envelope { success: true, result: Some(result), .. }) if status < 400 => Ok(result),
                Ok(Envelope { success, errors, .. }) if !success || status >= 400 => {
                    Err(Error::Cloudflare(CloudflareError { what, status, errors, retry_after: wait }))
                }
                Ok(_) => {
                    Err(Error::Decode { what: format!("Cloudflare {what}"), detail: "success without a result".into() })
                }
                Err(_) if status >= 400 => {
                    let errors = vec![CloudflareMessage { code: 0, message: excerpt(&text) }];
                    Err(Error::Cloudflare(CloudflareError { what, status, errors, retry_after: wait }))
                }
                Err(e) => Err(Error::Decode { what: format!("Cloudflare {what}"), detail: e.to_string() }),
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    #[test]
    fn bodies_decode_from_text_or_object_keeping_the_window_byte_for_byte() {
        let message =
            r#"{"topic":"orders","idempotency_key":"orders/c1/k.3","attempt":2,"body":{"window":3, "n":1.0e2}}"#;
        let as_text = raw(&serde_json::to_string(message).unwrap());
        for body in [as_text, raw(message)] {
            let queued = decode_queued::<serde_json::Value>(&body).unwrap();
            assert_eq!((queued.topic.as_str(), queued.idempotency_key.as_str()), ("orders", "orders/c1/k.3"));
            assert_eq!(queued.window_json, r#"{"window":3, "n":1.0e2}"#);
            assert_eq!(queued.body["window"], 3);
            assert_eq!(queued.lull_attempt(1), 2);
            assert_eq!(queued.lull_attempt(3), 4);
            assert_eq!(queued.lull_attempt(0), 2);
        }
        // A window `serde_json::Value` cannot hold (a number out of its range)
        // still comes through as text, with a raw `T`.
        let huge = r#"{"topic":"t","idempotency_key":"t/k/x.1","attempt":1,"body":{"n":1e400}}"#;
        assert!(decode_queued::<serde_json::Value>(&raw(huge)).is_err());
        let kept = decode_queued::<Box<RawValue>>(&raw(huge)).unwrap();
        assert_eq!((kept.window_json.as_str(), kept.body.get()), (r#"{"n":1e400}"#, r#"{"n":1e400}"#));
        let not_lull = decode_queued::<serde_json::Value>(&raw(r#""plain text""#)).unwrap_err();
        assert_eq!(not_lull.text, "plain text");
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Typed {
            window: String,
        }
        assert!(decode_queued::<Typed>(&raw(message)).unwrap_err().reason.starts_with("body:"));
    }

    #[test]
    fn warnings_come_as_a_list_or_a_map() {
        assert_eq!(warnings(Some(serde_json::json!(["a", 1]))), ["a", "1"]);
        assert_eq!(warnings(Some(serde_json::json!({"lease-1": "expired"}))), ["lease-1: expired"]);
        assert!(warnings(None).is_empty());
        assert_eq!(whole_seconds(Duration::from_millis(1_001)), 2);
        assert_eq!(whole_seconds(Duration::from_secs(5)), 5);
    }

    #[test]
    fn configuration_is_checked() {
        let ok =
            PullQueue::new(PullConfig { base: "http://127.0.0.1:9/api/".into(), ..PullConfig::new("acc", "q", "t") })
                .unwrap();
        assert_eq!(ok.messages, "http://127.0.0.1:9/api/accounts/acc/queues/q/messages");
        assert!(matches!(PullQueue::new(PullConfig::new("", "q", "t")), Err(Error::Config(_))));
        assert!(matches!(PullQueue::new(PullConfig::new("a", "q", "")), Err(Error::Config(_))));
        let bad = PullConfig { base: "nope".into(), ..PullConfig::new("a", "q", "t") };
        assert!(matches!(PullQueue::new(bad), Err(Error::Config(_))));
    }
}
