//! The demo receiver (`LULL_DEMO_SINK = "on"`, for local use): `POST /sink`
//! verifies the signature and keeps the delivery; `GET /sink` (admin token)
//! lists the last ones. It lives in the isolate's memory: a demo, not a store.

use std::cell::RefCell;
use std::collections::VecDeque;

use serde_json::{Value, json};
use worker::{Request, Response};

use super::config::Config;
use super::http::{self, internal, now_ms};
use crate::api_error::ApiError;
use crate::delivery::{ATTEMPT_HEADER, IDEMPOTENCY_HEADER};
use crate::route::{Op, Tokens};
use crate::signing;

const KEEP: usize = 100;

thread_local! {
    static RECEIVED: RefCell<VecDeque<Value>> = const { RefCell::new(VecDeque::new()) };
}

/// Serve `/sink`.
pub async fn handle(
    mut req: Request,
    config: &Config,
    post: bool,
    tokens: &Tokens<'_>,
    auth: Option<&str>,
) -> Result<Response, ApiError> {
    if !config.demo_sink {
        return Err(ApiError::NotFound("route \"/sink\"".into()));
    }
    if !post {
        tokens.authorize(auth, Op::Status)?;
        let received: Vec<Value> = RECEIVED.with_borrow(|r| r.iter().cloned().collect());
        return http::json(200, &json!({"received": received})).map_err(internal);
    }
    let header = |name: &str| req.headers().get(name).ok().flatten();
    let (signature, idempotency_key, attempt) =
        (header(signing::HEADER), header(IDEMPOTENCY_HEADER), header(ATTEMPT_HEADER));
    let body = req.bytes().await.map_err(internal)?;
    let verified = signature
        .as_deref()
        .map(|s| signing::verify(config.signing_secret.as_bytes(), s, &body, now_ms() / 1000, 300))
        .map(|r| r.map(|_| ()).map_err(|e| e.to_string()));
    let Some(Ok(())) = verified else {
        let why = verified.and_then(Result::err).unwrap_or_else(|| "no signature".into());
        return http::json(401, &json!({"error": {"code": "bad_signature", "message": why}})).map_err(internal);
    };
    let delivery: Value = serde_json::from_slice(&body).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    let entry = json!({"received_at": now_ms(), "idempotency_key": idempotency_key, "attempt": attempt,
                       "delivery": delivery});
    let duplicate = RECEIVED.with_borrow_mut(|r| {
        let seen = r.iter().any(|e| e["idempotency_key"] == entry["idempotency_key"]);
        r.push_back(entry);
        while r.len() > KEEP {
            r.pop_front();
        }
        seen
    });
    http::json(200, &json!({"ok": true, "duplicate": duplicate})).map_err(internal)
}
