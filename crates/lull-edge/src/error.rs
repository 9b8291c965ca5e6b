//! The crate's one error, [`ApiError`]: what every route, key object and gate
//! object answers when a request fails, as `{"error": {"code", "message"}}`
//! with a fixed status per code (the HTTP API re-exports it: `crate::http::ApiError`).

use serde::Serialize;

/// `Retry-After` when storage failed (seconds): [`ApiError::Unavailable`]'s.
pub(crate) const UNAVAILABLE_RETRY_SECS: u64 = 1;

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
    /// `401 unauthorized`: a client token that does not verify now (the reason: expired,
    /// not yet valid, bad signature, malformed, another algorithm).
    BadClientToken(String),
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
    /// `413 too_many_items`: a batch of more events than it may hold.
    TooManyItems {
        /// The most a batch holds.
        limit: usize,
    },
    /// One event of a batch is wrong (its status and code): nothing of the batch was stored.
    BatchItem {
        /// Its place in the batch, from 0.
        index: usize,
        /// What is wrong with it.
        error: Box<ApiError>,
    },
    /// `400 invalid_key`: a key (in the path, in a batch's event, in a client
    /// token's request) is not one: empty, too long, not UTF-8, with control
    /// characters, or a path's dot segment (`.`, `..`).
    InvalidKey(String),
    /// `400 bad_request`: the body is JSON but not what the route takes.
    BadRequest(String),
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
    /// `429 too_many_events`: the client token's `events_per_minute` for this key is used up; nothing was stored.
    TooManyEvents {
        /// The bound.
        per_minute: u32,
        /// When to try again (seconds, for `Retry-After`).
        retry_after_secs: u64,
    },
    /// `429 too_many_events`: a client token with a `key_prefix` has posted as
    /// many events across its keys as its holder may this minute (the
    /// `LULL_CLIENT_RATE` binding's limit); nothing was stored.
    ClientBudgetSpent {
        /// When to try again (seconds, for `Retry-After`).
        retry_after_secs: u64,
    },
    /// `409 idempotency_key_reused`: the caller's `Idempotency-Key` came with
    /// another body within the topic's `dedupe_window_ms`; nothing was stored.
    IdempotencyKeyReused,
    /// `409 client_tokens_off`: the topic accepts no client tokens (it sets
    /// neither `client_tokens` nor `client_token_secret_env`), so none is minted.
    ClientTokensOff(String),
    /// `503 unavailable`: storage or the alarm failed; the operation left the
    /// key as if it never ran.
    Unavailable {
        /// What failed.
        why: String,
        /// When to try again (seconds, for `Retry-After`).
        retry_after_secs: u64,
    },
    /// `429 dead_letters_full`: a queue topic keeps its bound of dead letters
    /// (`max_queue_dead_letters` or `max_queue_dead_letter_bytes`): its events
    /// are refused (nothing stored) until dead letters are replayed or
    /// discarded, and a new dead letter waits on the dead-letter queue.
    DeadLettersFull {
        /// When to try again (seconds, for `Retry-After`).
        retry_after_secs: u64,
    },
    /// `409 replay_in_progress`: a queue dead letter is being sent back to its
    /// queue by a replay; it can be neither replayed nor discarded until that
    /// replay ends (then it is gone, or back if the send failed).
    ReplayInProgress(u64),
    /// `401 bad_signature`: the demo sink got a delivery whose signature does
    /// not verify (the demo's only: a build without it never answers so).
    BadSignature(String),
    /// `500 sink_failing`: the demo sink refuses this key's deliveries (its
    /// failing switch; the demo's only).
    SinkFailing,
    /// `503 config`: `GET /healthz` while the configuration is invalid (the reason).
    Unhealthy(String),
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
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<&'a str>,
}

impl ApiError {
    /// `Ok` if `method` is one of `allowed` (a route's methods, `", "`-separated),
    /// else `405 method_not_allowed` naming them (its `Allow` header).
    pub fn check_method(method: &str, allowed: &'static str) -> Result<(), ApiError> {
        if allowed.split(", ").any(|m| m == method) {
            Ok(())
        } else {
            Err(ApiError::MethodNotAllowed { method: method.to_string(), allowed })
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::UnknownTopic(_) | ApiError::NotFound(_) => 404,
            ApiError::MethodNotAllowed { .. } => 405,
            ApiError::Unauthorized | ApiError::BadClientToken(_) => 401,
            ApiError::Forbidden | ApiError::OriginNotAllowed(_) => 403,
            ApiError::MalformedJson(_)
            | ApiError::InvalidKey(_)
            | ApiError::BadQuery(_)
            | ApiError::InvalidIdempotencyKey
            | ApiError::BadRequest(_) => 400,
            ApiError::PayloadTooLarge { .. } | ApiError::TooManyItems { .. } => 413,
            ApiError::BatchItem { error, .. } => error.status(),
            ApiError::ReplayInProgress(_) | ApiError::IdempotencyKeyReused | ApiError::ClientTokensOff(_) => 409,
            ApiError::TooManyPending { .. }
            | ApiError::TooManyEvents { .. }
            | ApiError::ClientBudgetSpent { .. }
            | ApiError::DeadLettersFull { .. } => 429,
            ApiError::Unavailable { .. } | ApiError::Unhealthy(_) => 503,
            ApiError::BadSignature(_) => 401,
            ApiError::SinkFailing => 500,
            ApiError::Config(_) | ApiError::Internal(_) => 500,
        }
    }

    /// The stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::UnknownTopic(_) => "unknown_topic",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed { .. } => "method_not_allowed",
            ApiError::Unauthorized | ApiError::BadClientToken(_) => "unauthorized",
            ApiError::Forbidden => "forbidden",
            ApiError::OriginNotAllowed(_) => "origin_not_allowed",
            ApiError::MalformedJson(_) => "malformed_json",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::TooManyItems { .. } => "too_many_items",
            ApiError::BatchItem { error, .. } => error.code(),
            ApiError::InvalidKey(_) => "invalid_key",
            ApiError::BadQuery(_) => "bad_query",
            ApiError::BadRequest(_) => "bad_request",
            ApiError::InvalidIdempotencyKey => "invalid_idempotency_key",
            ApiError::TooManyPending { .. } => "too_many_pending",
            ApiError::TooManyEvents { .. } | ApiError::ClientBudgetSpent { .. } => "too_many_events",
            ApiError::IdempotencyKeyReused => "idempotency_key_reused",
            ApiError::ClientTokensOff(_) => "client_tokens_off",
            ApiError::Unavailable { .. } => "unavailable",
            ApiError::DeadLettersFull { .. } => "dead_letters_full",
            ApiError::ReplayInProgress(_) => "replay_in_progress",
            ApiError::BadSignature(_) => "bad_signature",
            ApiError::SinkFailing => "sink_failing",
            ApiError::Config(_) | ApiError::Unhealthy(_) => "config",
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
            ApiError::BadClientToken(why) | ApiError::BadRequest(why) => why.clone(),
            ApiError::TooManyEvents { per_minute, .. } => {
                format!("this client token's holder may post {per_minute} events a minute to this key; try again later")
            }
            ApiError::ClientBudgetSpent { .. } => "this client token's holder has posted as many events across its \
                 keys as a minute allows; try again later"
                .into(),
            ApiError::IdempotencyKeyReused => "this Idempotency-Key was used with another body; use a new key \
                 for a new event (nothing was stored)"
                .into(),
            ApiError::ClientTokensOff(topic) => format!(
                "topic {topic:?} accepts no client tokens (set client_tokens = true or client_token_secret_env)"
            ),
            ApiError::Forbidden => "this token may not do that".into(),
            ApiError::OriginNotAllowed(origin) => {
                format!("origin {origin} may not call this API from a browser (LULL_CORS_ORIGINS)")
            }
            ApiError::MalformedJson(why) => format!("the body is not valid JSON: {why}"),
            ApiError::PayloadTooLarge { limit } => format!("the body is over this topic's limit of {limit} bytes"),
            ApiError::TooManyItems { limit } => format!("a batch holds at most {limit} events"),
            ApiError::BatchItem { index, error } => format!("events[{index}]: {}", error.message()),
            ApiError::InvalidKey(why) | ApiError::Config(why) | ApiError::BadQuery(why) | ApiError::Unhealthy(why) => {
                why.clone()
            }
            ApiError::InvalidIdempotencyKey => {
                "Idempotency-Key must be 1 to 200 printable ASCII characters, without spaces".into()
            }
            ApiError::TooManyPending { limit, .. } => {
                format!("this key holds its topic's limit of {limit} pending windows; try again later")
            }
            ApiError::Unavailable { why, .. } => format!("storage is unavailable ({why}); nothing changed, try again"),
            ApiError::DeadLettersFull { .. } => "this topic keeps as many queue dead letters as it may \
                 (max_queue_dead_letters, max_queue_dead_letter_bytes): replay or discard them; nothing was stored"
                .into(),
            ApiError::ReplayInProgress(id) => {
                format!("queue dead letter {id} is being replayed; look again once that replay has ended")
            }
            ApiError::BadSignature(why) => why.clone(),
            ApiError::SinkFailing => "this key's deliveries are refused (the demo's failing switch)".into(),
            ApiError::Internal(why) => format!("internal error: {why}"),
        }
    }

    /// Seconds for a `Retry-After` header, where the error has one.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ApiError::TooManyPending { retry_after_secs, .. }
            | ApiError::TooManyEvents { retry_after_secs, .. }
            | ApiError::ClientBudgetSpent { retry_after_secs }
            | ApiError::DeadLettersFull { retry_after_secs }
            | ApiError::Unavailable { retry_after_secs, .. } => Some(*retry_after_secs),
            _ => None,
        }
    }

    /// The JSON body: `{"error": {"code": …, "message": …}}`, with every detail.
    pub fn to_json(&self) -> String {
        self.body(self.message(), None)
    }

    /// Whether its detail is the operator's only (runtime text, storage
    /// errors, the configuration, which names targets): a caller gets a
    /// generic message and a request id; the log line with that id has the detail.
    pub fn is_private(&self) -> bool {
        matches!(
            self,
            ApiError::Internal(_) | ApiError::Config(_) | ApiError::Unhealthy(_) | ApiError::Unavailable { .. }
        )
    }

    /// The body a caller gets: [`ApiError::to_json`] plus `request_id`, with a
    /// generic message in place of a private error's detail unless `reveal`
    /// (the caller holds an admin token).
    pub fn to_public_json(&self, request_id: &str, reveal: bool) -> String {
        let message = match self {
            _ if reveal || !self.is_private() => self.message(),
            ApiError::Config(_) | ApiError::Unhealthy(_) => {
                "the worker's configuration is invalid; GET /healthz with an admin token says why".into()
            }
            ApiError::Unavailable { .. } => "storage is unavailable; nothing changed, try again".into(),
            _ => "internal error; the worker's log has the detail under this request_id".into(),
        };
        self.body(message, Some(request_id))
    }

    fn body(&self, message: String, request_id: Option<&str>) -> String {
        let body = Body { error: Detail { code: self.code(), message, request_id } };
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
            (ApiError::BadClientToken("the client token has expired".into()), 401, "unauthorized"),
            (ApiError::BadRequest("key or key_prefix".into()), 400, "bad_request"),
            (ApiError::TooManyEvents { per_minute: 60, retry_after_secs: 12 }, 429, "too_many_events"),
            (ApiError::ClientBudgetSpent { retry_after_secs: 60 }, 429, "too_many_events"),
            (ApiError::IdempotencyKeyReused, 409, "idempotency_key_reused"),
            (ApiError::ClientTokensOff("docs".into()), 409, "client_tokens_off"),
            (ApiError::Forbidden, 403, "forbidden"),
            (ApiError::OriginNotAllowed("https://x.example".into()), 403, "origin_not_allowed"),
            (ApiError::MalformedJson("eof".into()), 400, "malformed_json"),
            (ApiError::PayloadTooLarge { limit: 65_536 }, 413, "payload_too_large"),
            (ApiError::TooManyItems { limit: 1_000 }, 413, "too_many_items"),
            (
                ApiError::BatchItem { index: 3, error: Box::new(ApiError::InvalidIdempotencyKey) },
                400,
                "invalid_idempotency_key",
            ),
            (ApiError::InvalidKey("empty".into()), 400, "invalid_key"),
            (ApiError::BadQuery("limit".into()), 400, "bad_query"),
            (ApiError::InvalidIdempotencyKey, 400, "invalid_idempotency_key"),
            (ApiError::TooManyPending { limit: 10, retry_after_secs: 30 }, 429, "too_many_pending"),
            (ApiError::Unavailable { why: "write".into(), retry_after_secs: 1 }, 503, "unavailable"),
            (ApiError::DeadLettersFull { retry_after_secs: 60 }, 429, "dead_letters_full"),
            (ApiError::Unhealthy("LULL_TOPICS: no topic is configured".into()), 503, "config"),
            (ApiError::Config("LULL_TOPICS: no topic is configured".into()), 500, "config"),
            (ApiError::Internal("storage".into()), 500, "internal"),
            (ApiError::BadSignature("no webhook-id".into()), 401, "bad_signature"),
            (ApiError::SinkFailing, 500, "sink_failing"),
        ];
        for (error, status, code) in cases {
            assert_eq!((error.status(), error.code()), (status, code));
            let json: serde_json::Value = serde_json::from_str(&error.to_json()).unwrap();
            assert_eq!(json["error"]["code"], code);
            assert!(!json["error"]["message"].as_str().unwrap().is_empty());
            assert_eq!(json.as_object().unwrap().len(), 1);
            let public: serde_json::Value = serde_json::from_str(&error.to_public_json("r1", false)).unwrap();
            assert_eq!(
                (public["error"]["code"].as_str(), public["error"]["request_id"].as_str()),
                (Some(code), Some("r1"))
            );
        }
    }

    #[test]
    fn private_detail_reaches_admins_and_the_log_only() {
        let secret = "https://billing.internal/hook?token=abc";
        for error in [
            ApiError::Config(format!("topic \"t\": target {secret:?} is http://")),
            ApiError::Internal(format!("fetch {secret} failed")),
            ApiError::Unavailable { why: format!("SQLITE_FULL near {secret}"), retry_after_secs: 1 },
        ] {
            assert!(error.is_private());
            let public = error.to_public_json("r2", false);
            assert!(!public.contains("billing") && public.contains("\"request_id\":\"r2\""), "{public}");
            assert!(error.to_public_json("r2", true).contains("billing"), "an admin sees the detail");
        }
        let public = ApiError::MalformedJson("EOF at line 1".into()).to_public_json("r3", false);
        assert!(public.contains("EOF at line 1"), "the caller's own mistakes are explained: {public}");
    }
}
