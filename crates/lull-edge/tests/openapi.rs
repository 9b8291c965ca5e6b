//! The HTTP API's contract (`openapi.yaml`) and the router agree, natively:
//! every route the router takes — each [`Route`] variant but the demo's, each
//! [`KeyRequest`] and each [`GateOp`] it reaches — is an operation of the
//! document (a method and a path template), every operation of the document
//! is a route [`Route::parse`] takes, each path's methods are those its `405`
//! names, and every error code is in the document's `ErrorCode`.
//!
//! The matches below are exhaustive: a new variant fails to compile here until
//! it is mapped to its method and path (or to none, for the gate's calls that
//! are no route). The document is read with a line scan of its `paths:` keys
//! and their methods (no YAML parser): path keys are indented two spaces,
//! methods four. What each operation answers is checked against the real
//! worker by `tests/edge/openapi.test.mjs`.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::collections::BTreeSet;

use lull_core::WindowId;
use lull_edge::limits::{DEFAULT_PAGE, TIMELINE_PAGE};
use lull_edge::{ApiError, Counter, GateOp, Key, KeyRequest, Route};

const DOC: &str = include_str!("../openapi.yaml");
const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
const KEY: &str = "/v1/topics/{topic}/keys/{key}";
const QUEUE: &str = "/v1/topics/{topic}/queue";
const BATCH: &str = "/v1/topics/{topic}/events:batch";

/// An operation: its method (upper case) and path template.
type Op = (String, String);

fn op(method: &str, path: impl Into<String>) -> Op {
    (method.to_string(), path.into())
}

/// The document's operations, read off its `paths:` section.
fn documented() -> BTreeSet<Op> {
    let mut ops = BTreeSet::new();
    let (mut in_paths, mut path) = (false, None::<String>);
    for line in DOC.lines() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if !line.starts_with(' ') {
            in_paths = line == "paths:";
            continue;
        }
        if !in_paths {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let text = line.trim();
        if indent == 2 && text.ends_with(':') {
            let key = text.trim_end_matches(':').trim_matches(|c| c == '\'' || c == '"');
            assert!(key.starts_with('/'), "a path key: {line:?}");
            path = Some(key.to_string());
        } else if indent == 4 && METHODS.contains(&text.trim_end_matches(':')) {
            let path = path.clone().unwrap_or_else(|| panic!("a method before any path: {line:?}"));
            assert!(ops.insert(op(&text.trim_end_matches(':').to_uppercase(), path)), "{line:?} twice");
        }
    }
    assert!(ops.len() > 10, "the scan found the operations: {ops:?}");
    ops
}

/// The document's paths.
fn paths() -> BTreeSet<String> {
    documented().into_iter().map(|(_, path)| path).collect()
}

/// The method and path a key request is asked by.
fn key_op(request: &KeyRequest) -> Op {
    match request {
        KeyRequest::Event { .. } => op("POST", format!("{KEY}/events")),
        // One key's share of a batch: the batch route.
        KeyRequest::Events { .. } => op("POST", BATCH),
        KeyRequest::Status => op("GET", KEY),
        KeyRequest::Flush => op("POST", format!("{KEY}/flush")),
        KeyRequest::Cancel => op("DELETE", KEY),
        KeyRequest::DeadLetters { .. } => op("GET", format!("{KEY}/dead-letters")),
        KeyRequest::Replay { .. } => op("POST", format!("{KEY}/dead-letters/{{window}}/retry")),
        KeyRequest::ReplayAll => op("POST", format!("{KEY}/dead-letters/retry")),
        // One key's part of a topic's recover.
        KeyRequest::ReplaySince { .. } => op("POST", "/v1/topics/{topic}/recover"),
        KeyRequest::Discard { .. } => op("DELETE", format!("{KEY}/dead-letters/{{window}}")),
        KeyRequest::Timeline { .. } => op("GET", format!("{KEY}/timeline")),
    }
}

/// The method and path a gate operation is asked by, if a route asks for it
/// (the rest are the consumer's calls, and the router's own `Room`).
fn gate_op(gate: &GateOp) -> Option<Op> {
    match gate {
        GateOp::Acquire { .. } | GateOp::Release { .. } | GateOp::Count { .. } | GateOp::DeadLetter { .. } => None,
        GateOp::Room | GateOp::Report { .. } | GateOp::Target | GateOp::Tally { .. } => None,
        // The keys' and the recover route's calls (the route is the topic's, not one operation's).
        GateOp::DeadKey { .. } | GateOp::DeadKeys { .. } | GateOp::ForgetDeadKeys { .. } => None,
        // One topic's part of `GET /v1/metrics` (the route asks every topic's object).
        GateOp::Metrics => None,
        GateOp::Topic => Some(op("GET", "/v1/topics/{topic}")),
        GateOp::Resume => Some(op("POST", "/v1/topics/{topic}/target:resume")),
        GateOp::Status => Some(op("GET", QUEUE)),
        GateOp::DeadLetters { .. } => Some(op("GET", format!("{QUEUE}/dead-letters"))),
        GateOp::Replay { .. } => Some(op("POST", format!("{QUEUE}/dead-letters/{{id}}/retry"))),
        GateOp::ReplayAll => Some(op("POST", format!("{QUEUE}/dead-letters/retry"))),
        GateOp::Discard { .. } => Some(op("DELETE", format!("{QUEUE}/dead-letters/{{id}}"))),
    }
}

/// The operations a route is (a preflight is `OPTIONS` on every path; the demo's routes are none).
fn route_ops(route: &Route) -> Vec<Op> {
    match route {
        Route::Health => vec![op("GET", "/healthz")],
        Route::Metrics => vec![op("GET", "/v1/metrics")],
        Route::Recover { .. } => vec![op("POST", "/v1/topics/{topic}/recover")],
        Route::Preflight => paths().into_iter().map(|path| op("OPTIONS", path)).collect(),
        Route::Demo(_) => Vec::new(),
        Route::MintClientToken { .. } => vec![op("POST", "/v1/topics/{topic}/client-tokens")],
        Route::Batch { .. } => vec![op("POST", BATCH)],
        Route::Topic { op, .. } => {
            vec![gate_op(op).unwrap_or_else(|| panic!("{op:?} is a call of the keys', not a route"))]
        }
        Route::Queue { op, .. } => {
            vec![gate_op(op).unwrap_or_else(|| panic!("{op:?} is a call of the consumer's, not a route"))]
        }
        Route::Key { request, .. } => vec![key_op(request)],
    }
}

/// One of each key request.
fn every_key_request() -> Vec<KeyRequest> {
    vec![
        KeyRequest::Event {
            body: "{}".into(),
            idempotency_key: Some("p-1".into()),
            events_per_minute: None,
            holder: None,
        },
        KeyRequest::Events { events: vec![("1".into(), None)], events_per_minute: Some(60), holder: None },
        KeyRequest::Status,
        KeyRequest::Flush,
        KeyRequest::Cancel,
        KeyRequest::DeadLetters { after: Some(3), limit: DEFAULT_PAGE },
        KeyRequest::Replay { window: WindowId(7) },
        KeyRequest::ReplayAll,
        KeyRequest::ReplaySince { since: 0 },
        KeyRequest::Discard { window: WindowId(7) },
        KeyRequest::Timeline { after: None, limit: TIMELINE_PAGE },
    ]
}

/// One of each gate operation.
fn every_gate_op() -> Vec<GateOp> {
    vec![
        GateOp::Acquire { wait_ms: 0 },
        GateOp::Release { lease: 1, outcome: None },
        GateOp::Count { counter: Counter::Acked },
        GateOp::DeadLetter { message: "{}".into() },
        GateOp::Room,
        GateOp::Status,
        GateOp::DeadLetters { after: None, limit: DEFAULT_PAGE },
        GateOp::Replay { id: 7 },
        GateOp::ReplayAll,
        GateOp::Discard { id: 7 },
        GateOp::Target,
        GateOp::Resume,
        GateOp::Topic,
    ]
}

/// One of each production route, with every key request and gate operation a route reaches.
fn every_route() -> Vec<Route> {
    let topic = || "t".to_string();
    let key = Key::new("k".into()).unwrap();
    let mut routes = vec![
        Route::Health,
        Route::Metrics,
        Route::Preflight,
        Route::MintClientToken { topic: topic() },
        Route::Recover { topic: topic() },
        Route::Batch { topic: topic() },
    ];
    let topic_ops = [GateOp::Topic, GateOp::Resume];
    routes.extend(topic_ops.clone().map(|op| Route::Topic { topic: topic(), op }));
    routes.extend(
        every_gate_op()
            .into_iter()
            .filter(|op| gate_op(op).is_some() && !topic_ops.contains(op))
            .map(|op| Route::Queue { topic: topic(), op }),
    );
    routes.extend(
        every_key_request()
            .into_iter()
            .filter(|request| !matches!(request, KeyRequest::Events { .. } | KeyRequest::ReplaySince { .. }))
            .map(|request| Route::Key { topic: topic(), key: key.clone(), request }),
    );
    routes
}

/// A path of `template` with its parameters filled in.
fn concrete(template: &str) -> String {
    template.replace("{topic}", "t").replace("{key}", "k").replace("{window}", "7").replace("{id}", "7")
}

#[test]
fn every_route_of_the_router_is_an_operation_of_the_document() {
    let documented = documented();
    for route in every_route() {
        let ops = route_ops(&route);
        assert!(!ops.is_empty(), "{route:?} maps to an operation");
        for op in ops {
            assert!(documented.contains(&op), "{route:?}: {} {} is not in openapi.yaml", op.0, op.1);
        }
    }
    for request in every_key_request() {
        let op = key_op(&request);
        assert!(documented.contains(&op), "{request:?}: {} {} is not in openapi.yaml", op.0, op.1);
    }
    for gate in every_gate_op() {
        if let Some(op) = gate_op(&gate) {
            assert!(documented.contains(&op), "{gate:?}: {} {} is not in openapi.yaml", op.0, op.1);
        }
    }
}

#[test]
fn every_operation_of_the_document_is_a_route_of_the_router() {
    let documented = documented();
    let mapped: BTreeSet<Op> = every_route().iter().flat_map(route_ops).collect();
    assert_eq!(documented, mapped, "the document's operations and the router's routes, both ways");
    for (method, template) in &documented {
        let path = concrete(template);
        let route = Route::parse(method, &path).unwrap_or_else(|e| panic!("{method} {path}: {}", e.message()));
        assert!(
            route_ops(&route).contains(&(method.clone(), template.clone())),
            "{method} {path} parses to {route:?}, not the document's {template}"
        );
    }
}

#[test]
fn each_paths_methods_are_those_its_405_names() {
    let documented = documented();
    for path in paths() {
        let methods: BTreeSet<&str> =
            documented.iter().filter(|(m, p)| *p == path && m != "OPTIONS").map(|(m, _)| m.as_str()).collect();
        let other = ["PATCH", "PUT"].into_iter().find(|m| !methods.contains(m)).unwrap();
        let Err(ApiError::MethodNotAllowed { allowed, .. }) = Route::parse(other, &concrete(&path)) else {
            panic!("{other} {path} is refused with 405")
        };
        let allowed: BTreeSet<&str> = allowed.split(", ").collect();
        assert_eq!(allowed, methods, "{path}: the methods the router takes (Allow) and the document's");
        // The document's 405 for the path names them, in the router's order.
        let section = path_section(&path);
        let header = match allowed.len() {
            1 => format!("MethodNotAllowed{}", capitalized(allowed.first().unwrap())),
            _ => "MethodNotAllowedGetDelete".to_string(),
        };
        assert!(section.contains(&format!("'#/components/responses/{header}'")), "{path} answers 405 with {header}");
    }
}

#[test]
fn every_error_code_is_in_the_documents_error_code_enum() {
    let codes = error_code_enum();
    for error in every_error() {
        assert!(codes.contains(error.code()), "{} ({}) is not in ErrorCode", error.code(), error.status());
    }
    let every: BTreeSet<&str> = every_error().iter().map(ApiError::code).collect();
    let extra: Vec<&String> = codes.iter().filter(|c| !every.contains(c.as_str())).collect();
    assert!(extra.is_empty(), "ErrorCode lists codes no error has: {extra:?}");
}

/// One of each error (the demo's two are the demo routes' only, not in the contract).
fn every_error() -> Vec<ApiError> {
    let all = vec![
        ApiError::UnknownTopic("t".into()),
        ApiError::NotFound("x".into()),
        ApiError::MethodNotAllowed { method: "PUT".into(), allowed: "GET" },
        ApiError::Unauthorized,
        ApiError::BadClientToken("expired".into()),
        ApiError::Forbidden,
        ApiError::OriginNotAllowed("https://x.example".into()),
        ApiError::MalformedJson("eof".into()),
        ApiError::PayloadTooLarge { limit: 1 },
        ApiError::TooManyItems { limit: 1 },
        ApiError::BatchItem { index: 0, error: Box::new(ApiError::InvalidKey("empty".into())) },
        ApiError::InvalidKey("empty".into()),
        ApiError::BadRequest("x".into()),
        ApiError::BadQuery("x".into()),
        ApiError::InvalidIdempotencyKey,
        ApiError::TooManyPending { limit: 1, retry_after_secs: 1 },
        ApiError::TooManyEvents { per_minute: 1, retry_after_secs: 1 },
        ApiError::ClientBudgetSpent { retry_after_secs: 1 },
        ApiError::IdempotencyKeyReused,
        ApiError::ClientTokensOff("t".into()),
        ApiError::Unavailable { why: "x".into(), retry_after_secs: 1 },
        ApiError::DeadLettersFull { retry_after_secs: 1 },
        ApiError::ReplayInProgress(1),
        ApiError::Unhealthy("x".into()),
        ApiError::Config("x".into()),
        ApiError::Internal("x".into()),
    ];
    for error in &all {
        // Exhaustive: a new error fails to compile here until it is listed above.
        match error {
            ApiError::UnknownTopic(_)
            | ApiError::NotFound(_)
            | ApiError::MethodNotAllowed { .. }
            | ApiError::Unauthorized
            | ApiError::BadClientToken(_)
            | ApiError::Forbidden
            | ApiError::OriginNotAllowed(_)
            | ApiError::MalformedJson(_)
            | ApiError::PayloadTooLarge { .. }
            | ApiError::TooManyItems { .. }
            | ApiError::BatchItem { .. }
            | ApiError::InvalidKey(_)
            | ApiError::BadRequest(_)
            | ApiError::BadQuery(_)
            | ApiError::InvalidIdempotencyKey
            | ApiError::TooManyPending { .. }
            | ApiError::TooManyEvents { .. }
            | ApiError::ClientBudgetSpent { .. }
            | ApiError::IdempotencyKeyReused
            | ApiError::ClientTokensOff(_)
            | ApiError::Unavailable { .. }
            | ApiError::DeadLettersFull { .. }
            | ApiError::ReplayInProgress(_)
            | ApiError::Unhealthy(_)
            | ApiError::Config(_)
            | ApiError::Internal(_) => {}
            ApiError::BadSignature(_) | ApiError::SinkFailing => {}
        }
    }
    all
}

/// The lines of `path`'s section of `paths:`.
fn path_section(path: &str) -> String {
    let start = DOC.find(&format!("\n  {path}:\n")).unwrap_or_else(|| panic!("{path} in openapi.yaml"));
    let rest = &DOC[start + 1..];
    let end = rest[1..].find("\n  /").or_else(|| rest[1..].find("\ncomponents:")).map_or(rest.len(), |i| i + 1);
    rest[..end].to_string()
}

/// The values of `components.schemas.ErrorCode.enum`.
fn error_code_enum() -> BTreeSet<String> {
    let start = DOC.find("\n    ErrorCode:\n").unwrap();
    let mut lines = DOC[start + 1..].lines().skip_while(|l| l.trim() != "enum:").skip(1);
    let mut codes = BTreeSet::new();
    for line in lines.by_ref() {
        match line.trim().strip_prefix("- ") {
            Some(code) if line.starts_with("        - ") => codes.insert(code.to_string()),
            _ => break,
        };
    }
    assert!(codes.len() > 10, "{codes:?}");
    codes
}

fn capitalized(method: &str) -> String {
    let lower = method.to_lowercase();
    let mut chars = lower.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}
