//! Raw JS behind a small typed extension (the shape of workers-rs'
//! `worker-sys/src/ext`): what workers-rs 0.8.7 does not offer yet — a
//! second handle on a Durable Object's state, and `storage.transactionSync`.
//! Both are small enough to offer upstream.

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
    }
}

/// What [`State`] lacks.
pub trait StateExt {
    /// Another handle on the same object state (a JS reference, not a copy).
    fn handle(&self) -> State;
    /// Run `body` inside `storage.transactionSync`: its statements apply all
    /// or nothing; the number it returns comes back.
    fn transaction_sync(&self, body: impl FnOnce() -> Result<f64, String> + 'static) -> Result<f64, String>;
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
}
