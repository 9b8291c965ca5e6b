//! The demo receiver (`LULL_DEMO_SINK = "on"`, for local use): `POST /sink`
//! verifies the Standard Webhooks signature (with the secrets of the topic the
//! body names) and keeps the delivery; `GET /sink` (admin token) lists the
//! last ones. `PUT /sink/failing/{key}` makes it refuse that key's
//! deliveries (`500`, kept in the list as refused) until `DELETE`, to show
//! retries, dead letters and replays; `PUT /sink/answer/throttle` (`429`
//! with `Retry-After`) or `…/gone` (`410`) answers every delivery so until
//! `DELETE /sink/answer`, to show a paused and a disabled target. It lives in
//! the isolate's memory: a demo, not a store.

use std::cell::RefCell;
use std::collections::{BTreeSet, VecDeque};

use serde_json::{Value, json};

use crate::delivery::body::{ATTEMPT_HEADER, IDEMPOTENCY_HEADER};
use crate::delivery::signing;
use crate::demo::route::{SINK_RETRY_AFTER_S, SinkAnswer};
use crate::error::ApiError;
use crate::names::Key;
use crate::runtime::config::Config;
use crate::runtime::http::{self, Incoming, Reply, now_ms};

/// Accepted deliveries kept (the newest); refused ones are kept apart, as many.
const KEEP: usize = 100;
/// Keys the sink refuses at most at once.
const MAX_FAILING: usize = 64;

thread_local! {
    static RECEIVED: RefCell<VecDeque<Value>> = const { RefCell::new(VecDeque::new()) };
    static REFUSED: RefCell<VecDeque<Value>> = const { RefCell::new(VecDeque::new()) };
    static FAILING: RefCell<BTreeSet<String>> = const { RefCell::new(BTreeSet::new()) };
    static ANSWER: std::cell::Cell<Option<SinkAnswer>> = const { std::cell::Cell::new(None) };
}

/// Serve `PUT /sink/answer/{mode}` (`Some`) or `DELETE /sink/answer` (its admin token was checked).
pub(super) fn answer(answer: Option<SinkAnswer>) -> Result<Reply, ApiError> {
    ANSWER.set(answer);
    http::json(200, &json!({"answer": answer_name(answer)}))
}

fn answer_name(answer: Option<SinkAnswer>) -> &'static str {
    match answer {
        None => "ok",
        Some(SinkAnswer::Throttle) => "throttle",
        Some(SinkAnswer::Gone) => "gone",
    }
}

/// Serve `PUT`/`DELETE /sink/failing/{key}` (its admin token was checked).
pub(super) fn failing(key: &Key, on: bool) -> Result<Reply, ApiError> {
    let failing = FAILING.with_borrow_mut(|f| {
        if on && !f.contains(key.as_str()) && f.len() >= MAX_FAILING {
            return Err(ApiError::BadQuery(format!("the sink refuses at most {MAX_FAILING} keys at once")));
        }
        if on {
            f.insert(key.as_str().to_string());
        } else {
            f.remove(key.as_str());
        }
        Ok(f.iter().cloned().collect::<Vec<_>>())
    })?;
    http::json(200, &json!({"failing": failing}))
}

/// `GET /sink`: `{"received": [deliveries and refusals, oldest first], "failing": [keys]}`.
pub(super) fn listed() -> Value {
    let mut received: Vec<Value> = RECEIVED.with_borrow(|r| r.iter().cloned().collect());
    received.extend(REFUSED.with_borrow(|r| r.iter().cloned().collect::<Vec<_>>()));
    received.sort_by_key(|e| e["received_at"].as_u64());
    let failing: Vec<String> = FAILING.with_borrow(|f| f.iter().cloned().collect());
    json!({"received": received, "failing": failing, "answer": answer_name(ANSWER.get())})
}

/// Serve `GET /sink` (its admin token was checked): [`listed`].
pub(super) fn listed_reply() -> Result<Reply, ApiError> {
    http::json(200, &listed())
}

/// Serve `POST /sink`: verify the delivery, keep it, answer as the failing switch says.
pub(super) async fn receive(req: &Incoming, config: &Config) -> Result<Reply, ApiError> {
    let header = |name: &str| req.header(name);
    let (id, timestamp, signature) =
        (header(signing::ID_HEADER), header(signing::TIMESTAMP_HEADER), header(signing::SIGNATURE_HEADER));
    let (idempotency_key, attempt) = (header(IDEMPOTENCY_HEADER), header(ATTEMPT_HEADER));
    let body = req.bytes().await?;
    let (Some(id), Some(timestamp), Some(signature)) = (id, timestamp, signature) else {
        let why = "no webhook-id, webhook-timestamp or webhook-signature";
        return Err(ApiError::BadSignature(why.into()));
    };
    // The secrets of the topic the body names (a topic with its own signs with
    // those alone); a body claiming another topic simply fails to verify.
    let parsed: Result<Value, _> = serde_json::from_slice(&body);
    let topic = parsed.as_ref().ok().and_then(|d| d["topic"].as_str()).unwrap_or_default();
    let secrets = config.signing.for_topic(topic);
    signing::verify(secrets, &id, &timestamp, &signature, &body, now_ms() / 1000, signing::DEFAULT_TOLERANCE_SECS)
        .map_err(|e| ApiError::BadSignature(e.to_string()))?;
    let delivery = parsed.map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    let refused = delivery["key"].as_str().is_some_and(|k| FAILING.with_borrow(|f| f.contains(k)));
    let switched = ANSWER.get();
    let status = match switched {
        Some(SinkAnswer::Throttle) => 429,
        Some(SinkAnswer::Gone) => 410,
        None if refused => 500,
        None => 200,
    };
    let refused = status != 200;
    let entry = json!({"received_at": now_ms(), "idempotency_key": idempotency_key, "attempt": attempt,
                       "status": status, "delivery": delivery});
    let keep = |r: &mut VecDeque<Value>, entry: Value| {
        r.push_back(entry);
        while r.len() > KEEP {
            r.pop_front();
        }
    };
    let duplicate = RECEIVED.with_borrow(|r| r.iter().any(|e| e["idempotency_key"] == entry["idempotency_key"]));
    if refused {
        REFUSED.with_borrow_mut(|r| keep(r, entry));
    } else {
        RECEIVED.with_borrow_mut(|r| keep(r, entry));
    }
    match switched {
        Some(SinkAnswer::Throttle) => {
            let retry_after = SINK_RETRY_AFTER_S.to_string();
            let body = json!({"error": {"code": "throttled", "message": "the demo sink's answer switch"}});
            let headers = [("content-type", "application/json"), ("retry-after", retry_after.as_str())];
            return http::reply(429, Some(&body.to_string()), &headers);
        }
        Some(SinkAnswer::Gone) => {
            let body = json!({"error": {"code": "gone", "message": "the demo sink's answer switch"}});
            return http::reply(410, Some(&body.to_string()), &[("content-type", "application/json")]);
        }
        None if refused => return Err(ApiError::SinkFailing),
        None => {}
    }
    http::json(200, &json!({"ok": true, "duplicate": duplicate}))
}
