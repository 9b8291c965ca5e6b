//! The crate's one error type, [`Error`], and what it carries: lull-edge's
//! refusals ([`ApiError`], its [`ErrorCode`]) and Cloudflare's ([`CloudflareError`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::producer::BatchResult;

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
            Error::Api(e) => crate::retry::retryable_status(e.status),
            Error::Cloudflare(e) => crate::retry::retryable_status(e.status),
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

/// A string enum of the API that may grow: unknown values are kept as `Other`.
macro_rules! open_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A value this version does not know, as sent.
            Other(String),
        }

        impl $name {
            /// The value as the API writes it.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)*
                    $name::Other(text) => text,
                }
            }

            /// The value the API writes as `text`.
            pub fn parse(text: &str) -> Self {
                match text {
                    $($text => $name::$variant,)*
                    other => $name::Other(other.to_string()),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> ::std::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {
                let text = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(deserializer)?;
                Ok($name::parse(&text))
            }
        }
    };
}
pub(crate) use open_enum;

open_enum! {
    /// lull-edge's error codes (openapi.yaml's `ErrorCode`), each with one status.
    ErrorCode {
        /// 404: the topic is not configured.
        UnknownTopic = "unknown_topic",
        /// 404: no such route, dead letter or window.
        NotFound = "not_found",
        /// 405: the route takes other methods.
        MethodNotAllowed = "method_not_allowed",
        /// 401: no token, an unknown one, or a client token that does not verify now.
        Unauthorized = "unauthorized",
        /// 403: a token outside its scope.
        Forbidden = "forbidden",
        /// 403: a browser origin `LULL_CORS_ORIGINS` does not list.
        OriginNotAllowed = "origin_not_allowed",
        /// 400: the body is not JSON.
        MalformedJson = "malformed_json",
        /// 413: a body over its limit.
        PayloadTooLarge = "payload_too_large",
        /// 413: a batch of more than 1,000 events.
        TooManyItems = "too_many_items",
        /// 400: the key breaks the key rules.
        InvalidKey = "invalid_key",
        /// 400: a query parameter unknown or out of range.
        BadQuery = "bad_query",
        /// 400: the body is JSON but not what the route takes.
        BadRequest = "bad_request",
        /// 400: an idempotency key that is not 1–200 printable ASCII characters.
        InvalidIdempotencyKey = "invalid_idempotency_key",
        /// 429: the key holds its topic's `max_pending_windows`.
        TooManyPending = "too_many_pending",
        /// 429: a client token holder's `events_per_minute` (or budget across keys) is spent.
        TooManyEvents = "too_many_events",
        /// 429: a queue topic keeps as many dead letters as it may.
        DeadLettersFull = "dead_letters_full",
        /// 409: a queue dead letter's replay is being sent.
        ReplayInProgress = "replay_in_progress",
        /// 409: an idempotency key came back with another body.
        IdempotencyKeyReused = "idempotency_key_reused",
        /// 409: minting a client token for a topic that accepts none.
        ClientTokensOff = "client_tokens_off",
        /// 503: storage or the alarm failed; nothing changed.
        Unavailable = "unavailable",
        /// 500: the worker's configuration is missing or invalid.
        Config = "config",
        /// 500: the runtime failed.
        Internal = "internal",
    }
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
