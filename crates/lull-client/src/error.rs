//! The crate's one error type, [`Error`], and what it carries: lull-edge's
//! refusals ([`ApiError`], its [`ErrorCode`]) and Cloudflare's ([`CloudflareError`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::answer::BatchResult;
use crate::code::ErrorCode;

/// Everything a call of this crate can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// lull-edge refused the request (after the retries a retryable refusal gets).
    #[error(transparent)]
    Api(#[from] ApiError),
    /// Cloudflare's API refused a pull or an ack (`success: false`, or an error status).
    #[error(transparent)]
    Cloudflare(#[from] CloudflareError),
    /// No answer: connecting, sending or reading failed (after retries).
    #[error("transport: {0}")]
    Transport(#[source] reqwest::Error),
    /// An answer arrived but is not what the API promises.
    #[error("unexpected answer from {what}: {detail}")]
    Decode {
        /// Which answer (the route or the message).
        what: String,
        /// What was wrong with it.
        detail: String,
    },
    /// A setting is missing or invalid (a base URL, a token).
    #[error("configuration: {0}")]
    Config(String),
    /// The caller's input breaks a rule checked before sending (nothing was sent).
    #[error("invalid input: {0}")]
    Input(String),
    /// A batch split into several requests failed part way: `results` are the
    /// answers of the requests that went through (in the batch's order, from
    /// its first event), `error` what stopped the next one.
    #[error("batch stopped after {} events: {error}", results.len())]
    PartialBatch {
        /// Results of the events sent before the failure.
        results: Vec<BatchResult>,
        /// The failure.
        error: Box<Error>,
    },
}

impl Error {
    /// Whether trying the same call again later could succeed: a transport
    /// failure, or a refusal whose status is retryable (429, 502, 503, 504).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Transport(_) => true,
            Error::Api(e) => retryable_status(e.status),
            Error::Cloudflare(e) => retryable_status(e.status),
            Error::PartialBatch { error, .. } => error.is_transient(),
            Error::Decode { .. } | Error::Config(_) | Error::Input(_) => false,
        }
    }
}

/// A refusal by lull-edge: its status and its error body
/// (`{"error": {"code", "message", "request_id"}}`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{status} {code}: {message}{}", request_id.as_deref().map(|id| format!(" (request id {id})")).unwrap_or_default())]
pub struct ApiError {
    /// The HTTP status.
    pub status: u16,
    /// The error's code; [`ErrorCode::Other`] with an empty text when the body
    /// was not lull-edge's error shape (a proxy's page, say).
    pub code: ErrorCode,
    /// The API's sentence for people (or the start of a non-JSON body).
    pub message: String,
    /// Names the worker's log line with the detail.
    pub request_id: Option<String>,
    /// The answer's `Retry-After`, if it had one.
    pub retry_after: Option<Duration>,
}

/// Statuses retried: too many requests, and a gateway or the service unavailable.
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 429 | 502 | 503 | 504)
}

/// A refusal by Cloudflare's API: `{"success": false, "errors": [{code, message}]}`
/// or an error status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Cloudflare API {what} answered {status}: {}", describe(errors))]
pub struct CloudflareError {
    /// Which call (`pull` or `ack`).
    pub what: &'static str,
    /// The HTTP status.
    pub status: u16,
    /// Cloudflare's errors (empty if the body had none).
    pub errors: Vec<CloudflareMessage>,
    /// The answer's `Retry-After`, if it had one.
    pub retry_after: Option<Duration>,
}

/// One of Cloudflare's `errors` (or `messages`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloudflareMessage {
    /// Cloudflare's numeric code (0 when absent).
    #[serde(default)]
    pub code: i64,
    /// Its text.
    #[serde(default)]
    pub message: String,
}

fn describe(errors: &[CloudflareMessage]) -> String {
    if errors.is_empty() {
        return "no error detail".into();
    }
    errors.iter().map(|e| format!("{} {}", e.code, e.message)).collect::<Vec<_>>().join("; ")
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_ones_are_kept() {
        assert_eq!(ErrorCode::parse("too_many_events"), ErrorCode::TooManyEvents);
        assert_eq!(ErrorCode::IdempotencyKeyReused.as_str(), "idempotency_key_reused");
        let other: ErrorCode = serde_json::from_str("\"brand_new\"").unwrap();
        assert_eq!(other, ErrorCode::Other("brand_new".into()));
        assert_eq!(serde_json::to_string(&other).unwrap(), "\"brand_new\"");
    }
}
