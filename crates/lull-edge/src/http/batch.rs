//! `POST /v1/topics/{topic}/events:batch`: many events of one topic in one
//! request, `{"events": [{"key", "event", "idempotency_key"?}, …]}`. Checked
//! whole before anything is stored ([`parse`]: at most [`MAX_BATCH_EVENTS`]
//! events and [`MAX_BATCH_BYTES`]; a bad event is a `400`/`413` naming it),
//! grouped by key ([`by_key`]: each key's events go to its object in one
//! request, stored in one transaction, all or nothing), and answered per
//! event, in order ([`results`]). Runtime-free.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::http::route::producer_key;
use crate::http::{ObjectAnswer, json_body};
use crate::log::Fact;
use crate::names::Key;

/// Events a batch holds at most.
pub const MAX_BATCH_EVENTS: usize = 1_000;
/// Bytes a batch's body holds at most: 4 MiB.
pub const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

/// One event of a batch, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BatchEvent {
    /// Its key.
    pub key: Key,
    /// Its JSON, as sent.
    pub event: String,
    /// The producer's idempotency key for it, if any.
    pub idempotency_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body<'a> {
    #[serde(borrow)]
    events: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Item<'a> {
    key: String,
    #[serde(borrow)]
    event: &'a RawValue,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// The batch `bytes` holds, every event checked (its key, its size against
/// `max_body_bytes`, its idempotency key); the first bad one is the error.
pub(crate) fn parse(bytes: &[u8], max_body_bytes: usize) -> Result<Vec<BatchEvent>, ApiError> {
    if bytes.len() > MAX_BATCH_BYTES {
        return Err(ApiError::PayloadTooLarge { limit: MAX_BATCH_BYTES });
    }
    let body: Body = json_body(bytes, r#"{"events": [{"key", "event", "idempotency_key"?}, …]}"#)?;
    if body.events.is_empty() {
        return Err(ApiError::BadRequest("the batch holds no event".into()));
    }
    if body.events.len() > MAX_BATCH_EVENTS {
        return Err(ApiError::TooManyItems { limit: MAX_BATCH_EVENTS });
    }
    body.events
        .iter()
        .enumerate()
        .map(|(index, raw)| {
            let at = |error: ApiError| ApiError::BatchItem { index, error: Box::new(error) };
            let item: Item = serde_json::from_str(raw.get()).map_err(|e| {
                at(ApiError::BadRequest(format!(r#"an event is {{"key", "event", "idempotency_key"?}}: {e}"#)))
            })?;
            let key = Key::new(item.key).map_err(at)?;
            if item.event.get().len() > max_body_bytes {
                return Err(at(ApiError::PayloadTooLarge { limit: max_body_bytes }));
            }
            let idempotency_key = producer_key(item.idempotency_key.as_deref()).map_err(at)?;
            Ok(BatchEvent { key, event: item.event.get().to_string(), idempotency_key })
        })
        .collect()
}

/// The batch's keys in the order they first appear, each with its events' places.
pub(crate) fn by_key(events: &[BatchEvent]) -> Vec<(Key, Vec<usize>)> {
    let mut groups: Vec<(Key, Vec<usize>)> = Vec::new();
    let mut at = std::collections::HashMap::new();
    for (index, event) in events.iter().enumerate() {
        let group = *at.entry(event.key.clone()).or_insert_with(|| {
            groups.push((event.key.clone(), Vec::new()));
            groups.len() - 1
        });
        groups[group].1.push(index);
    }
    groups
}

/// One key's answer: each of its events' `{"window", "seq"}` (as its object
/// wrote it), in order, or the status and error every one of them got
/// (nothing of that key was stored).
pub(crate) type KeyAnswer = Result<Vec<Box<RawValue>>, (u16, Value)>;

/// A key's `202` to its events, `{"accepted": […]}`: each event's entry, as
/// its object wrote it (borrowed while a coalesced answer is shared out,
/// owned once it is a [`KeyAnswer`]).
#[derive(Deserialize, Serialize)]
pub(crate) struct Accepted<T> {
    /// The entries, one per event, in order.
    pub accepted: Vec<T>,
}

/// One key's answer read from its object's: `202 {"accepted": […]}` is its
/// events' entries; anything else is every event's error; an answer that is
/// not JSON is a failed share (`failed`: [`key_failed`] under a new request id).
pub(crate) fn read_key_answer(answer: &ObjectAnswer, failed: impl FnOnce(&ApiError) -> (u16, Value)) -> KeyAnswer {
    // Entries are kept as written: each becomes its event's result as it is, with its status.
    if answer.status == 202
        && let Ok(Accepted::<Box<RawValue>> { accepted }) = serde_json::from_str(&answer.body)
    {
        return Ok(accepted);
    }
    match serde_json::from_str(&answer.body) {
        Ok(body) => Err((answer.status, body)),
        Err(e) => Err(failed(&ApiError::Internal(format!("a key's answer to a batch: {e}")))),
    }
}

/// What every event of a key gets when its share failed with `error` before
/// its object answered: its status and public error under `request_id` (one
/// per failed share), and the log line's fact for a private error, whose
/// detail only the log gets under that id ([`Fact::error`]).
pub(crate) fn key_failed(error: &ApiError, request_id: &str) -> ((u16, Value), Option<Fact>) {
    let public = serde_json::from_str(&error.to_public_json(request_id, false)).unwrap_or_default();
    ((error.status(), public), Fact::error(error, request_id))
}

/// The batch's answer as JSON text, `{"results": […]}`, one per event in the
/// batch's order: `{"status": 202, "window", "seq"}` (its key's entry, with
/// its status put first) or `{"status", "error"}` (a key's error, written once).
pub(crate) fn results(count: usize, answers: Vec<(Vec<usize>, KeyAnswer)>) -> String {
    const NO_ANSWER: &str = r#"{"status":500,"error":{"code":"internal","message":"no answer for this event"}}"#;
    let mut results: Vec<Option<String>> = vec![None; count];
    let mut put = |place: usize, result: String| {
        if let Some(slot) = results.get_mut(place) {
            *slot = Some(result);
        }
    };
    for (places, answer) in answers {
        match answer {
            Ok(accepted) => {
                let mut accepted = accepted.into_iter();
                for place in places {
                    let result = accepted.next().and_then(|entry| with_status(entry.get(), 202));
                    put(place, result.unwrap_or_else(|| NO_ANSWER.to_string()));
                }
            }
            Err((status, error)) => {
                let result = json!({"status": status, "error": error["error"]}).to_string();
                for place in places {
                    put(place, result.clone());
                }
            }
        }
    }
    let mut text = String::with_capacity(16 + results.iter().flatten().map(|r| r.len() + 1).sum::<usize>());
    text.push_str(r#"{"results":["#);
    for (i, result) in results.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(result.as_deref().unwrap_or("null"));
    }
    text.push_str("]}");
    text
}

/// A JSON object's text with `"status": status` as its first field, or
/// `None` if `object` is not an object.
fn with_status(object: &str, status: u16) -> Option<String> {
    let fields = object.trim().strip_prefix('{')?;
    let rest = fields.trim_start();
    let sep = if rest.starts_with('}') { "" } else { "," };
    Some(format!(r#"{{"status":{status}{sep}{rest}"#))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(events: &str) -> Vec<u8> {
        format!(r#"{{"events": [{events}]}}"#).into_bytes()
    }

    #[test]
    fn a_batch_is_checked_whole_and_a_bad_event_is_named() {
        let ok = parse(
            &body(r#"{"key": "a", "event": {"n": 1}}, {"key": "b", "event": [1], "idempotency_key": "p-1"}"#),
            100,
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!((ok[0].key.as_str(), ok[0].event.as_str()), ("a", r#"{"n": 1}"#));
        assert_eq!(ok[1].idempotency_key.as_deref(), Some("p-1"));
        let error = |events: &str| parse(&body(events), 100).unwrap_err();
        let item = error(r#"{"key": "a", "event": 1}, {"key": "", "event": 2}"#);
        assert_eq!((item.status(), item.code()), (400, "invalid_key"));
        assert!(item.message().starts_with("events[1]: "), "{}", item.message());
        let big = error(&format!(r#"{{"key": "a", "event": "{}"}}"#, "x".repeat(200)));
        assert_eq!(
            (big.status(), big.code(), big.message().starts_with("events[0]")),
            (413, "payload_too_large", true)
        );
        let topic = error(r#"{"key": "a", "event": 1, "topic": "other"}"#);
        assert_eq!((topic.status(), topic.code()), (400, "bad_request"), "one topic per batch: {}", topic.message());
        let idem = error(r#"{"key": "a", "event": 1, "idempotency_key": "has space"}"#);
        assert_eq!(idem.code(), "invalid_idempotency_key");
        assert_eq!(parse(b"{}", 100).unwrap_err().code(), "bad_request");
        for not_json in [&b""[..], b"{ not json", br#"{"events": [{"key": "a", "event": 1}]} x"#, b"{\"events\": ["] {
            let error = parse(not_json, 100).unwrap_err();
            assert_eq!((error.status(), error.code()), (400, "malformed_json"), "as an event's body: {error:?}");
        }
        for dots in [".", ".."] {
            let item = error(&format!(r#"{{"key": "{dots}", "event": 1}}"#));
            assert_eq!((item.status(), item.code()), (400, "invalid_key"), "as a path's key: {}", item.message());
        }
        assert_eq!(parse(&body(""), 100).unwrap_err().code(), "bad_request");
        let many = vec![r#"{"key": "a", "event": 1}"#; MAX_BATCH_EVENTS + 1].join(",");
        assert_eq!(parse(&body(&many), 100).unwrap_err().code(), "too_many_items");
        let at_bound = vec![r#"{"key": "a", "event": 1}"#; MAX_BATCH_EVENTS].join(",");
        assert_eq!(parse(&body(&at_bound), 100).unwrap().len(), MAX_BATCH_EVENTS);
        let huge = vec![0u8; MAX_BATCH_BYTES + 1];
        assert_eq!(parse(&huge, 100).unwrap_err().code(), "payload_too_large");
    }

    /// A share that failed before its object answered is answered under a
    /// request id of its own, and a private error's detail is logged under
    /// that id (as a single request's is), never answered.
    #[test]
    fn a_failed_share_is_answered_and_logged_under_its_own_request_id() {
        let detail = "an object's answer: storage on fire";
        let (answer, fact) = key_failed(&ApiError::Internal(detail.into()), "00000000000000a1");
        assert_eq!(answer.0, 500);
        assert_eq!(answer.1["error"]["request_id"], "00000000000000a1", "{answer:?}");
        assert!(!answer.1.to_string().contains("on fire"), "the detail is not answered: {answer:?}");
        let fact = fact.expect("an internal error is logged");
        let line: Value = serde_json::from_str(&fact.line(&[])).unwrap();
        assert_eq!(
            (&line["lull"], &line["request_id"], &line["code"], &line["error"]),
            (
                &json!("error"),
                &json!("00000000000000a1"),
                &json!("internal"),
                &json!(format!("internal error: {detail}"))
            )
        );
        let (refused, fact) = key_failed(&ApiError::Forbidden, "00000000000000a2");
        assert_eq!((refused.0, &refused.1["error"]["request_id"]), (403, &json!("00000000000000a2")));
        assert!(fact.is_none(), "a caller's own mistake is not logged");
        let ids = std::cell::Cell::new(0);
        let failed = |e: &ApiError| {
            ids.set(ids.get() + 1);
            key_failed(e, &format!("{:016x}", ids.get())).0
        };
        let unreadable = ObjectAnswer { status: 202, body: "not json".into(), retry_after: None };
        let Err((500, error)) = read_key_answer(&unreadable, failed) else { panic!("an unreadable answer fails") };
        assert_eq!(error["error"]["request_id"], "0000000000000001");
        let accepted =
            ObjectAnswer { status: 202, body: r#"{"accepted": [{"window": 1, "seq": 1}]}"#.into(), retry_after: None };
        let entries = read_key_answer(&accepted, failed).unwrap();
        assert_eq!(entries.iter().map(|e| e.get()).collect::<Vec<_>>(), [r#"{"window": 1, "seq": 1}"#]);
        assert_eq!(ids.get(), 1, "one id per failed share");
    }

    #[test]
    fn events_are_grouped_by_key_and_answered_in_the_batchs_order() {
        let events =
            parse(&body(r#"{"key": "a", "event": 1}, {"key": "b", "event": 2}, {"key": "a", "event": 3}"#), 100)
                .unwrap();
        let groups = by_key(&events);
        assert_eq!(
            groups.iter().map(|(k, p)| (k.as_str(), p.clone())).collect::<Vec<_>>(),
            [("a", vec![0, 2]), ("b", vec![1])]
        );
        let raw = |text: &str| RawValue::from_string(text.to_string()).unwrap();
        let answers = vec![
            (vec![0, 2], Ok(vec![raw(r#"{"window":1,"seq":1}"#), raw(r#" { "window": 1, "seq": 2 }"#)])),
            (vec![1], Err((429, json!({"error": {"code": "too_many_pending", "message": "full"}})))),
        ];
        let text = results(3, answers);
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            json!({"results": [
                {"status": 202, "window": 1, "seq": 1},
                {"status": 429, "error": {"code": "too_many_pending", "message": "full"}},
                {"status": 202, "window": 1, "seq": 2},
            ]})
        );
        // An entry that is no object, a missing one, an empty object.
        let odd = vec![(vec![0, 1, 2], Ok(vec![raw("[1]"), raw("{}")]))];
        let odd: Value = serde_json::from_str(&results(4, odd)).unwrap();
        assert_eq!(odd["results"][0]["status"], 500, "{odd}");
        assert_eq!(odd["results"][1], json!({"status": 202}));
        assert_eq!(odd["results"][2]["error"]["code"], "internal");
        assert_eq!(odd["results"][3], Value::Null, "a place no key answered");
    }
}
