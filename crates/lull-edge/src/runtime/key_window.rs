//! `KeyWindow`: the Durable Object of one `(topic, key)` — a shell around
//! [`KeyObject`] with the Workers implementations of its ports: SQLite
//! ([`SqlStore`]), the alarm, clock and console ([`WorkersHost`]) and `fetch`
//! ([`Fetcher`]).
//!
//! Its exports are written here, not by `#[durable_object]`: the router calls
//! it over RPC (`call`, through the class `js/entry.mjs` declares a
//! `DurableObject`), the call's text ([`KeyCall::to_wire`]) in and `[status,
//! text, Retry-After]` out ([`http::call_object`], [`http::answer_to_router`]),
//! so no `Request`, `Response` or `Headers` is made for a call.

use std::panic::AssertUnwindSafe;
use std::rc::Rc;

use wasm_bindgen::prelude::*;
use worker::wasm_bindgen_futures::future_to_promise;
use worker::worker_sys::DurableObjectState;
use worker::{Env, State, console_log};

use super::config;
use super::gate_client::GateClient;
use super::http::{self, now_ms};
use super::outbound::Fetcher;
use super::points::Points;
use super::statements;
use super::store::SqlStore;
use super::sys::StateExt;
use crate::error::ApiError;
use crate::isolate::Isolate;
use crate::key::{KeyCall, KeyObject};
use crate::metrics::{Metrics, Point};
use crate::ports::{Host, StoreError};
use crate::waits::{self, Polled};

/// One `(topic, key)`: its logic over SQLite, the alarm and `fetch`.
#[wasm_bindgen]
pub struct KeyWindow {
    /// Shared with a call that waits (handed on as a `'static` future).
    shell: Rc<Shell>,
}

/// What a [`KeyWindow`] holds.
struct Shell {
    env: Env,
    key: KeyObject<SqlStore, WorkersHost, Fetcher, GateClient>,
}

thread_local! {
    /// What this isolate's key objects and router share: target states, metric sums.
    pub(super) static ISOLATE: Rc<Isolate> = Rc::default();
}

/// [`Host`] over the object's alarm, `Date.now()`, `Math.random()`, the
/// console and Analytics Engine ([`Points`]).
pub(super) struct WorkersHost {
    /// The object's `storage` (its alarm).
    storage: JsValue,
    points: Points,
}

impl Metrics for WorkersHost {
    fn point(&self, point: Point) {
        self.points.point(point);
    }
}

impl Host for WorkersHost {
    fn now(&self) -> u64 {
        now_ms()
    }

    fn random(&self) -> u64 {
        let draw = || (worker::js_sys::Math::random() * 4_294_967_296.0) as u64;
        (draw() << 32) ^ draw()
    }

    /// Set, not awaited: the write rides the output gate, so no answer of
    /// this turn goes out unless it is stored; a failure resets the object (its
    /// answer an error, none of the turn's writes kept), which the key's logic
    /// meets as the crash it is. Only what the runtime refuses at once fails here.
    async fn set_alarm(&self, at: u64) -> Result<(), StoreError> {
        statements::arm(&self.storage, at)
    }

    fn log(&self, line: &str) {
        console_log!("{line}");
    }
}

impl Shell {
    async fn serve(&self, wire: String) -> Result<(u16, String), ApiError> {
        let call = KeyCall::from_wire(wire)?;
        let config = config::load(&self.env)?;
        let topic = config.topics.get(&call.topic).ok_or(ApiError::UnknownTopic(call.topic))?;
        let reply = self.key.request(topic, &call.key, call.request).await?;
        Ok((reply.status, http::json_of(&reply.body)?))
    }
}

#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures, js_sys = ::worker::js_sys)]
impl KeyWindow {
    /// The object of `state`, as the runtime makes it.
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> KeyWindow {
        let state = State::from(state);
        let storage = state.raw_storage();
        let store = SqlStore::new(state.handle(), &storage);
        let host = WorkersHost { storage, points: Points::new(env.clone()) };
        let fetcher = Fetcher { env: env.clone() };
        let gates = GateClient { env: env.clone() };
        let isolate = ISOLATE.with(Rc::clone);
        KeyWindow { shell: Rc::new(Shell { key: KeyObject::new(store, host, fetcher, gates, isolate), env }) }
    }

    /// A call from the router: a [`KeyCall`] as text ([`KeyCall::to_wire`]),
    /// answered as [`http::answer_to_router`] (an error too): at once when the
    /// call does not wait (SQLite's statements are synchronous, the alarm is
    /// set without a wait), else as a promise ([`waits::poll_once`]). (Each
    /// export's future is asserted unwind-safe, as `#[durable_object]`'s are:
    /// under `panic = "unwind"` wasm-bindgen asks it of an exported future.)
    pub fn call(&self, wire: String) -> JsValue {
        let shell = Rc::clone(&self.shell);
        shell.key.host().points.begin();
        match waits::poll_once(async move { http::answer_to_router(shell.serve(wire).await) }) {
            Polled::Ready(answer) => answer,
            Polled::Pending(rest) => future_to_promise(AssertUnwindSafe(async move { Ok(rest.await) })).into(),
        }
    }

    /// The key's alarm: a window due, a retry, a deadline or its collection.
    pub async fn alarm(&self) -> Result<JsValue, JsValue> {
        let shell = &self.shell;
        shell.key.host().points.begin();
        AssertUnwindSafe(async move {
            let done = match config::load(&shell.env) {
                Ok(config) => shell.key.alarm(&config.topics).await,
                // No delivery without a configuration: the key arms its own retry.
                Err(error) => {
                    shell.key.alarm_failed(&error).await;
                    Err(error)
                }
            };
            // An error makes the runtime retry the alarm (unless the key armed another).
            done.map(|()| JsValue::UNDEFINED).map_err(|e| http::js_error(&e.message()))
        })
        .await
    }
}
