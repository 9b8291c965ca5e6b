//! The demo's routes, runtime-free: [`route`] is the one hook
//! [`crate::http::route::Route::parse`] asks (after a preflight, before the
//! API's own paths); [`DemoRoute::needs_admin`] says which need an admin
//! token (the plan checks it where it checks every route's credential:
//! [`crate::http::plan`]). They are served only with the demo on
//! (`LULL_DEMO_SINK = "on"`), by `runtime/demo/`.

use crate::error::ApiError;
use crate::key::KeyRequest;
use crate::key::timeline::TIMELINE_PAGE;
use crate::names::Key;

/// A request to the demo: its receiver (`/sink`), its search endpoints and
/// its page's server side (`/demo/…`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DemoRoute {
    /// `GET /sink` (the recent deliveries, admin) or `POST /sink` (one delivery): the demo receiver.
    Sink {
        /// `true` for `POST`.
        post: bool,
    },
    /// `PUT /sink/failing/{key}` (`on`) or `DELETE` (off), admin: the demo
    /// receiver refuses (`500`) or accepts deliveries of that key again.
    SinkFailing {
        /// The key whose deliveries to refuse.
        key: Key,
        /// `true` for `PUT`.
        on: bool,
    },
    /// `PUT /sink/answer/{throttle|gone}` or `DELETE /sink/answer`, admin: the
    /// demo receiver answers every delivery `429` (with `Retry-After`) or `410`,
    /// or as usual again.
    SinkAnswer(Option<SinkAnswer>),
    /// `GET /demo/search`, `/demo/searches`, `/demo/places`: the search box's endpoints.
    Page(Page),
    /// `/demo/token`, `/demo/keys/…`, `/demo/sink…`: the demo page's server side.
    Panel(PanelRoute),
}

/// How the demo receiver answers every delivery, whatever its key (its answer switch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkAnswer {
    /// `429 Too Many Requests` with `Retry-After` ([`SINK_RETRY_AFTER_S`]): the topic pauses.
    Throttle,
    /// `410 Gone`: the topic's target is disabled until resumed.
    Gone,
}

/// The `Retry-After` (s) of the demo receiver's `429`.
pub(crate) const SINK_RETRY_AFTER_S: u64 = 5;

impl SinkAnswer {
    fn parse(mode: &str) -> Result<SinkAnswer, ApiError> {
        match mode {
            "throttle" => Ok(SinkAnswer::Throttle),
            "gone" => Ok(SinkAnswer::Gone),
            _ => Err(ApiError::NotFound(format!("sink answer {mode:?} (throttle, gone)"))),
        }
    }
}

/// The demo page's search endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Page {
    /// `GET /demo/search?q=`: search the places.
    Search,
    /// `GET /demo/searches`: the queries the search endpoint received lately.
    Searches,
    /// `GET /demo/places`: how many places there are (and load them).
    Places,
}

/// The demo page's server side (no bearer token): what the user's backend
/// would do for its page, for the `demo` topic only. Served by `runtime/demo/panel.rs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PanelRoute {
    /// `GET /demo/token?key=K`: a client token for key `K` of the `demo` topic
    /// (the key read by [`token_key`]).
    Token,
    /// `GET /demo/keys/{key}` (status), `GET /demo/keys/{key}/timeline`
    /// (`?after&limit`), `POST /demo/keys/{key}/dead-letters/retry`: the admin
    /// routes of the same names, on the `demo` topic.
    Key {
        /// The key.
        key: Key,
        /// [`KeyRequest::Status`], [`KeyRequest::Timeline`] (its page from the
        /// query: [`crate::http::route::with_page`]) or [`KeyRequest::ReplayAll`].
        request: KeyRequest,
    },
    /// `GET /demo/sink`: what the demo sink received (`GET /sink`), the `demo` topic's.
    Sink,
    /// `PUT`/`DELETE /demo/sink/failing/{key}`: the sink's failing switch
    /// (`PUT`/`DELETE /sink/failing/{key}`).
    SinkFailing {
        /// The key whose deliveries to refuse.
        key: Key,
        /// `true` for `PUT`.
        on: bool,
    },
    /// `PUT /demo/sink/answer/{throttle|gone}`, `DELETE /demo/sink/answer`: the sink's answer switch.
    SinkAnswer(Option<SinkAnswer>),
    /// `GET /demo/target` (the `demo` topic's status, as `GET /v1/topics/demo`)
    /// or `POST /demo/target/resume` (as `POST /v1/topics/demo/target:resume`).
    Target {
        /// `true` for the resume.
        resume: bool,
    },
}

impl DemoRoute {
    /// Whether it needs an admin token: the sink's list and its failing
    /// switch do; a delivery (its signature is checked) and the page's
    /// endpoints (the panel checks its change header) need no credential.
    pub fn needs_admin(&self) -> bool {
        match self {
            DemoRoute::Sink { post: false } | DemoRoute::SinkFailing { .. } | DemoRoute::SinkAnswer(_) => true,
            DemoRoute::Sink { post: true } | DemoRoute::Page(_) | DemoRoute::Panel(_) => false,
        }
    }
}

/// The demo's route for `method` and `path` (no query string), if the path
/// is one of the demo's (`None`: the API's own paths answer): `405` for
/// another method, `404` for an unknown `/demo/keys/…` path, `400
/// invalid_key` for a bad key.
pub(crate) fn route(method: &str, path: &str) -> Option<Result<DemoRoute, ApiError>> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let allow = |allowed| ApiError::check_method(method, allowed);
    let key = |segment: &str| Key::from_path_segment(segment);
    let route = match parts.as_slice() {
        ["sink"] => allow("GET, POST").map(|()| DemoRoute::Sink { post: method == "POST" }),
        ["sink", "failing", k] => {
            allow("PUT, DELETE").and_then(|()| Ok(DemoRoute::SinkFailing { key: key(k)?, on: method == "PUT" }))
        }
        ["sink", "answer"] => allow("DELETE").map(|()| DemoRoute::SinkAnswer(None)),
        ["sink", "answer", mode] => {
            allow("PUT").and_then(|()| Ok(DemoRoute::SinkAnswer(Some(SinkAnswer::parse(mode)?))))
        }
        ["demo", page @ ("search" | "searches" | "places")] => allow("GET").map(|()| {
            DemoRoute::Page(match *page {
                "search" => Page::Search,
                "searches" => Page::Searches,
                _ => Page::Places,
            })
        }),
        ["demo", "token"] => allow("GET").map(|()| DemoRoute::Panel(PanelRoute::Token)),
        ["demo", "sink"] => allow("GET").map(|()| DemoRoute::Panel(PanelRoute::Sink)),
        ["demo", "sink", "failing", k] => allow("PUT, DELETE")
            .and_then(|()| Ok(DemoRoute::Panel(PanelRoute::SinkFailing { key: key(k)?, on: method == "PUT" }))),
        ["demo", "sink", "answer"] => allow("DELETE").map(|()| DemoRoute::Panel(PanelRoute::SinkAnswer(None))),
        ["demo", "sink", "answer", mode] => {
            allow("PUT").and_then(|()| Ok(DemoRoute::Panel(PanelRoute::SinkAnswer(Some(SinkAnswer::parse(mode)?)))))
        }
        ["demo", "target"] => allow("GET").map(|()| DemoRoute::Panel(PanelRoute::Target { resume: false })),
        ["demo", "target", "resume"] => allow("POST").map(|()| DemoRoute::Panel(PanelRoute::Target { resume: true })),
        ["demo", "keys", k, rest @ ..] => {
            let (request, allowed) = match rest {
                [] => (KeyRequest::Status, "GET"),
                ["timeline"] => (KeyRequest::Timeline { after: None, limit: TIMELINE_PAGE }, "GET"),
                ["dead-letters", "retry"] => (KeyRequest::ReplayAll, "POST"),
                _ => return Some(Err(ApiError::NotFound(format!("route {path:?}")))),
            };
            allow(allowed).and_then(|()| Ok(DemoRoute::Panel(PanelRoute::Key { key: key(k)?, request })))
        }
        _ => return None,
    };
    Some(route)
}

/// The key of `GET /demo/token?key=K`, percent-encoded as `encodeURIComponent`
/// writes it: `400 invalid_key` for a missing or bad key (the rules of a
/// path's key), `400 bad_query` for another parameter.
pub(crate) fn token_key(query: Option<&str>) -> Result<Key, ApiError> {
    let mut key = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("key", value) => key = Some(value),
            (name, _) => return Err(ApiError::BadQuery(format!("unknown parameter {name:?} (key)"))),
        }
    }
    Key::from_path_segment(key.unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(method: &str, path: &str) -> &'static str {
        match route(method, path) {
            Some(Err(e)) => e.code(),
            other => panic!("{method} {path}: {other:?}"),
        }
    }

    fn parsed(method: &str, path: &str) -> DemoRoute {
        match route(method, path) {
            Some(Ok(route)) => route,
            other => panic!("{method} {path}: {other:?}"),
        }
    }

    #[test]
    fn the_demo_routes_are_the_sink_and_the_search_pages() {
        assert_eq!(parsed("GET", "/demo/search"), DemoRoute::Page(Page::Search));
        assert_eq!(parsed("GET", "/demo/searches"), DemoRoute::Page(Page::Searches));
        assert_eq!(parsed("GET", "/demo/places"), DemoRoute::Page(Page::Places));
        assert_eq!(parsed("GET", "/sink"), DemoRoute::Sink { post: false });
        assert_eq!(parsed("POST", "/sink"), DemoRoute::Sink { post: true });
        let DemoRoute::SinkFailing { key, on: true } = parsed("PUT", "/sink/failing/doc%201") else { panic!() };
        assert_eq!(key.as_str(), "doc 1");
        assert!(matches!(parsed("DELETE", "/sink/failing/d"), DemoRoute::SinkFailing { on: false, .. }));
        assert_eq!(code("POST", "/demo/search"), "method_not_allowed");
        assert_eq!(code("GET", "/sink/failing/d"), "method_not_allowed");
        assert_eq!(code("PUT", "/sink/failing/%FF"), "invalid_key");
        assert_eq!(parsed("PUT", "/sink/answer/throttle"), DemoRoute::SinkAnswer(Some(SinkAnswer::Throttle)));
        assert_eq!(parsed("PUT", "/sink/answer/gone"), DemoRoute::SinkAnswer(Some(SinkAnswer::Gone)));
        assert_eq!(parsed("DELETE", "/sink/answer"), DemoRoute::SinkAnswer(None));
        assert_eq!(code("PUT", "/sink/answer/teapot"), "not_found");
        assert_eq!(code("GET", "/sink/answer/gone"), "method_not_allowed");
        assert_eq!(code("PUT", "/sink/answer"), "method_not_allowed");
        for other in ["/demo/other", "/healthz", "/v1/topics/t/keys/k", "/", "/sinks"] {
            assert_eq!(route("GET", other), None, "{other} is not the demo's");
        }
    }

    #[test]
    fn only_the_sinks_list_and_switch_need_a_credential_an_admins() {
        assert!(parsed("GET", "/sink").needs_admin());
        assert!(parsed("PUT", "/sink/failing/d").needs_admin());
        assert!(parsed("PUT", "/sink/answer/gone").needs_admin());
        assert!(parsed("DELETE", "/sink/answer").needs_admin());
        for (method, path) in
            [("POST", "/sink"), ("GET", "/demo/search"), ("GET", "/demo/token"), ("PUT", "/demo/sink/failing/d")]
        {
            assert!(!parsed(method, path).needs_admin(), "{method} {path}");
        }
    }

    #[test]
    fn the_demo_panel_routes_reach_the_demo_topics_key_and_sink_without_a_token() {
        let panel = |m: &str, p: &str| match parsed(m, p) {
            DemoRoute::Panel(route) => route,
            other => panic!("{m} {p}: {other:?}"),
        };
        let key = |k: &str| Key::from_path_segment(k).unwrap();
        assert_eq!(panel("GET", "/demo/token"), PanelRoute::Token);
        assert_eq!(panel("GET", "/demo/sink"), PanelRoute::Sink);
        assert_eq!(panel("PUT", "/demo/sink/failing/doc%201"), PanelRoute::SinkFailing { key: key("doc 1"), on: true });
        assert_eq!(panel("DELETE", "/demo/sink/failing/d"), PanelRoute::SinkFailing { key: key("d"), on: false });
        assert_eq!(panel("PUT", "/demo/sink/answer/throttle"), PanelRoute::SinkAnswer(Some(SinkAnswer::Throttle)));
        assert_eq!(panel("DELETE", "/demo/sink/answer"), PanelRoute::SinkAnswer(None));
        assert_eq!(panel("GET", "/demo/target"), PanelRoute::Target { resume: false });
        assert_eq!(panel("POST", "/demo/target/resume"), PanelRoute::Target { resume: true });
        assert_eq!(code("POST", "/demo/target"), "method_not_allowed");
        assert_eq!(code("GET", "/demo/target/resume"), "method_not_allowed");
        assert_eq!(
            panel("GET", "/demo/keys/doc%2F1"),
            PanelRoute::Key { key: key("doc/1"), request: KeyRequest::Status }
        );
        let timeline = KeyRequest::Timeline { after: None, limit: TIMELINE_PAGE };
        assert_eq!(panel("GET", "/demo/keys/d/timeline"), PanelRoute::Key { key: key("d"), request: timeline });
        assert_eq!(
            panel("POST", "/demo/keys/d/dead-letters/retry"),
            PanelRoute::Key { key: key("d"), request: KeyRequest::ReplayAll }
        );
        // Nothing else of a key: no events, flush, cancel, discard, dead-letter list.
        assert_eq!(code("POST", "/demo/keys/d/events"), "not_found");
        assert_eq!(code("POST", "/demo/keys/d/flush"), "not_found");
        assert_eq!(code("GET", "/demo/keys/d/dead-letters"), "not_found");
        assert_eq!(code("POST", "/demo/keys/d/dead-letters/7/retry"), "not_found");
        assert_eq!(code("DELETE", "/demo/keys/d"), "method_not_allowed");
        assert_eq!(code("GET", "/demo/keys/d/dead-letters/retry"), "method_not_allowed");
        assert_eq!(code("POST", "/demo/token"), "method_not_allowed");
        assert_eq!(code("POST", "/demo/sink"), "method_not_allowed");
        assert_eq!(code("GET", "/demo/sink/failing/d"), "method_not_allowed");
        assert_eq!(code("GET", "/demo/keys/%2E%2E"), "invalid_key");
        assert_eq!(code("PUT", "/demo/sink/failing/%FF"), "invalid_key");
    }

    #[test]
    fn the_demo_token_key_is_a_keys_query_parameter() {
        assert_eq!(token_key(Some("key=doc-1")).unwrap().as_str(), "doc-1");
        assert_eq!(token_key(Some("key=a%2Fb%20c%2B")).unwrap().as_str(), "a/b c+", "as encodeURIComponent writes it");
        for bad in [None, Some(""), Some("key="), Some("key=."), Some("key=%2E%2E"), Some("key=%FF"), Some("key=%0A")] {
            assert_eq!(token_key(bad).unwrap_err().code(), "invalid_key", "{bad:?}");
        }
        let long = format!("key={}", "k".repeat(513));
        assert_eq!(token_key(Some(&long)).unwrap_err().code(), "invalid_key");
        assert_eq!(token_key(Some("key=d&topic=orders")).unwrap_err().code(), "bad_query");
    }
}
