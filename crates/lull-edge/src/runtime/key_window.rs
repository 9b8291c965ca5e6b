//! `KeyWindow`: the Durable Object of one `(topic, key)` — a shell around
//! [`KeyObject`] with the Workers implementations of its ports: SQLite
//! ([`SqlStore`]), the alarm, clock and console ([`WorkersHost`]) and `fetch`
//! ([`Fetcher`]).

use worker::{DurableObject, Env, Request, Response, ScheduledTime, State, console_log, durable_object};

use super::config;
use super::headers::KEY_CALL_HEADER;
use super::http::{self, now_ms};
use super::outbound::Fetcher;
use super::store::SqlStore;
use super::sys::StateExt;
use crate::http::ApiError;
use crate::key::{KeyCall, KeyObject};
use crate::ports::{Host, StoreError};

/// One `(topic, key)`: its logic over SQLite, the alarm and `fetch`.
#[durable_object]
pub struct KeyWindow {
    env: Env,
    key: KeyObject<SqlStore, WorkersHost, Fetcher>,
}

/// [`Host`] over the object's alarm, `Date.now()`, `Math.random()` and the console.
pub struct WorkersHost {
    state: State,
}

impl Host for WorkersHost {
    fn now(&self) -> u64 {
        now_ms()
    }

    fn random(&self) -> u64 {
        let draw = || (worker::js_sys::Math::random() * 4_294_967_296.0) as u64;
        (draw() << 32) ^ draw()
    }

    async fn set_alarm(&self, at: u64) -> Result<(), StoreError> {
        let when = ScheduledTime::new(worker::js_sys::Date::new(&(at as f64).into()));
        self.state.storage().set_alarm(when).await.map_err(|e| StoreError(e.to_string()))
    }

    fn log(&self, line: &str) {
        console_log!("{line}");
    }
}

impl KeyWindow {
    async fn serve(&self, mut req: Request) -> Result<Response, ApiError> {
        let header = req.headers().get(KEY_CALL_HEADER)?.unwrap_or_default();
        let call = KeyCall::from_header(&header, req.text().await?)?;
        let config = config::load(&self.env)?;
        let topic = config.topics.get(&call.topic).ok_or(ApiError::UnknownTopic(call.topic))?;
        let reply = self.key.request(topic, &call.key, call.request).await?;
        Ok(http::json(reply.status, &reply.body)?)
    }
}

impl DurableObject for KeyWindow {
    fn new(state: State, env: Env) -> Self {
        let store = SqlStore::new(state.handle());
        let host = WorkersHost { state };
        let fetcher = Fetcher { env: env.clone() };
        KeyWindow { key: KeyObject::new(store, host, fetcher), env }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        http::respond(self.serve(req).await)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let done = match config::load(&self.env) {
            Ok(config) => self.key.alarm(&config.topics).await,
            // No delivery without a configuration: the key arms its own retry.
            Err(error) => {
                self.key.alarm_failed(&error).await;
                Err(error)
            }
        };
        // An error makes the runtime retry the alarm (unless the key armed another).
        done.map_err(|e| worker::Error::RustError(e.message()))?;
        Response::ok("")
    }
}
