//! Posting events: one ([`Lull::send`], [`Lull::send_json`]) or many
//! ([`Lull::send_batch`]), each with an idempotency key that is the same on
//! every retry of the call, so a retry never stores an event twice.

use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::answer::{Accepted, BatchResult};
use crate::client::{Call, Lull};
use crate::defaults;
use crate::error::{Error, Result};

/// One event of a batch: `{"key", "event", "idempotency_key"?}` (also one
/// line of the CLI's NDJSON batch file).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchEvent {
    /// The key (1–512 bytes of UTF-8, no control characters, not `.` or `..`).
    pub key: String,
    /// The event, as JSON text sent byte for byte.
    pub event: Box<RawValue>,
    /// The producer's idempotency key; `send_batch` gives each event without
    /// one a key of its own, the same on every retry of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

impl BatchEvent {
    /// An event of `key` from a serialisable value.
    ///
    /// # Errors
    /// [`Error::Input`] if `event` does not serialise to JSON.
    pub fn new<T: Serialize + ?Sized>(key: impl Into<String>, event: &T) -> Result<BatchEvent> {
        let event = serde_json::value::to_raw_value(event).map_err(|e| Error::Input(format!("event: {e}")))?;
        Ok(BatchEvent { key: key.into(), event, idempotency_key: None })
    }
}

/// A fresh idempotency key: `lull-`, the time in ms and 64 random bits, in hex.
pub fn new_idempotency_key() -> String {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    format!("lull-{ms:x}-{:016x}", fastrand::u64(..))
}

/// lull-edge's key rules: 1–512 bytes of UTF-8, no control characters, not `.` or `..`.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("the key is empty".into());
    }
    if key.len() > defaults::KEY_MAX_BYTES {
        return Err(format!("the key is {} bytes, over {}", key.len(), defaults::KEY_MAX_BYTES));
    }
    if key.chars().any(char::is_control) {
        return Err("the key holds a control character".into());
    }
    if key == "." || key == ".." {
        return Err(format!("the key {key:?} is a path's dot segment"));
    }
    Ok(())
}

/// lull-edge's idempotency key rules: 1–200 printable ASCII characters, no spaces.
pub fn check_idempotency_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > defaults::IDEMPOTENCY_KEY_MAX || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "an idempotency key is 1–{} printable ASCII characters without spaces: {key:?}",
            defaults::IDEMPOTENCY_KEY_MAX
        ));
    }
    Ok(())
}

/// `events` (as JSON texts) grouped into requests of at most
/// [`defaults::BATCH_MAX_EVENTS`] events and [`defaults::BATCH_MAX_BYTES`]
/// bytes of body (an event larger than that goes alone), in order.
fn chunks(events: &[String]) -> Vec<&[String]> {
    const WRAPPER: usize = r#"{"events":[]}"#.len();
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, WRAPPER);
    for (i, event) in events.iter().enumerate() {
        let more = event.len() + usize::from(i > start);
        if i > start && (i - start == defaults::BATCH_MAX_EVENTS || bytes + more > defaults::BATCH_MAX_BYTES) {
            chunks.push(&events[start..i]);
            (start, bytes) = (i, WRAPPER);
        }
        bytes += event.len() + usize::from(i > start);
    }
    if start < events.len() {
        chunks.push(&events[start..]);
    }
    chunks
}

impl Lull {
    /// Post one event (any serialisable value) to `key` of `topic`, under a
    /// fresh idempotency key kept across this call's retries.
    ///
    /// # Errors
    /// [`Error::Api`] for a refusal (retryable ones after the retry policy's
    /// bounds), [`Error::Transport`], [`Error::Input`] for the key `.` or `..`.
    pub async fn send<T: Serialize + ?Sized>(&self, topic: &str, key: &str, event: &T) -> Result<Accepted> {
        let json = serde_json::to_string(event).map_err(|e| Error::Input(format!("event: {e}")))?;
        self.send_json(topic, key, &json, None).await
    }

    /// Post one event given as JSON text, sent byte for byte (lull-edge
    /// refuses text that is not JSON: `400 malformed_json`), with
    /// `idempotency_key` or, if `None`, a fresh one; the same on every retry.
    ///
    /// # Errors
    /// As [`Lull::send`].
    pub async fn send_json(
        &self,
        topic: &str,
        key: &str,
        json: &str,
        idempotency_key: Option<&str>,
    ) -> Result<Accepted> {
        let generated;
        let idempotency_key = match idempotency_key {
            Some(given) => given,
            None => {
                generated = new_idempotency_key();
                &generated
            }
        };
        let mut call = Call::new(Method::POST, Lull::key_path(topic, key, "/events")?).body(json.to_string());
        call.idempotency_key = Some(idempotency_key);
        self.call(call).await
    }

    /// Post many events of `topic` (`POST /v1/topics/{topic}/events:batch`):
    /// one result per event, in order. An event without an idempotency key
    /// gets one (this call's key and its place), the same on every retry. A
    /// batch over [`defaults::BATCH_MAX_EVENTS`] events or
    /// [`defaults::BATCH_MAX_BYTES`] bytes goes as several requests, in
    /// order; then every key and idempotency key is checked here first, so a
    /// bad one stops the call before anything is sent.
    ///
    /// Refusals of single keys (`429`, `409`, …) are results, not errors: the
    /// request itself succeeded (`207`), and they are not retried.
    ///
    /// # Errors
    /// [`Error::Input`] for an empty batch (or a bad key of a split one);
    /// [`Error::Api`] when a request is refused whole (`400`, `413`, …);
    /// [`Error::PartialBatch`] when a later request of a split batch fails.
    pub async fn send_batch(&self, topic: &str, events: &[BatchEvent]) -> Result<Vec<BatchResult>> {
        if events.is_empty() {
            return Err(Error::Input("a batch holds at least one event".into()));
        }
        let path = Lull::topic_path(topic, "/events:batch")?;
        let call_key = new_idempotency_key();
        let mut texts = Vec::with_capacity(events.len());
        for (i, event) in events.iter().enumerate() {
            let mut event = event.clone();
            event.idempotency_key.get_or_insert_with(|| format!("{call_key}.{i}"));
            texts.push(serde_json::to_string(&event).map_err(|e| Error::Input(format!("events[{i}]: {e}")))?);
        }
        let chunks = chunks(&texts);
        if chunks.len() > 1 {
            for (i, event) in events.iter().enumerate() {
                check_key(&event.key).map_err(|why| Error::Input(format!("events[{i}]: {why}")))?;
                if let Some(key) = &event.idempotency_key {
                    check_idempotency_key(key).map_err(|why| Error::Input(format!("events[{i}]: {why}")))?;
                }
            }
        }
        #[derive(Deserialize)]
        struct Results {
            results: Vec<BatchResult>,
        }
        let mut results = Vec::with_capacity(events.len());
        for chunk in chunks {
            let body = format!(r#"{{"events":[{}]}}"#, chunk.join(","));
            match self.call::<Results>(Call::new(Method::POST, path.clone()).body(body)).await {
                Ok(answer) if answer.results.len() == chunk.len() => results.extend(answer.results),
                Ok(answer) => {
                    let error = Error::Decode {
                        what: format!("POST {path}"),
                        detail: format!("{} results for {} events", answer.results.len(), chunk.len()),
                    };
                    return Err(partial(results, error));
                }
                Err(error) => return Err(partial(results, error)),
            }
        }
        Ok(results)
    }
}

/// `error`, or — when some requests went through — a [`Error::PartialBatch`].
fn partial(results: Vec<BatchResult>, error: Error) -> Error {
    if results.is_empty() { error } else { Error::PartialBatch { results, error: Box::new(error) } }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::ErrorCode;

    #[test]
    fn batches_split_by_count_and_by_bytes_in_order() {
        let small: Vec<String> = (0..2_500).map(|i| format!("{{\"n\":{i}}}")).collect();
        let sizes: Vec<usize> = chunks(&small).iter().map(|c| c.len()).collect();
        assert_eq!(sizes, [1_000, 1_000, 500]);
        let big = "x".repeat(1_500_000);
        let large: Vec<String> = (0..5).map(|_| big.clone()).collect();
        let split = chunks(&large);
        assert_eq!(split.iter().map(|c| c.len()).collect::<Vec<_>>(), [2, 2, 1]);
        for chunk in &split {
            assert!(chunk.iter().map(String::len).sum::<usize>() + chunk.len() + 13 <= defaults::BATCH_MAX_BYTES);
        }
        let huge = vec!["y".repeat(5_000_000), "z".into()];
        assert_eq!(chunks(&huge).iter().map(|c| c.len()).collect::<Vec<_>>(), [1, 1], "too large goes alone");
    }

    #[test]
    fn keys_and_idempotency_keys_are_checked_as_the_api_does() {
        assert!(check_key("doc-42").is_ok());
        assert!(check_key(&"é".repeat(256)).is_ok());
        assert!(check_key(&"é".repeat(257)).is_err());
        for bad in ["", ".", "..", "a\nb", "a\u{85}b"] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
        assert!(check_idempotency_key(&new_idempotency_key()).is_ok());
        assert!(check_idempotency_key(&"k".repeat(200)).is_ok());
        for bad in ["", "a b", "é", &"k".repeat(201)] {
            assert!(check_idempotency_key(bad).is_err(), "{bad:?}");
        }
        assert_ne!(new_idempotency_key(), new_idempotency_key());
    }

    #[test]
    fn batch_results_decode_both_shapes_and_encode_back() {
        let text = r#"{"results":[{"status":202,"window":3,"seq":12},{"status":429,"error":{"code":"too_many_pending","message":"full","request_id":"4f1c2a9e0b7d3c55"}}]}"#;
        #[derive(Deserialize, Serialize)]
        struct Results {
            results: Vec<BatchResult>,
        }
        let decoded: Results = serde_json::from_str(text).unwrap();
        assert_eq!(decoded.results[0], BatchResult::Accepted(Accepted { window: 3, seq: 12 }));
        let BatchResult::Refused(refused) = &decoded.results[1] else { panic!("{:?}", decoded.results[1]) };
        assert_eq!((refused.status, &refused.code), (429, &ErrorCode::TooManyPending));
        assert_eq!(serde_json::to_string(&decoded).unwrap(), text);
        assert!(serde_json::from_str::<BatchResult>(r#"{"status":202}"#).is_err());
    }
}
