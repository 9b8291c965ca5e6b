//! Errors the HTTP API returns: `{"error": {"code", "message"}}` with a fixed status per code.

use serde::Serialize;

/// What went wrong with a request. A rejected request changes nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiError {
    /// `404 unknown_topic`: the topic is not configured.
    UnknownTopic(String),
    /// `404 not_found`: no such route (or no such dead letter).
    NotFound(String),
    /// `405 method_not_allowed`: the route exists, the method does not.
    MethodNotAllowed {
        /// The method used.
        method: String,
        /// The methods the route takes.
        allowed: &'static str,
    },
    /// `401 unauthorized`: no bearer token, or an unknown one.
    Unauthorized,
    /// `403 forbidden`: a valid token that may not do this (the ingest token on an admin route).
    Forbidden,
    /// `403 origin_not_allowed`: a browser preflight from an origin `LULL_CORS_ORIGINS` does not list.
    OriginNotAllowed(String),
    /// `400 malformed_json`: the body is not JSON.
    MalformedJson(String),
    /// `413 payload_too_large`: the body is over the topic's limit.
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// `400 invalid_key`: the key (or topic) in the path is empty, too long or not UTF-8.
    InvalidKey(String),
    /// `400 bad_query`: a query parameter is unknown or out of range.
    BadQuery(String),
    /// `400 invalid_idempotency_key`: the producer's `Idempotency-Key` is not 1–200 printable ASCII characters.
    InvalidIdempotencyKey,
    /// `429 too_many_pending`: the key holds its topic's bound of pending
    /// windows (queued, due, dead letters); nothing was stored.
    TooManyPending {
        /// The bound.
        limit: usize,
        /// When to try again (seconds, for `Retry-After`).
        retry_after_secs: u64,
    },
    /// `503 unavailable`: storage or the alarm failed; the operation left the
    /// key as if it never ran.
    Unavailable {
        /// What failed.
        why: String,
        /// When to try again (seconds, for `Retry-After`).
        retry_after_secs: u64,
    },
    /// `507 dead_letters_full`: a queue topic's gate object keeps its bound of
    /// dead letters; the dead-letter queue keeps retrying this one.
    DeadLettersFull {
        /// The bound.
        limit: usize,
    },
    /// `401 bad_signature`: the demo sink got a delivery whose signature does not verify.
    #[cfg(feature = "demo")]
    BadSignature(String),
    /// `503 sink_failing`: the demo sink refuses this key's deliveries (its failing switch).
    #[cfg(feature = "demo")]
    SinkFailing,
    /// `500 config`: the worker's configuration (`LULL_TOPICS`, a secret) is missing or invalid.
    Config(String),
    /// `500 internal`: storage or the runtime failed; nothing was accepted.
    Internal(String),
}

#[derive(Serialize)]
struct Body<'a> {
    error: Detail<'a>,
}

#[derive(Serialize)]
struct Detail<'a> {
    code: &'a str,
    message: String,
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::UnknownTopic(_) | ApiError::NotFound(_) => 404,
            ApiError::MethodNotAllowed { .. } => 405,
            ApiError::Unauthorized => 401,
            ApiError::Forbidden | ApiError::OriginNotAllowed(_) => 403,
            ApiError::MalformedJson(_)
            | ApiError::InvalidKey(_)
            | ApiError::BadQuery(_)
            | ApiError::InvalidIdempotencyKey => 400,
            ApiError::PayloadTooLarge { .. } => 413,
            ApiError::TooManyPending { .. } => 429,
            ApiError::Unavailable { .. } => 503,
            ApiError::DeadLettersFull { .. } => 507,
            #[cfg(feature = "demo")]
            ApiError::BadSignature(_) => 401,
            #[cfg(feature = "demo")]
            ApiError::SinkFailing => 503,
            ApiError::Config(_) | ApiError::Internal(_) => 500,
        }
    }

    /// The stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::UnknownTopic(_) => "unknown_topic",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed { .. } => "method_not_allowed",
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden => "forbidden",
            ApiError::OriginNotAllowed(_) => "origin_not_allowed",
            ApiError::MalformedJson(_) => "malformed_json",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::InvalidKey(_) => "invalid_key",
            ApiError::BadQuery(_) => "bad_query",
            ApiError::InvalidIdempotencyKey => "invalid_idempotency_key",
            ApiError::TooManyPending { .. } => "too_many_pending",
            ApiError::Unavailable { .. } => "unavailable",
            ApiError::DeadLettersFull { .. } => "dead_letters_full",
            #[cfg(feature = "demo")]
            ApiError::BadSignature(_) => "bad_signature",
            #[cfg(feature = "demo")]
            ApiError::SinkFailing => "sink_failing",
            ApiError::Config(_) => "config",
            ApiError::Internal(_) => "internal",
        }
    }

    /// A sentence for people.
    pub fn message(&self) -> String {
        match self {
            ApiError::UnknownTopic(topic) => format!("topic {topic:?} is not configured"),
            ApiError::NotFound(what) => format!("{what} not found"),
            ApiError::MethodNotAllowed { method, allowed } => format!("{method} is not allowed here; use {allowed}"),
            ApiError::Unauthorized => "a valid bearer token is required".into(),
            ApiError::Forbidden => "this token may not do that".into(),
            ApiError::OriginNotAllowed(origin) => {
                format!("origin {origin} may not call this API from a browser (LULL_CORS_ORIGINS)")
            }
            ApiError::MalformedJson(why) => format!("the body is not valid JSON: {why}"),
            ApiError::PayloadTooLarge { limit } => format!("the body is over this topic's limit of {limit} bytes"),
            ApiError::InvalidKey(why) | ApiError::Config(why) | ApiError::BadQuery(why) => why.clone(),
            ApiError::InvalidIdempotencyKey => {
                "Idempotency-Key must be 1 to 200 printable ASCII characters, without spaces".into()
            }
            ApiError::TooManyPending { limit, .. } => {
                format!("this key holds its topic's limit of {limit} pending windows; try again later")
            }
            ApiError::Unavailable { why, .. } => format!("storage is unavailable ({why}); nothing changed, try again"),
            ApiError::DeadLettersFull { limit } => {
                format!("this topic keeps {limit} dead letters; the queue keeps retrying this one")
            }
            #[cfg(feature = "demo")]
            ApiError::BadSignature(why) => why.clone(),
            #[cfg(feature = "demo")]
            ApiError::SinkFailing => "this key's deliveries are refused (the demo's failing switch)".into(),
            ApiError::Internal(why) => format!("internal error: {why}"),
        }
    }

    /// Seconds for a `Retry-After` header, where the error has one.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ApiError::TooManyPending { retry_after_secs, .. } | ApiError::Unavailable { retry_after_secs, .. } => {
                Some(*retry_after_secs)
            }
            _ => None,
        }
    }

    /// The JSON body: `{"error": {"code": …, "message": …}}`.
    pub fn to_json(&self) -> String {
        let body = Body { error: Detail { code: self.code(), message: self.message() } };
        serde_json::to_string(&body).unwrap_or_else(|_| format!("{{\"error\":{{\"code\":\"{}\"}}}}", self.code()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_its_status_code_and_json_shape() {
        let cases = [
            (ApiError::UnknownTopic("x".into()), 404, "unknown_topic"),
            (ApiError::NotFound("route".into()), 404, "not_found"),
            (ApiError::MethodNotAllowed { method: "PUT".into(), allowed: "POST" }, 405, "method_not_allowed"),
            (ApiError::Unauthorized, 401, "unauthorized"),
            (ApiError::Forbidden, 403, "forbidden"),
            (ApiError::OriginNotAllowed("https://x.example".into()), 403, "origin_not_allowed"),
            (ApiError::MalformedJson("eof".into()), 400, "malformed_json"),
            (ApiError::PayloadTooLarge { limit: 65_536 }, 413, "payload_too_large"),
            (ApiError::InvalidKey("empty".into()), 400, "invalid_key"),
            (ApiError::BadQuery("limit".into()), 400, "bad_query"),
            (ApiError::InvalidIdempotencyKey, 400, "invalid_idempotency_key"),
            (ApiError::TooManyPending { limit: 10, retry_after_secs: 30 }, 429, "too_many_pending"),
            (ApiError::Unavailable { why: "write".into(), retry_after_secs: 1 }, 503, "unavailable"),
            (ApiError::DeadLettersFull { limit: 1_000 }, 507, "dead_letters_full"),
            (ApiError::Config("LULL_TOPICS: no topic is configured".into()), 500, "config"),
            (ApiError::Internal("storage".into()), 500, "internal"),
        ];
        for (error, status, code) in cases {
            assert_eq!((error.status(), error.code()), (status, code));
            let json: serde_json::Value = serde_json::from_str(&error.to_json()).unwrap();
            assert_eq!(json["error"]["code"], code);
            assert!(!json["error"]["message"].as_str().unwrap().is_empty());
            assert_eq!(json.as_object().unwrap().len(), 1);
        }
    }
}
