//! [`Lull`]: a lull-edge API's address and token, and how one request goes
//! out and comes back (paths, bearer token, retries, error bodies).

use std::time::SystemTime;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::{Method, Response};
use serde::de::DeserializeOwned;
use url::Url;

use crate::code::ErrorCode;
use crate::defaults;
use crate::error::{ApiError, Error, Result};
use crate::retry::{RetryObserver, RetryPolicy, parse_retry_after, retrying};

/// What `encodeURIComponent` leaves as it is: a key is one path segment.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// A client of one lull-edge deployment.
///
/// ```no_run
/// # async fn demo() -> Result<(), lull_client::Error> {
/// let lull = lull_client::Lull::new("https://lull.example.com", "an-ingest-token")?;
/// let accepted = lull.send("docs", "doc-42", &serde_json::json!({"rev": 7})).await?;
/// println!("window {} seq {}", accepted.window, accepted.seq);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Lull {
    http: reqwest::Client,
    base: String,
    token: String,
    retry: RetryPolicy,
    observer: Option<RetryObserver>,
}

impl std::fmt::Debug for Lull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lull").field("base", &self.base).field("retry", &self.retry).finish_non_exhaustive()
    }
}

/// An `http://` or `https://` URL, without a trailing slash (its path kept).
pub(crate) fn base_url(text: &str, what: &str) -> Result<String> {
    let url = Url::parse(text.trim()).map_err(|e| Error::Config(format!("{what} is not a URL ({e}): {text:?}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::Config(format!("{what} must be an http:// or https:// URL: {text:?}")));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Error::Config(format!("{what} must not have a query or fragment: {text:?}")));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// A bearer token as it may go in a header.
pub(crate) fn bearer(token: &str, what: &str) -> Result<String> {
    let token = token.trim();
    if token.is_empty() {
        return Err(Error::Config(format!("{what} is empty")));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::Config(format!("{what} holds spaces or characters a header cannot carry")));
    }
    Ok(format!("Bearer {token}"))
}

/// The HTTP client every call of this crate uses.
pub(crate) fn http_client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .user_agent(concat!("lull-client/", env!("CARGO_PKG_VERSION")))
        .timeout(defaults::REQUEST_TIMEOUT)
        .connect_timeout(defaults::CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| Error::Config(format!("HTTP client: {e}")))
}

/// One path segment, percent-encoded; `.` and `..` refused (they are dot
/// segments: the path would reach another route).
pub(crate) fn segment(text: &str, what: &str) -> Result<String> {
    if text == "." || text == ".." {
        return Err(Error::Input(format!("the {what} {text:?} is a path's dot segment")));
    }
    Ok(utf8_percent_encode(text, COMPONENT).to_string())
}

/// A request to send, rebuilt as it is for each attempt.
pub(crate) struct Call<'a> {
    pub method: Method,
    /// The path after the base (starting `/`), its segments already encoded.
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    /// A JSON body, as text.
    pub body: Option<String>,
    pub idempotency_key: Option<&'a str>,
}

impl<'a> Call<'a> {
    pub(crate) fn new(method: Method, path: String) -> Self {
        Call { method, path, query: Vec::new(), body: None, idempotency_key: None }
    }

    pub(crate) fn body(mut self, json: String) -> Self {
        self.body = Some(json);
        self
    }

    /// `METHOD /path`, for error messages.
    fn describe(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

impl Lull {
    /// A client of the deployment at `url` (`https://…`, a path kept),
    /// calling with `token` (an ingest, admin or client token), retrying with
    /// [`RetryPolicy::default`].
    ///
    /// # Errors
    /// [`Error::Config`] for a URL that is not `http(s)://`, or an empty token.
    pub fn new(url: &str, token: &str) -> Result<Lull> {
        Ok(Lull {
            http: http_client()?,
            base: base_url(url, "the lull URL")?,
            token: bearer(token, "the lull token")?,
            retry: RetryPolicy::default(),
            observer: None,
        })
    }

    /// This client retrying with `policy`.
    pub fn with_retry(mut self, policy: RetryPolicy) -> Lull {
        self.retry = policy;
        self
    }

    /// This client telling `observer` before each wait between attempts.
    pub fn with_retry_observer(mut self, observer: RetryObserver) -> Lull {
        self.observer = Some(observer);
        self
    }

    /// The retry policy in force.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// `/v1/topics/{topic}` with `rest` appended (already encoded).
    pub(crate) fn topic_path(topic: &str, rest: &str) -> Result<String> {
        Ok(format!("/v1/topics/{}{rest}", segment(topic, "topic")?))
    }

    /// `/v1/topics/{topic}/keys/{key}` with `rest` appended.
    pub(crate) fn key_path(topic: &str, key: &str, rest: &str) -> Result<String> {
        Lull::topic_path(topic, &format!("/keys/{}{rest}", segment(key, "key")?))
    }

    /// Send `call` (with retries) and decode its 2xx answer as `T`.
    pub(crate) async fn call<T: DeserializeOwned>(&self, call: Call<'_>) -> Result<T> {
        let what = call.describe();
        let bytes = retrying(&self.retry, self.observer.as_ref(), || self.once(&call)).await?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode { what, detail: e.to_string() })
    }

    /// One attempt: the 2xx answer's bytes, or the refusal.
    async fn once(&self, call: &Call<'_>) -> Result<Vec<u8>> {
        let url = format!("{}{}", self.base, call.path);
        let mut request = self.http.request(call.method.clone(), url).header("authorization", &self.token);
        if !call.query.is_empty() {
            request = request.query(&call.query);
        }
        if let Some(key) = call.idempotency_key {
            request = request.header("idempotency-key", key);
        }
        if let Some(body) = &call.body {
            request = request.header("content-type", "application/json").body(body.clone());
        }
        let response = request.send().await.map_err(Error::Transport)?;
        if response.status().is_success() {
            return Ok(response.bytes().await.map_err(Error::Transport)?.to_vec());
        }
        Err(Error::Api(api_error(response).await))
    }
}

/// The `Retry-After` of `response`, if any and readable.
pub(crate) fn retry_after(response: &Response) -> Option<std::time::Duration> {
    let value = response.headers().get("retry-after")?.to_str().ok()?;
    parse_retry_after(value, SystemTime::now())
}

/// The start of an answer's body that is not the error shape it should be
/// ([`defaults::ERROR_TEXT_CHARS`] characters), for its error's message.
pub(crate) fn excerpt(text: &str) -> String {
    text.chars().take(defaults::ERROR_TEXT_CHARS).collect()
}

/// A refusal's [`ApiError`], from lull-edge's error body (or the start of another body).
async fn api_error(response: Response) -> ApiError {
    #[derive(serde::Deserialize)]
    struct Problem {
        error: Detail,
    }
    #[derive(serde::Deserialize)]
    struct Detail {
        code: ErrorCode,
        message: String,
        #[serde(default)]
        request_id: Option<String>,
    }
    let status = response.status().as_u16();
    let retry_after = retry_after(&response);
    let text = response.text().await.unwrap_or_default();
    match serde_json::from_str::<Problem>(&text) {
        Ok(Problem { error }) => {
            ApiError { status, code: error.code, message: error.message, request_id: error.request_id, retry_after }
        }
        Err(_) => ApiError {
            status,
            code: ErrorCode::Other(String::new()),
            message: excerpt(&text),
            request_id: None,
            retry_after,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_one_segment_as_encode_uri_component_makes_it() {
        assert_eq!(segment("customer/42 é?#%", "key").unwrap(), "customer%2F42%20%C3%A9%3F%23%25");
        assert_eq!(segment("a.b-c_d!~*'()", "key").unwrap(), "a.b-c_d!~*'()");
        assert!(matches!(segment("..", "key"), Err(Error::Input(_))));
        assert!(matches!(segment(".", "key"), Err(Error::Input(_))));
    }

    #[test]
    fn base_urls_keep_their_path_and_lose_a_trailing_slash() {
        assert_eq!(base_url("http://127.0.0.1:8787/", "u").unwrap(), "http://127.0.0.1:8787");
        assert_eq!(base_url("https://x.example/lull/", "u").unwrap(), "https://x.example/lull");
        assert!(matches!(base_url("ftp://x", "u"), Err(Error::Config(_))));
        assert!(matches!(base_url("not a url", "u"), Err(Error::Config(_))));
        assert!(matches!(bearer("  ", "t"), Err(Error::Config(_))));
        assert!(matches!(bearer("a b", "t"), Err(Error::Config(_))));
    }
}
