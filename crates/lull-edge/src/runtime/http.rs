//! JSON responses and the error shape, and the clock.

use serde::Serialize;
use worker::{Headers, Response};

use crate::http::ApiError;

/// Milliseconds since the epoch, as the core counts them.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

/// `value` as JSON with `status`.
pub fn json<T: Serialize>(status: u16, value: &T) -> worker::Result<Response> {
    Ok(Response::from_json(value)?.with_status(status))
}

/// The error as `{"error": {"code", "message"}}`, with `Allow` on a `405`.
fn error(error: &ApiError) -> worker::Result<Response> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    if let ApiError::MethodNotAllowed { allowed, .. } = error {
        headers.set("allow", allowed)?;
    }
    if let Some(secs) = error.retry_after_secs() {
        headers.set("retry-after", &secs.to_string())?;
    }
    Ok(Response::ok(error.to_json())?.with_status(error.status()).with_headers(headers))
}

/// A handler's result as the runtime wants it: the response, or the error as JSON.
pub fn respond(result: Result<Response, ApiError>) -> worker::Result<Response> {
    result.or_else(|e| error(&e))
}

/// A runtime failure is the API's `500 internal`.
impl From<worker::Error> for ApiError {
    fn from(error: worker::Error) -> Self {
        ApiError::Internal(error.to_string())
    }
}
