//! Raw bindings: the few JavaScript globals lull-web touches, and the glue.
//! Typed drivers build on these; nothing else in the crate declares `extern` items.

use js_sys::{Array, Function};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;

    /// `setTimeout` of the global scope (window, worker or Node).
    #[wasm_bindgen(js_name = setTimeout)]
    pub(crate) fn set_timeout(handler: &Function, ms: f64) -> JsValue;

    /// `clearTimeout` of the global scope.
    #[wasm_bindgen(js_name = clearTimeout)]
    pub(crate) fn clear_timeout(handle: &JsValue);
}

#[wasm_bindgen(module = "/js/glue.js")]
extern "C" {
    /// Wrap a driver into a function forwarding to `inner.call(this, args)`,
    /// with `methods` forwarded too.
    pub(crate) fn callable(inner: JsValue, methods: Array) -> Function;

    /// A slot `{ self, args, result, invoke(run) }` holding a sync debouncer's latest call.
    #[wasm_bindgen(js_name = syncSlot)]
    pub(crate) fn sync_slot(func: &Function) -> JsValue;

    /// lodash's callable over a sync driver (`inner`) and its slot.
    #[wasm_bindgen(js_name = syncCallable)]
    pub(crate) fn sync_callable(inner: JsValue, slot: &JsValue) -> Function;

    /// Settle what user code returned (`threw`: it threw `value`), then call
    /// `done(ok, value)` once, in a microtask — a promise's `then`, without Rust futures.
    pub(crate) fn settle(value: &JsValue, threw: bool, done: &JsValue);

    /// Report an error from user code run by a timer (`reportError`), without unwinding Rust.
    #[wasm_bindgen(js_name = reportLater)]
    pub(crate) fn report_later(error: &JsValue);
}

/// Monotonic milliseconds (`performance.now()`, floored): the engine's clock.
pub(crate) fn now() -> u64 {
    millis(performance_now())
}

/// A `performance.now()` reading as the engine's whole milliseconds.
pub(crate) fn millis(ms: f64) -> u64 {
    if ms.is_finite() && ms > 0.0 { ms.floor() as u64 } else { 0 }
}

/// A `TypeError` with lull's prefix.
pub(crate) fn type_error(message: impl AsRef<str>) -> JsValue {
    let mut text = String::from("lull: ");
    text.push_str(message.as_ref());
    js_sys::TypeError::new(&text).into()
}

/// A `DOMException` named `AbortError`, as `fetch` rejects with.
pub(crate) fn abort_error(message: &str) -> JsValue {
    dom_exception(message, "AbortError")
}

/// A `DOMException` named `TimeoutError`, as `AbortSignal.timeout` aborts with.
pub(crate) fn timeout_error(message: &str) -> JsValue {
    dom_exception(message, "TimeoutError")
}

fn dom_exception(message: &str, name: &str) -> JsValue {
    web_sys::DomException::new_with_message_and_name(message, name).map(JsValue::from).unwrap_or_else(|e| e)
}
