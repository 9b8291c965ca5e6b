//! The HTTP API's routes: which operation a method, path and query ask for
//! (a key's as its [`KeyRequest`]), and the `404`/`405`/`400` for everything
//! else. Runtime-free.

use lull_core::WindowId;

use crate::demo::route::{DemoRoute, route as demo_route};
use crate::error::ApiError;
use crate::key::request::KeyRequest;
use crate::key::timeline::{TIMELINE_KEEP, TIMELINE_PAGE};
use crate::key::{DEFAULT_PAGE, MAX_PAGE};
use crate::names::{Key, is_loopback_host, is_topic_name};
use crate::queue::gate::GateOp;

/// Longest producer `Idempotency-Key`, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 200;

/// A producer's `Idempotency-Key` header, checked: 1–200 printable ASCII
/// characters without spaces. `None` when the header is absent.
pub(crate) fn producer_key(header: Option<&str>) -> Result<Option<String>, ApiError> {
    let Some(key) = header else { return Ok(None) };
    let ok = (1..=MAX_IDEMPOTENCY_KEY_BYTES).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic());
    if ok { Ok(Some(key.to_string())) } else { Err(ApiError::InvalidIdempotencyKey) }
}

/// `?after=W&limit=N` of a dead-letter page: `after` a window id, `limit`
/// 1..=`max` (default `default`). Anything else is a `400 bad_query`.
pub(crate) fn page(query: Option<&str>, default: usize, max: usize) -> Result<(Option<u64>, usize), ApiError> {
    let (mut after, mut limit) = (None, default);
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let number =
            || value.parse::<u64>().map_err(|_| ApiError::BadQuery(format!("{name} must be a number, not {value:?}")));
        match name {
            "after" => after = Some(number()?),
            "limit" => {
                limit = usize::try_from(number()?).unwrap_or(usize::MAX);
                if !(1..=max).contains(&limit) {
                    return Err(ApiError::BadQuery(format!("limit must be 1..={max}, not {value}")));
                }
            }
            _ => return Err(ApiError::BadQuery(format!("unknown parameter {name:?} (after, limit)"))),
        }
    }
    Ok((after, limit))
}

/// `request` with its page read from `query` (dead letters, timeline; other
/// requests ignore the query). `400 bad_query` for a bad one.
pub(crate) fn with_page(request: KeyRequest, query: Option<&str>) -> Result<KeyRequest, ApiError> {
    Ok(match request {
        KeyRequest::DeadLetters { .. } => {
            let (after, limit) = page(query, DEFAULT_PAGE, MAX_PAGE)?;
            KeyRequest::DeadLetters { after, limit }
        }
        KeyRequest::Timeline { .. } => {
            let (after, limit) = page(query, TIMELINE_PAGE, TIMELINE_KEEP)?;
            KeyRequest::Timeline { after, limit }
        }
        other => other,
    })
}

/// `op` (a queue topic's dead-letter route) with its page read from `query`
/// (`GET …/queue/dead-letters`; other operations ignore the query). `400 bad_query` for a bad one.
pub(crate) fn with_queue_page(op: GateOp, query: Option<&str>) -> Result<GateOp, ApiError> {
    Ok(match op {
        GateOp::DeadLetters { .. } => {
            let (after, limit) = page(query, DEFAULT_PAGE, MAX_PAGE)?;
            GateOp::DeadLetters { after, limit }
        }
        other => other,
    })
}

/// A request the router understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /healthz`.
    Health,
    /// `OPTIONS` on any path: a browser's CORS preflight.
    Preflight,
    /// The demo's routes (`/sink`, `/demo/…`), as its one hook
    /// (`crate::demo::route::route`) reads them; none without the `demo` feature.
    Demo(DemoRoute),
    /// `POST /v1/topics/{topic}/client-tokens`: mint a client token (admin).
    MintClientToken {
        /// The topic name (checked for shape).
        topic: String,
    },
    /// `POST /v1/topics/{topic}/events:batch`: many keys' events (`crate::http::batch`).
    Batch {
        /// The topic name (checked for shape).
        topic: String,
    },
    /// An operation of a queue topic's gate object (admin): `GET
    /// /v1/topics/{topic}/queue` ([`GateOp::Status`]: forwards in flight, bound,
    /// counters), and its dead letters: `GET …/queue/dead-letters`
    /// ([`GateOp::DeadLetters`], its page from the query: `with_queue_page`),
    /// `POST …/dead-letters/{id}/retry` ([`GateOp::Replay`]), `POST
    /// …/dead-letters/retry` ([`GateOp::ReplayAll`]), `DELETE
    /// …/dead-letters/{id}` ([`GateOp::Discard`]).
    Queue {
        /// The topic name (checked for shape).
        topic: String,
        /// What to ask its gate object.
        op: GateOp,
    },
    /// `POST /v1/topics/{topic}/recover` (admin): replay the topic's windows
    /// dead-lettered since a time, across its keys (`crate::recover`).
    Recover {
        /// The topic name (checked for shape).
        topic: String,
    },
    /// `GET /v1/metrics` (admin): every topic's counters and target state in
    /// Prometheus' text format (`crate::metrics`).
    Metrics,
    /// An operation of any topic's object on its target (admin): `GET
    /// /v1/topics/{topic}` ([`GateOp::Topic`]: the target's state, the bound,
    /// the leases), `POST /v1/topics/{topic}/target:resume` ([`GateOp::Resume`]).
    Topic {
        /// The topic name (checked for shape).
        topic: String,
        /// What to ask its object.
        op: GateOp,
    },
    /// An operation on one key of one topic.
    Key {
        /// The topic name (checked for shape, not yet for existence).
        topic: String,
        /// The key.
        key: Key,
        /// What to do (an event's body and idempotency key are the router's to add).
        request: KeyRequest,
    },
}

impl Route {
    /// The route for `method` and `path` (no query string). `404 not_found`
    /// for an unknown path, `405` for a known path with the wrong method,
    /// `400 invalid_key` for a bad key.
    pub fn parse(method: &str, path: &str) -> Result<Route, ApiError> {
        let not_found = || ApiError::NotFound(format!("route {path:?}"));
        if method == "OPTIONS" {
            return Ok(Route::Preflight);
        }
        if let Some(demo) = demo_route(method, path) {
            return demo.map(Route::Demo);
        }
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match parts.as_slice() {
            ["healthz"] => ApiError::check_method(method, "GET").map(|()| Route::Health),
            ["v1", "metrics"] => ApiError::check_method(method, "GET").map(|()| Route::Metrics),
            ["v1", "topics", topic, "client-tokens"] => {
                ApiError::check_method(method, "POST")?;
                if !is_topic_name(topic) {
                    return Err(ApiError::UnknownTopic((*topic).to_string()));
                }
                Ok(Route::MintClientToken { topic: (*topic).to_string() })
            }
            ["v1", "topics", topic, rest @ ..] if matches!(rest, [] | ["target:resume"]) => {
                let (op, allowed) = if rest.is_empty() { (GateOp::Topic, "GET") } else { (GateOp::Resume, "POST") };
                ApiError::check_method(method, allowed)?;
                if !is_topic_name(topic) {
                    return Err(ApiError::UnknownTopic((*topic).to_string()));
                }
                Ok(Route::Topic { topic: (*topic).to_string(), op })
            }
            ["v1", "topics", topic, "recover"] => {
                ApiError::check_method(method, "POST")?;
                if !is_topic_name(topic) {
                    return Err(ApiError::UnknownTopic((*topic).to_string()));
                }
                Ok(Route::Recover { topic: (*topic).to_string() })
            }
            ["v1", "topics", topic, "events:batch"] => {
                ApiError::check_method(method, "POST")?;
                if !is_topic_name(topic) {
                    return Err(ApiError::UnknownTopic((*topic).to_string()));
                }
                Ok(Route::Batch { topic: (*topic).to_string() })
            }
            ["v1", "topics", topic, "queue", rest @ ..] => {
                let id = |w: &str| w.parse::<u64>().map_err(|_| not_found());
                // A page starts at its defaults; [`with_queue_page`] reads the query.
                let (op, allowed) = match rest {
                    [] => (GateOp::Status, "GET"),
                    ["dead-letters"] => (GateOp::DeadLetters { after: None, limit: DEFAULT_PAGE }, "GET"),
                    ["dead-letters", "retry"] => (GateOp::ReplayAll, "POST"),
                    ["dead-letters", w] => (GateOp::Discard { id: id(w)? }, "DELETE"),
                    ["dead-letters", w, "retry"] => (GateOp::Replay { id: id(w)? }, "POST"),
                    _ => return Err(not_found()),
                };
                ApiError::check_method(method, allowed)?;
                if !is_topic_name(topic) {
                    return Err(ApiError::UnknownTopic((*topic).to_string()));
                }
                Ok(Route::Queue { topic: (*topic).to_string(), op })
            }
            ["v1", "topics", topic, "keys", key, rest @ ..] => {
                let window = |w: &str| w.parse::<u64>().map(WindowId).map_err(|_| not_found());
                // Pages start at their defaults; [`with_page`] reads the query.
                let (request, allowed) = match rest {
                    [] if method == "DELETE" => (KeyRequest::Cancel, "GET, DELETE"),
                    [] => (KeyRequest::Status, "GET, DELETE"),
                    ["events"] => (
                        KeyRequest::Event {
                            body: String::new(),
                            idempotency_key: None,
                            events_per_minute: None,
                            holder: None,
                        },
                        "POST",
                    ),
                    ["flush"] => (KeyRequest::Flush, "POST"),
                    ["dead-letters"] => (KeyRequest::DeadLetters { after: None, limit: DEFAULT_PAGE }, "GET"),
                    ["timeline"] => (KeyRequest::Timeline { after: None, limit: TIMELINE_PAGE }, "GET"),
                    ["dead-letters", "retry"] => (KeyRequest::ReplayAll, "POST"),
                    ["dead-letters", w] => (KeyRequest::Discard { window: window(w)? }, "DELETE"),
                    ["dead-letters", w, "retry"] => (KeyRequest::Replay { window: window(w)? }, "POST"),
                    _ => return Err(not_found()),
                };
                ApiError::check_method(method, allowed)?;
                if !is_topic_name(topic) {
                    return Err(ApiError::UnknownTopic((*topic).to_string()));
                }
                let key = Key::from_path_segment(key)?;
                Ok(Route::Key { topic: (*topic).to_string(), key, request })
            }
            _ => Err(not_found()),
        }
    }
}

/// A URL's host and port (`host[:port]`, what its `Host` header said), read
/// off the text as the runtime gave it.
pub(crate) fn authority(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[after_scheme..];
    &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())]
}

/// Whether `authority` (a URL's `host[:port]`) names this machine:
/// `localhost`, `127.0.0.0/8` or `[::1]`, on any port.
pub(crate) fn is_loopback(authority: &str) -> bool {
    let Ok(url) = url::Url::parse(&format!("http://{authority}/")) else { return false };
    let bare = url.username().is_empty() && url.password().is_none() && url.path() == "/" && url.query().is_none();
    bare && url.fragment().is_none() && is_loopback_host(url.host())
}

/// A URL's path (`/` if none) and query, read off the text as the runtime gave it.
pub(crate) fn path_and_query(url: &str) -> (&str, Option<&str>) {
    // A byte scan: `str::find` with a text pattern sets up a two-way searcher per call.
    let after_scheme = url.as_bytes().windows(3).position(|w| w == b"://").map_or(0, |i| i + 3);
    let rest = url[after_scheme..].find('/').map_or("", |i| &url[after_scheme + i..]);
    let rest = rest.split('#').next().unwrap_or_default();
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    (if path.is_empty() { "/" } else { path }, query)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_and_query_are_read_off_the_url_as_sent() {
        assert_eq!(
            path_and_query("https://h/v1/topics/t/keys/a%2Fb/events?x=1#f"),
            ("/v1/topics/t/keys/a%2Fb/events", Some("x=1"))
        );
        assert_eq!(path_and_query("http://127.0.0.1:8787"), ("/", None));
        assert_eq!(path_and_query("https://h/?"), ("/", Some("")));
        assert_eq!(path_and_query("https://h/a#b?c"), ("/a", None));
        assert_eq!(path_and_query("https://h/é/ü?x=http://b"), ("/é/ü", Some("x=http://b")));
        assert_eq!(path_and_query("/a?x=http://b"), ("/", None), "no scheme: read from the first `://`, as before");
    }

    fn key_route(method: &str, path: &str) -> Result<KeyRequest, ApiError> {
        match Route::parse(method, path)? {
            Route::Key { request, .. } => Ok(request),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn paths_and_methods_map_to_operations() {
        let event =
            KeyRequest::Event { body: String::new(), idempotency_key: None, events_per_minute: None, holder: None };
        assert_eq!(key_route("POST", "/v1/topics/orders/keys/c42/events"), Ok(event));
        assert_eq!(key_route("GET", "/v1/topics/orders/keys/c42"), Ok(KeyRequest::Status));
        assert_eq!(key_route("DELETE", "/v1/topics/orders/keys/c42"), Ok(KeyRequest::Cancel));
        assert_eq!(key_route("POST", "/v1/topics/orders/keys/c42/flush"), Ok(KeyRequest::Flush));
        let dead = KeyRequest::DeadLetters { after: None, limit: DEFAULT_PAGE };
        assert_eq!(key_route("GET", "/v1/topics/orders/keys/c42/dead-letters"), Ok(dead.clone()));
        let timeline = KeyRequest::Timeline { after: None, limit: TIMELINE_PAGE };
        assert_eq!(key_route("GET", "/v1/topics/orders/keys/c42/timeline"), Ok(timeline.clone()));
        assert_eq!(
            key_route("POST", "/v1/topics/orders/keys/c42/dead-letters/7/retry"),
            Ok(KeyRequest::Replay { window: WindowId(7) })
        );
        assert_eq!(key_route("POST", "/v1/topics/orders/keys/c42/dead-letters/retry"), Ok(KeyRequest::ReplayAll));
        assert_eq!(
            key_route("DELETE", "/v1/topics/orders/keys/c42/dead-letters/7"),
            Ok(KeyRequest::Discard { window: WindowId(7) })
        );
        assert_eq!(
            with_page(dead, Some("after=7&limit=20")),
            Ok(KeyRequest::DeadLetters { after: Some(7), limit: 20 })
        );
        assert_eq!(
            with_page(timeline, Some("after=3")),
            Ok(KeyRequest::Timeline { after: Some(3), limit: TIMELINE_PAGE })
        );
        assert_eq!(with_page(KeyRequest::Flush, Some("whatever=1")), Ok(KeyRequest::Flush), "others ignore the query");
        let mint = Route::parse("POST", "/v1/topics/docs/client-tokens");
        assert_eq!(mint, Ok(Route::MintClientToken { topic: "docs".into() }));
        assert_eq!(Route::parse("GET", "/v1/topics/docs/client-tokens").unwrap_err().code(), "method_not_allowed");
        let too_long = KeyRequest::Timeline { after: None, limit: 1 };
        assert_eq!(with_page(too_long, Some("limit=257")).unwrap_err().code(), "bad_query");
        assert_eq!(Route::parse("GET", "/healthz"), Ok(Route::Health));
        assert_eq!(Route::parse("OPTIONS", "/v1/topics/t/keys/k/events"), Ok(Route::Preflight));
        assert_eq!(
            Route::parse("GET", "/v1/topics/t/queue"),
            Ok(Route::Queue { topic: "t".into(), op: GateOp::Status })
        );
        assert_eq!(Route::parse("POST", "/v1/topics/t/events:batch"), Ok(Route::Batch { topic: "t".into() }));
        assert_eq!(Route::parse("GET", "/v1/topics/t/events:batch").unwrap_err().code(), "method_not_allowed");
        let Ok(Route::Key { key, topic, .. }) = Route::parse("POST", "/v1/topics/t/keys/a%2Fb%20c/events") else {
            panic!()
        };
        assert_eq!((topic.as_str(), key.as_str()), ("t", "a/b c"));
    }

    #[test]
    fn a_topics_target_routes_are_typed_operations_of_its_object() {
        assert_eq!(Route::parse("GET", "/v1/topics/t"), Ok(Route::Topic { topic: "t".into(), op: GateOp::Topic }));
        assert_eq!(Route::parse("GET", "/v1/metrics"), Ok(Route::Metrics));
        assert_eq!(Route::parse("POST", "/v1/topics/t/recover"), Ok(Route::Recover { topic: "t".into() }));
        assert_eq!(Route::parse("GET", "/v1/topics/t/recover").unwrap_err().code(), "method_not_allowed");
        assert_eq!(Route::parse("POST", "/v1/metrics").unwrap_err().code(), "method_not_allowed");
        assert_eq!(
            Route::parse("POST", "/v1/topics/t/target:resume"),
            Ok(Route::Topic { topic: "t".into(), op: GateOp::Resume })
        );
        assert_eq!(Route::parse("POST", "/v1/topics/t").unwrap_err().code(), "method_not_allowed");
        assert_eq!(Route::parse("GET", "/v1/topics/t/target:resume").unwrap_err().code(), "method_not_allowed");
        assert_eq!(Route::parse("POST", "/v1/topics/t/target:pause").unwrap_err().code(), "not_found");
        assert_eq!(Route::parse("GET", "/v1/topics/b@d").unwrap_err().code(), "unknown_topic");
    }

    #[test]
    fn a_queue_topics_dead_letter_routes_are_typed_gate_operations() {
        let queue = |m: &str, p: &str| match Route::parse(m, p) {
            Ok(Route::Queue { topic, op }) if topic == "q" => Ok(op),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.code()),
        };
        let list = GateOp::DeadLetters { after: None, limit: DEFAULT_PAGE };
        assert_eq!(queue("GET", "/v1/topics/q/queue/dead-letters"), Ok(list.clone()));
        assert_eq!(queue("POST", "/v1/topics/q/queue/dead-letters/retry"), Ok(GateOp::ReplayAll));
        assert_eq!(queue("POST", "/v1/topics/q/queue/dead-letters/12/retry"), Ok(GateOp::Replay { id: 12 }));
        assert_eq!(queue("DELETE", "/v1/topics/q/queue/dead-letters/12"), Ok(GateOp::Discard { id: 12 }));
        assert_eq!(queue("GET", "/v1/topics/q/queue/dead-letters/12"), Err("method_not_allowed"));
        assert_eq!(queue("POST", "/v1/topics/q/queue/dead-letters"), Err("method_not_allowed"));
        assert_eq!(queue("DELETE", "/v1/topics/q/queue/dead-letters/x"), Err("not_found"));
        assert_eq!(queue("POST", "/v1/topics/q/queue/dead-letters/1/retry/now"), Err("not_found"));
        assert_eq!(queue("GET", "/v1/topics/q/queue/nope"), Err("not_found"));
        assert_eq!(queue("POST", "/v1/topics/q/queue"), Err("method_not_allowed"));
        assert_eq!(
            with_queue_page(GateOp::Status, Some("after=1")),
            Ok(GateOp::Status),
            "the status ignores the query"
        );
        assert_eq!(Route::parse("GET", "/v1/topics/b@d/queue/dead-letters").unwrap_err().code(), "unknown_topic");
        assert_eq!(
            with_queue_page(list.clone(), Some("after=7&limit=500")),
            Ok(GateOp::DeadLetters { after: Some(7), limit: 500 })
        );
        assert_eq!(with_queue_page(list, Some("limit=501")).unwrap_err().code(), "bad_query");
        assert_eq!(with_queue_page(GateOp::ReplayAll, Some("x=1")), Ok(GateOp::ReplayAll), "others ignore the query");
    }

    #[test]
    fn wrong_paths_methods_and_keys_are_refused() {
        let code = |m: &str, p: &str| Route::parse(m, p).unwrap_err().code();
        assert_eq!(code("GET", "/"), "not_found");
        assert_eq!(code("GET", "/v1/topics/t/keys/k/nope"), "not_found");
        assert_eq!(code("POST", "/v1/topics/t/keys/k/dead-letters/x/retry"), "not_found");
        assert_eq!(code("GET", "/v1/topics/t/keys/k/events"), "method_not_allowed");
        assert_eq!(code("PUT", "/v1/topics/t/keys/k"), "method_not_allowed");
        assert_eq!(code("POST", "/healthz"), "method_not_allowed");
        assert_eq!(code("POST", "/v1/topics/t/keys//events"), "invalid_key");
        assert_eq!(code("POST", &format!("/v1/topics/t/keys/{}/events", "k".repeat(513))), "invalid_key");
        assert_eq!(code("POST", "/v1/topics/t/keys/%FF/events"), "invalid_key");
        assert_eq!(code("POST", "/v1/topics/b@d/keys/k/events"), "unknown_topic");
    }

    #[test]
    fn dead_letter_pages_take_after_and_a_bounded_limit() {
        assert_eq!(page(None, 100, 500), Ok((None, 100)));
        assert_eq!(page(Some("after=7&limit=20"), 100, 500), Ok((Some(7), 20)));
        assert_eq!(page(Some("limit=500"), 100, 500), Ok((None, 500)));
        for bad in ["limit=0", "limit=501", "limit=x", "after=-1", "colour=red"] {
            assert_eq!(page(Some(bad), 100, 500).unwrap_err().code(), "bad_query", "{bad}");
        }
    }

    #[test]
    fn producer_keys_are_short_printable_ascii() {
        assert_eq!(producer_key(None), Ok(None));
        assert_eq!(producer_key(Some("order-42/retry")), Ok(Some("order-42/retry".into())));
        for bad in ["", "with space", "tab\t", "é", &"k".repeat(201)] {
            assert_eq!(producer_key(Some(bad)), Err(ApiError::InvalidIdempotencyKey), "{bad:?}");
        }
    }

    #[test]
    fn a_urls_authority_is_its_host_and_port() {
        for (url, want) in [
            ("http://127.0.0.1:8787/sink", "127.0.0.1:8787"),
            ("https://lull.example.com/v1/x?y=http://a/b", "lull.example.com"),
            ("http://[::1]:9?x", "[::1]:9"),
            ("http://localhost#f", "localhost"),
        ] {
            assert_eq!(authority(url), want, "{url}");
        }
    }

    #[test]
    fn the_demo_hooks_in_once_and_only_when_built() {
        for (method, path) in [
            ("GET", "/demo/search"),
            ("GET", "/demo/places"),
            ("GET", "/demo/token"),
            ("GET", "/demo/keys/k"),
            ("GET", "/demo/keys/k/timeline"),
            ("POST", "/demo/keys/k/dead-letters/retry"),
            ("GET", "/demo/sink"),
            ("PUT", "/demo/sink/failing/k"),
            ("GET", "/sink"),
            ("POST", "/sink"),
            ("PUT", "/sink/failing/k"),
        ] {
            let parsed = Route::parse(method, path);
            let built = crate::demo::BUILT;
            assert_eq!(matches!(parsed, Ok(Route::Demo(_))), built, "{method} {path}: {parsed:?}");
            if !built {
                assert_eq!(parsed.unwrap_err().code(), "not_found", "{method} {path}");
            }
        }
        assert_eq!(Route::parse("OPTIONS", "/sink"), Ok(Route::Preflight), "a preflight before the demo");
    }
}
