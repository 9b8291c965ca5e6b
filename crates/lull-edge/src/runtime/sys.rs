//! Raw JS behind a small typed extension (the shape of workers-rs'
//! `worker-sys/src/ext`): what workers-rs 0.8.7 does not offer yet — a
//! second handle on a Durable Object's state, `storage.transactionSync`, an
//! object's RPC method, and a queue message's `attempts` — and the timers
//! (`setTimeout` with any JS callback, `clearTimeout`). All are small enough
//! to offer upstream.

use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use worker::State;
use worker::js_sys::Function;
use worker::worker_sys::{DurableObjectState, DurableObjectStorage};

mod glue {
    use wasm_bindgen::prelude::*;
    use worker::js_sys::Function;

    #[wasm_bindgen]
    extern "C" {
        /// A Durable Object's `storage`, for the methods workers-rs does not bind.
        pub type Storage;

        /// `storage.transactionSync(fn)`: runs `fn`; its SQL statements apply all or nothing.
        #[wasm_bindgen(method, catch, js_name = transactionSync)]
        pub fn transaction_sync(this: &Storage, body: &Function) -> Result<JsValue, JsValue>;

        /// An object's stub, as RPC reaches the methods of its class (`js/entry.mjs`).
        pub type ObjectStub;

        /// `stub.call(wire)`: the object's `call`, over RPC; or the error it threw before it began.
        #[wasm_bindgen(method, catch)]
        pub fn call(this: &ObjectStub, wire: &str) -> Result<worker::js_sys::Promise, JsValue>;

        /// A queue message, for the properties workers-rs does not bind.
        pub type QueueMessage;

        /// `message.attempts`: the deliveries of the message so far, this one included (from 1).
        #[wasm_bindgen(method, getter)]
        pub fn attempts(this: &QueueMessage) -> JsValue;
    }
}

pub(super) use glue::ObjectStub;

/// `setTimeout(callback, ms)`: the timer's id (for [`clear_timeout`]), or the error it threw.
pub(super) fn set_timeout(callback: &Function, ms: u64) -> Result<i32, JsValue> {
    let ms = i32::try_from(ms).unwrap_or(i32::MAX);
    global_scope().set_timeout_with_callback_and_timeout_and_arguments_0(callback, ms)
}

/// `clearTimeout(id)`: a timer that has run already is left as it is.
pub(super) fn clear_timeout(id: i32) {
    global_scope().clear_timeout_with_handle(id);
}

/// The worker's global scope (its timers).
fn global_scope() -> worker::worker_sys::web_sys::WorkerGlobalScope {
    worker::js_sys::global().unchecked_into()
}

/// What a queue message ([`worker::worker_sys::Message`]) lacks.
pub(super) trait MessageAttempts {
    /// How many times the queue delivered it, this delivery included (1 if the runtime does not say).
    fn attempts(&self) -> u32;
}

impl MessageAttempts for worker::worker_sys::Message {
    fn attempts(&self) -> u32 {
        let message: &glue::QueueMessage = self.unchecked_ref();
        message
            .attempts()
            .as_f64()
            .filter(|n| n.is_finite() && *n >= 1.0)
            .map_or(1, |n| n.min(f64::from(u32::MAX)) as u32)
    }
}

/// What [`State`] lacks.
pub(super) trait StateExt {
    /// Another handle on the same object state (a JS reference, not a copy).
    fn handle(&self) -> State;
    /// Run `body` inside `storage.transactionSync`: its statements apply all
    /// or nothing; the number it returns comes back.
    fn transaction_sync(&self, body: impl FnOnce() -> Result<f64, String> + 'static) -> Result<f64, String>;
    /// The runtime's `storage` object, as the statements and the alarm take it
    /// (every Durable Object has one).
    fn raw_storage(&self) -> JsValue;
}

impl StateExt for State {
    fn handle(&self) -> State {
        let raw: &JsValue = self.as_raw().as_ref();
        State::from(raw.clone().unchecked_into::<DurableObjectState>())
    }

    fn transaction_sync(&self, body: impl FnOnce() -> Result<f64, String> + 'static) -> Result<f64, String> {
        let storage: DurableObjectStorage = self.as_raw().storage().map_err(|e| format!("{e:?}"))?;
        let body = Closure::once_into_js(move || body().map(JsValue::from_f64).map_err(|e| JsValue::from_str(&e)));
        let body: &Function = body.unchecked_ref();
        let storage: &glue::Storage = storage.unchecked_ref();
        let done = storage.transaction_sync(body).map_err(|e| e.as_string().unwrap_or_else(|| format!("{e:?}")))?;
        Ok(done.as_f64().unwrap_or(0.0))
    }

    fn raw_storage(&self) -> JsValue {
        self.as_raw().storage().map_or(JsValue::UNDEFINED, JsValue::from)
    }
}
