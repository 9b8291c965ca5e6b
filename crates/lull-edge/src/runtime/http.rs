//! Responses, built as the runtime's own `Response` in one step (never
//! wrapped in a `worker::Response` and rebuilt around its body's stream); the
//! error shape; calls to a Durable Object and reading its answer; the request
//! as it came; and the clock.

use serde::Serialize;
use serde_json::json;
use worker::console_log;
use worker::js_sys::{Array, Date, Object, Promise, Reflect, Uint8Array};
use worker::wasm_bindgen::prelude::wasm_bindgen;
use worker::wasm_bindgen::{self, JsCast, JsValue};
use worker::worker_sys::web_sys::{self, Headers, ReadableStreamDefaultReader, RequestInit, ResponseInit};

use crate::http::batch;
use crate::http::route::{authority, path_and_query};
use crate::http::{ApiError, BodyRead, BodyWithin, ObjectAnswer, READ_HEADERS, RequestParts};
use crate::log::Fact;

/// Milliseconds since the epoch, as the core counts them (`Date.now()`: one call, no `Date` made).
pub(crate) fn now_ms() -> u64 {
    Date::now() as u64
}

/// A response as the runtime takes it.
pub(crate) type Reply = web_sys::Response;

/// A thrown JS value as text: an error's message, else its debug form.
pub(crate) fn thrown_text(e: &JsValue) -> String {
    match e.dyn_ref::<worker::js_sys::Error>() {
        Some(error) => String::from(error.message()),
        None => format!("{e:?}"),
    }
}

/// A runtime call's failure (a thrown JS value) as the API's `500 internal`.
fn thrown(what: &str) -> impl Fn(JsValue) -> ApiError + '_ {
    move |e| ApiError::Internal(format!("{what}: {}", thrown_text(&e)))
}

/// `message` as a JS `Error`: what an export's promise rejects with.
pub(crate) fn js_error(message: &str) -> JsValue {
    worker::js_sys::Error::new(message).into()
}

/// `headers` (each name once) as the runtime takes them in a response's or a
/// request's init: a plain object of name and value, from which it builds the
/// message's own headers. A `Headers` object made here would only be copied,
/// and a list of pairs is walked pair by pair through JavaScript's iteration
/// protocol (the runtime tries an iterable first): about 1.4% of the
/// runtime's process CPU on single-event windows, by a `perf` profile.
pub(crate) fn header_object(headers: &[(&str, &str)]) -> Object {
    let object = Object::new();
    for (name, value) in headers {
        // Setting a string property on a plain object made here cannot fail.
        let _ = Reflect::set(&object, &(*name).into(), &(*value).into());
    }
    object
}

/// `body` with `status` and `headers`.
pub(crate) fn reply(status: u16, body: Option<&str>, headers: &[(&str, &str)]) -> Result<Reply, ApiError> {
    let init = ResponseInit::new();
    init.set_status(status);
    if !headers.is_empty() {
        init.set_headers(&header_object(headers));
    }
    Reply::new_with_opt_str_and_init(body, &init).map_err(thrown("a response"))
}

/// `value` as JSON text.
pub(crate) fn json_of<T: Serialize>(value: &T) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(|e| ApiError::Internal(e.to_string()))
}

/// `value` as JSON with `status`.
pub(crate) fn json<T: Serialize>(status: u16, value: &T) -> Result<Reply, ApiError> {
    json_text(status, &json_of(value)?)
}

/// `text` (JSON already written) with `status`, passed on as it is.
pub(crate) fn json_text(status: u16, text: &str) -> Result<Reply, ApiError> {
    json_response(status, text, None).map_err(thrown("a response"))
}

/// An object's answer passed on to the caller as it came: status, JSON text and `Retry-After`.
pub(crate) fn pass_on(answer: &ObjectAnswer) -> Result<Reply, ApiError> {
    let ObjectAnswer { status, body, retry_after } = answer;
    json_response(*status, body, retry_after.as_deref()).map_err(thrown("a response"))
}

/// A request id: 16 hex digits, naming an error in the answer and in the log.
fn request_id() -> String {
    let draw = || (worker::js_sys::Math::random() * 4_294_967_296.0) as u64;
    format!("{:016x}", (draw() << 32) ^ draw())
}

/// The error as `{"error": {"code", "message", "request_id"}}`; a private
/// error's detail goes to the log under the request id (and to the caller
/// only if `reveal`).
fn error_text(error: &ApiError, reveal: bool) -> String {
    let id = request_id();
    if let Some(fact) = Fact::error(error, &id) {
        console_log!("{}", fact.line(&[]));
    }
    error.to_public_json(&id, reveal)
}

/// What every event of a batch's key gets when its share failed with `error`
/// before its object answered ([`batch::key_failed`]): answered under a
/// request id of its own, a private error's detail logged under it.
pub(crate) fn share_failed(error: &ApiError) -> (u16, serde_json::Value) {
    let (answer, fact) = batch::key_failed(error, &request_id());
    if let Some(fact) = fact {
        console_log!("{}", fact.line(&[]));
    }
    answer
}

/// The error's answer ([`error_text`]), with `Allow` on a `405` and `Retry-After` on a refusal.
fn error(error: &ApiError, reveal: bool) -> Result<Reply, ApiError> {
    let retry_after = error.retry_after_secs().map(|secs| secs.to_string());
    let mut headers = vec![("content-type", "application/json")];
    if let ApiError::MethodNotAllowed { allowed, .. } = error {
        headers.push(("allow", allowed));
    }
    if let Some(secs) = &retry_after {
        headers.push(("retry-after", secs));
    }
    reply(error.status(), Some(&error_text(error, reveal)), &headers)
}

/// A handler's result as the runtime wants it: the response, or the error as
/// JSON, showing a private error's detail if `reveal` (an admin asked).
pub(crate) fn respond_as(result: Result<Reply, ApiError>, reveal: bool) -> Result<Reply, JsValue> {
    result.or_else(|e| error(&e, reveal)).map_err(|e| js_error(&e.message()))
}

/// A runtime failure is the API's `500 internal`.
impl From<worker::Error> for ApiError {
    fn from(error: worker::Error) -> Self {
        ApiError::Internal(error.to_string())
    }
}

/// A request as the runtime hands it to the Worker, read through the
/// runtime's own object: unlike `worker::Request`, which reads `cf` (an object
/// the runtime builds on demand) on every request, it reads the method, the
/// URL and [`READ_HEADERS`] in one call (`js/messages.mjs`), and anything
/// else only when a route asks for it.
pub(crate) struct Incoming {
    raw: web_sys::Request,
    /// The method, the URL and the headers every request is read for.
    parts: RequestParts,
    /// The headers, fetched from the runtime at the first other one asked for.
    headers: std::cell::OnceCell<Headers>,
}

#[wasm_bindgen(module = "/js/messages.mjs")]
extern "C" {
    /// The method, the URL and the headers `names` of `request`, one per line ([`RequestParts::from_lines`]).
    #[wasm_bindgen(js_name = requestParts)]
    fn request_parts(request: &web_sys::Request, names: &Array) -> String;

    /// `text` (JSON) answered with `status`, and `Retry-After` if `retry_after` is given.
    #[wasm_bindgen(catch, js_name = jsonResponse)]
    fn json_response(status: u16, text: &str, retry_after: Option<&str>) -> Result<Reply, JsValue>;
}

thread_local! {
    /// [`READ_HEADERS`] as the runtime's side takes them, made once.
    static READ_HEADER_NAMES: Array = READ_HEADERS.iter().map(|name| JsValue::from_str(name)).collect();
}

impl Incoming {
    /// The runtime's request, its method, URL and [`READ_HEADERS`] read.
    pub(crate) fn new(raw: web_sys::Request) -> Result<Self, ApiError> {
        let lines = READ_HEADER_NAMES.with(|names| request_parts(&raw, names));
        Ok(Incoming { parts: RequestParts::from_lines(&lines)?, raw, headers: std::cell::OnceCell::new() })
    }

    /// The method, upper case.
    pub(crate) fn method(&self) -> &str {
        &self.parts.method
    }

    /// The URL's path, as the runtime gives it (percent-encoded).
    pub(crate) fn path(&self) -> String {
        path_and_query(&self.parts.url).0.to_string()
    }

    /// The URL's host and port (what its `Host` header said).
    pub(crate) fn host(&self) -> &str {
        authority(&self.parts.url)
    }

    /// The URL's query, if any.
    pub(crate) fn query(&self) -> Option<String> {
        path_and_query(&self.parts.url).1.map(str::to_string)
    }

    /// A header's value, if present (`name` in lower case).
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        match self.parts.header(name) {
            Ok(read) => read.map(str::to_string),
            Err(()) => self.headers.get_or_init(|| self.raw.headers()).get(name).ok().flatten(),
        }
    }

    /// The whole body (the demo sink's: a delivery lull itself made; every
    /// route of the API reads its body within its bound, [`Incoming::bytes_within`]).
    #[cfg(feature = "demo")]
    pub(crate) async fn bytes(&self) -> Result<Vec<u8>, ApiError> {
        self.whole().await
    }

    /// The whole body, in one call.
    async fn whole(&self) -> Result<Vec<u8>, ApiError> {
        let buffer = settled(self.raw.array_buffer(), "the request's body").await?;
        Ok(Uint8Array::new(&buffer).to_vec())
    }

    /// The body within `limit` bytes, read as its framing allows ([`BodyRead`]):
    /// `413 payload_too_large` for a declared length past the bound; in one
    /// call for a length within it; else from its stream chunk by chunk
    /// ([`BodyWithin`]): at the first chunk past `limit` bytes the stream is
    /// cancelled (nothing more is pulled from the caller) and the answer is `413`.
    pub(crate) async fn bytes_within(&self, limit: usize) -> Result<Vec<u8>, ApiError> {
        let framing =
            BodyRead::of(self.header("content-length").as_deref(), self.header("transfer-encoding").as_deref(), limit);
        match framing {
            BodyRead::TooLarge => Err(ApiError::PayloadTooLarge { limit }),
            BodyRead::Whole => {
                let bytes = self.whole().await?;
                // The runtime holds a body to its length; should one ever not, it is refused all the same.
                if bytes.len() > limit { Err(ApiError::PayloadTooLarge { limit }) } else { Ok(bytes) }
            }
            BodyRead::Streamed => self.streamed_within(limit).await,
        }
    }

    /// The body, read from its stream chunk by chunk ([`BodyWithin`]).
    async fn streamed_within(&self, limit: usize) -> Result<Vec<u8>, ApiError> {
        let what = "the request's body";
        let Some(stream) = self.raw.body() else { return Ok(Vec::new()) };
        let reader = ReadableStreamDefaultReader::new(&stream).map_err(thrown(what))?;
        let mut body = BodyWithin::new(limit);
        loop {
            let step = settled(Ok(reader.read()), what).await?;
            let done = Reflect::get(&step, &"done".into()).map_err(thrown(what))?;
            if done.is_truthy() {
                return Ok(body.into_bytes());
            }
            let chunk: Uint8Array = Reflect::get(&step, &"value".into()).map_err(thrown(what))?.unchecked_into();
            if let Err(too_large) = body.push(chunk.length() as usize, |into| chunk.copy_to(into)) {
                // Not awaited: the answer goes now; the runtime stops pulling the body.
                let _cancelled = reader.cancel();
                return Err(too_large);
            }
        }
    }
}

/// The value a runtime call's promise settles to.
async fn settled(promise: Result<Promise, JsValue>, what: &str) -> Result<JsValue, ApiError> {
    super::settle::outcome_of(&promise.map_err(thrown(what))?).await.map_err(thrown(what))
}

/// The text `promise` (a body's `text()`) settles to.
async fn text_of(promise: Result<Promise, JsValue>, what: &str) -> Result<String, ApiError> {
    settled(promise, what).await?.as_string().ok_or_else(|| ApiError::Internal(format!("{what} is not text")))
}

/// What workerd answers an RPC call to an object whose class is not a
/// `DurableObject`: one of the previous release's, while a deploy rolls out.
const NOT_RPC: &str = "does not support RPC";

/// An object's answer to a call ([`call_object`]), as the runtime carries it
/// over RPC: `[status, JSON text, Retry-After seconds or undefined]`. An error
/// is answered as the Worker answers it ([`error_text`]).
pub(crate) fn answer_to_router(result: Result<(u16, String), ApiError>) -> JsValue {
    let (status, text, retry_after) = match result {
        Ok((status, text)) => (status, text, None),
        Err(e) => (e.status(), error_text(&e, false), e.retry_after_secs()),
    };
    let retry_after = retry_after.map_or(JsValue::UNDEFINED, |secs| JsValue::from_f64(secs as f64));
    Array::of3(&status.into(), &text.into(), &retry_after).into()
}

thread_local! {
    /// Whether this isolate has logged a call that fell back to a `POST` ([`call_object`]).
    static FELL_BACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Call the object `stub_of` gives with `wire` (the call as text) and read its
/// answer: over RPC (its `call`, [`answer_to_router`]), so no `Request`,
/// `Response` or `Headers` is made on either side; or, if the object is of the
/// previous release (not a `DurableObject`: a deploy is rolling out), as a
/// `POST` of `wire` to `url` (which only names the kind of object in its log),
/// through a new stub (a stub that threw may refuse every later call). The
/// first such `POST` of an isolate is logged (`rpc_fallback`): seen outside
/// a rollout, it means the build lost its entry module (`js/entry.mjs`).
pub(crate) async fn call_object(
    stub_of: impl Fn() -> Result<worker::Stub, ApiError>,
    url: &str,
    wire: &str,
) -> Result<ObjectAnswer, ApiError> {
    let what = "an object's answer";
    let raw: worker::worker_sys::DurableObject = stub_of()?.into_rpc();
    let rpc: &super::sys::ObjectStub = raw.unchecked_ref();
    let called = match rpc.call(wire) {
        Ok(promise) => super::settle::outcome_of(&promise).await,
        Err(e) => Err(e),
    };
    let answer = match called {
        Ok(answer) => answer,
        Err(e) => {
            let why = thrown_text(&e);
            if !why.contains(NOT_RPC) {
                return Err(ApiError::Internal(format!("{what}: {why}")));
            }
            if !FELL_BACK.replace(true) {
                console_log!("{}", Fact::new("rpc_fallback", json!({"url": url, "error": why})).line(&[]));
            }
            let fresh: worker::worker_sys::DurableObject = stub_of()?.into_rpc();
            return post_to_object(&fresh, url, wire)
                .await
                .map_err(|e| ApiError::Internal(format!("{} (after RPC failed: {why})", e.message())));
        }
    };
    let answer: &Array = answer.dyn_ref().ok_or_else(|| ApiError::Internal(format!("{what} is not a list")))?;
    // A status a `Response` could carry, as the previous release's answers did.
    let status = answer.get(0).as_f64().filter(|s| s.fract() == 0.0 && (200.0..=599.0).contains(s));
    let (Some(status), Some(text)) = (status, answer.get(1).as_string()) else {
        return Err(ApiError::Internal(format!("{what} is not [status, text]")));
    };
    let retry_after = answer.get(2).as_f64().map(|secs| (secs as u64).to_string());
    Ok(ObjectAnswer { status: status as u16, body: text, retry_after })
}

/// `wire` as a `POST` to `url` on the object `raw`, as the previous release
/// called its objects, and its answer: status, text and `Retry-After` (on a
/// refusal). Both are the runtime's own, the answer read in one call
/// (`Response.text()`).
async fn post_to_object(
    raw: &worker::worker_sys::DurableObject,
    url: &str,
    wire: &str,
) -> Result<ObjectAnswer, ApiError> {
    let init = RequestInit::new();
    init.set_method("POST");
    init.set_body(&JsValue::from_str(wire));
    let request = web_sys::Request::new_with_str_and_init(url, &init).map_err(thrown("an object's request"))?;
    let answer: Reply = settled(raw.fetch_with_request(&request), "an object's answer")
        .await?
        .dyn_into()
        .map_err(thrown("an object's answer"))?;
    let status = answer.status();
    // An object sets `Retry-After` only on a refusal: a success's headers are not read.
    let retry_after = if status >= 400 { answer.headers().get("retry-after").ok().flatten() } else { None };
    Ok(ObjectAnswer { status, body: text_of(answer.text(), "an object's answer").await?, retry_after })
}
