//! JSON responses and the error shape, reading an object's answer, and the clock.

use serde::Serialize;
use serde_json::json;
use worker::worker_sys::web_sys;
use worker::{Headers, Response, console_log};

use crate::http::ApiError;
use crate::http::route::path_and_query;
use crate::log::Fact;

/// Milliseconds since the epoch, as the core counts them.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

/// `value` as JSON with `status`.
pub fn json<T: Serialize>(status: u16, value: &T) -> worker::Result<Response> {
    Ok(Response::from_json(value)?.with_status(status))
}

/// `text` (JSON already written) with `status`, passed on as it is.
pub fn json_text(status: u16, text: String) -> worker::Result<Response> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    Ok(Response::ok(text)?.with_status(status).with_headers(headers))
}

/// A request id: 16 hex digits, naming an error in the answer and in the log.
fn request_id() -> String {
    let draw = || (worker::js_sys::Math::random() * 4_294_967_296.0) as u64;
    format!("{:016x}", (draw() << 32) ^ draw())
}

/// The error as `{"error": {"code", "message", "request_id"}}`, with `Allow`
/// on a `405`; a private error's detail goes to the log under the request id
/// (and to the caller only if `reveal`).
fn error(error: &ApiError, reveal: bool) -> worker::Result<Response> {
    let id = request_id();
    if error.is_private() {
        let fact = Fact::new("error", json!({"request_id": id, "code": error.code(), "error": error.message()}));
        console_log!("{}", fact.line(&[]));
    }
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    if let ApiError::MethodNotAllowed { allowed, .. } = error {
        headers.set("allow", allowed)?;
    }
    if let Some(secs) = error.retry_after_secs() {
        headers.set("retry-after", &secs.to_string())?;
    }
    Ok(Response::ok(error.to_public_json(&id, reveal))?.with_status(error.status()).with_headers(headers))
}

/// A handler's result as the runtime wants it: the response, or the error as JSON.
pub fn respond(result: Result<Response, ApiError>) -> worker::Result<Response> {
    respond_as(result, false)
}

/// [`respond`], showing a private error's detail if `reveal` (an admin asked).
pub fn respond_as(result: Result<Response, ApiError>, reveal: bool) -> worker::Result<Response> {
    result.or_else(|e| error(&e, reveal))
}

/// A runtime failure is the API's `500 internal`.
impl From<worker::Error> for ApiError {
    fn from(error: worker::Error) -> Self {
        ApiError::Internal(error.to_string())
    }
}

/// A request as the runtime hands it to the Worker, read through the
/// runtime's own object: unlike `worker::Request`, which reads `cf` (an
/// object the runtime builds on demand) on every request, it reads only what
/// a route asks for.
pub struct Incoming {
    raw: worker::worker_sys::web_sys::Request,
    /// The URL, read from the runtime once.
    url: String,
}

impl Incoming {
    /// The runtime's request.
    pub fn new(raw: worker::worker_sys::web_sys::Request) -> Self {
        let url = raw.url();
        Incoming { raw, url }
    }

    /// The method, upper case.
    pub fn method(&self) -> String {
        self.raw.method()
    }

    /// The URL's path, as the runtime gives it (percent-encoded).
    pub fn path(&self) -> String {
        path_and_query(&self.url).0.to_string()
    }

    /// The URL's query, if any.
    pub fn query(&self) -> Option<String> {
        path_and_query(&self.url).1.map(str::to_string)
    }

    /// A header's value, if present.
    pub fn header(&self, name: &str) -> Option<String> {
        self.raw.headers().get(name).ok().flatten()
    }

    /// The whole body.
    pub async fn bytes(&self) -> Result<Vec<u8>, ApiError> {
        let buffer = self.raw.array_buffer().map_err(|e| ApiError::Internal(format!("{e:?}")))?;
        let buffer = worker::wasm_bindgen_futures::JsFuture::from(buffer)
            .await
            .map_err(|e| ApiError::Internal(format!("{e:?}")))?;
        Ok(worker::js_sys::Uint8Array::new(&buffer).to_vec())
    }

    /// As a `worker::Request`, for the routes that take one (the demo's).
    #[cfg(feature = "demo")]
    pub fn into_request(self) -> worker::Request {
        worker::Request::from(self.raw)
    }
}

/// An object's answer, read: status, text and `Retry-After`. The runtime
/// reads the body in one call (`Response.text()`), where
/// `worker::Response::text` reads it chunk by chunk through a stream reader
/// driven from wasm, allocating a promise, a buffer and a copy per chunk
/// (about a tenth of what the isolate allocated per batch request on a hot key).
pub async fn answer(res: Response) -> Result<(u16, String, Option<String>), ApiError> {
    let status = res.status_code();
    let retry_after = res.headers().get("retry-after")?;
    let raw: web_sys::Response = res.into();
    let failed = |e| ApiError::Internal(format!("an object's answer: {e:?}"));
    let text = worker::wasm_bindgen_futures::JsFuture::from(raw.text().map_err(failed)?).await.map_err(failed)?;
    let text = text.as_string().ok_or_else(|| ApiError::Internal("an object's answer is not text".into()))?;
    Ok((status, text, retry_after))
}
