//! [`Cors`]: which web origins may call the API from a browser
//! (`LULL_CORS_ORIGINS`), and the headers that say so — for pages on another
//! origin using `lull-web/edge`.
//!
//! Guarantees: with no origins configured the API sends no CORS header (pages
//! on the worker's own origin need none); an allowed origin is echoed back
//! (never `*` with credentials), with `Vary: Origin`; a preflight from an
//! origin not allowed is refused with `403 origin_not_allowed`, so the
//! browser reports why.

use crate::error::ApiError;

/// Methods the API takes.
pub(crate) const ALLOW_METHODS: &str = "GET, POST, PUT, DELETE";
/// Request headers the API reads.
pub(crate) const ALLOW_HEADERS: &str = "authorization, content-type, idempotency-key";
/// Response headers a page may read (`Retry-After` on `429` and `503`).
pub(crate) const EXPOSE_HEADERS: &str = "retry-after";
/// How long a browser may cache a preflight (seconds).
pub(crate) const MAX_AGE_SECS: u32 = 86_400;
/// Origins a list may name at most.
pub const MAX_ORIGINS: usize = 64;

/// The origins allowed to call the API from a browser.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Cors {
    /// None: no CORS headers (the default).
    #[default]
    Off,
    /// `*`: any origin (bearer tokens still decide what a call may do).
    Any,
    /// These origins exactly (`scheme://host[:port]`).
    Origins(Vec<String>),
}

impl Cors {
    /// Parse `LULL_CORS_ORIGINS`: empty or unset (off), `*`, or origins
    /// separated by commas or spaces, each `http(s)://host[:port]` with no path.
    pub(crate) fn parse(text: Option<&str>) -> Result<Cors, ApiError> {
        let text = text.unwrap_or("").trim();
        if text.is_empty() {
            return Ok(Cors::Off);
        }
        if text == "*" {
            return Ok(Cors::Any);
        }
        let origins: Vec<String> =
            text.split([',', ' ']).filter(|o| !o.is_empty()).map(|o| o.trim_end_matches('/').to_string()).collect();
        if origins.len() > MAX_ORIGINS {
            return Err(ApiError::Config(format!(
                "LULL_CORS_ORIGINS names {} origins, at most {MAX_ORIGINS}",
                origins.len()
            )));
        }
        for origin in &origins {
            let rest = origin.strip_prefix("https://").or_else(|| origin.strip_prefix("http://"));
            let ok = rest.is_some_and(|host| !host.is_empty() && !host.contains(['/', '?', '#', '*']));
            if !ok {
                return Err(ApiError::Config(format!(
                    "LULL_CORS_ORIGINS: {origin:?} is not an origin (http(s)://host[:port], no path), or use *"
                )));
            }
        }
        Ok(Cors::Origins(origins))
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin`, if allowed.
    pub(crate) fn allow<'a>(&self, origin: Option<&'a str>) -> Option<&'a str> {
        let origin = origin?;
        match self {
            Cors::Off => None,
            Cors::Any => Some(origin),
            Cors::Origins(list) => list.iter().any(|o| o.eq_ignore_ascii_case(origin)).then_some(origin),
        }
    }

    /// Headers for a response to a request from `origin` (none if it is not allowed).
    pub(crate) fn headers(&self, origin: Option<&str>) -> Vec<(&'static str, String)> {
        match self.allow(origin) {
            Some(origin) => vec![
                ("access-control-allow-origin", origin.to_string()),
                ("access-control-expose-headers", EXPOSE_HEADERS.into()),
                ("vary", "Origin".into()),
            ],
            None => Vec::new(),
        }
    }

    /// The answer to a preflight (`OPTIONS`) from `origin`: its headers, or `403`.
    pub(crate) fn preflight(&self, origin: Option<&str>) -> Result<Vec<(&'static str, String)>, ApiError> {
        let mut headers = self.headers(origin);
        if headers.is_empty() {
            return Err(ApiError::OriginNotAllowed(origin.unwrap_or("(none)").to_string()));
        }
        headers.push(("access-control-allow-methods", ALLOW_METHODS.into()));
        headers.push(("access-control-allow-headers", ALLOW_HEADERS.into()));
        headers.push(("access-control-max-age", MAX_AGE_SECS.to_string()));
        Ok(headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_listed_checked_and_echoed() {
        assert_eq!(Cors::parse(None), Ok(Cors::Off));
        assert_eq!(Cors::parse(Some(" ")), Ok(Cors::Off));
        assert_eq!(Cors::parse(Some("*")), Ok(Cors::Any));
        let cors = Cors::parse(Some("https://app.example.com, http://127.0.0.1:5173/")).unwrap();
        assert_eq!(cors.allow(Some("https://app.example.com")), Some("https://app.example.com"));
        assert_eq!(cors.allow(Some("http://127.0.0.1:5173")), Some("http://127.0.0.1:5173"));
        assert_eq!(cors.allow(Some("https://evil.example")), None);
        assert_eq!(cors.allow(None), None);
        assert_eq!(Cors::Off.allow(Some("https://app.example.com")), None);
        assert_eq!(Cors::Any.allow(Some("https://x.example")), Some("https://x.example"));
        let headers = cors.headers(Some("https://app.example.com"));
        assert!(headers.contains(&("vary", "Origin".into())));
        assert!(cors.headers(Some("https://evil.example")).is_empty());
    }

    #[test]
    fn preflights_answer_allowed_origins_and_refuse_the_rest() {
        let cors = Cors::parse(Some("https://app.example.com")).unwrap();
        let headers = cors.preflight(Some("https://app.example.com")).unwrap();
        let get = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str());
        assert_eq!(get("access-control-allow-headers"), Some(ALLOW_HEADERS));
        assert_eq!(get("access-control-allow-methods"), Some(ALLOW_METHODS));
        assert_eq!(cors.preflight(Some("https://evil.example")).unwrap_err().code(), "origin_not_allowed");
        assert_eq!(Cors::Off.preflight(Some("https://app.example.com")).unwrap_err().status(), 403);
    }

    #[test]
    fn bad_lists_are_configuration_errors() {
        for bad in ["app.example.com", "https://app.example.com/path", "https://*.example.com", "ftp://x", "https://"] {
            assert_eq!(Cors::parse(Some(bad)).unwrap_err().code(), "config", "{bad}");
        }
        let many = (0..=MAX_ORIGINS).map(|i| format!("https://a{i}.example")).collect::<Vec<_>>().join(",");
        assert_eq!(Cors::parse(Some(&many)).unwrap_err().code(), "config");
    }
}
