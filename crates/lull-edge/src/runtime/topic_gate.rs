//! `TopicGate`: the Durable Object of one queue topic (named by the topic) —
//! a shell around [`GateObject`] with the Workers implementations of its
//! ports: its storage ([`SqlGateStore`]), the queue bindings (replays,
//! [`Queues`]) and the clock ([`WorkersClock`]). Its exports are written
//! here, as the key object's are ([`super::key_window`]): the consumer and
//! the router call it over RPC ([`super::gate_client`]), a [`GateCall`]'s
//! text in and `[status, text, Retry-After]` out ([`http::answer_to_router`]).

use std::panic::AssertUnwindSafe;

use wasm_bindgen::prelude::*;
use worker::worker_sys::DurableObjectState;
use worker::{Env, State};

use super::clock::WorkersClock;
use super::config;
use super::gate_store::SqlGateStore;
use super::http;
use super::outbound::Queues;
use super::points::Points;
use crate::http::ApiError;
use crate::queue::gate::{GateCall, GateObject};

/// One queue topic's bound on forwards, counters and dead letters.
#[wasm_bindgen]
pub struct TopicGate {
    env: Env,
    gate: GateObject<SqlGateStore, Queues, WorkersClock>,
}

impl TopicGate {
    async fn serve(&self, wire: String) -> Result<(u16, String), ApiError> {
        let call = GateCall::from_wire(&wire)?;
        // Dead letters are kept, listed and discarded whatever the configuration is (even none that loads).
        let config =
            if call.op.needs_configuration() { Some(config::load(&self.env)?) } else { config::load(&self.env).ok() };
        let topic = config.as_ref().and_then(|c| c.topics.get(&call.topic));
        let answer = self.gate.call(&call.topic, topic, call.op).await?;
        Ok((200, answer.to_text()?))
    }
}

#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures, js_sys = ::worker::js_sys)]
impl TopicGate {
    /// The object of `state`, as the runtime makes it.
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> TopicGate {
        let queues = Queues { env: env.clone() };
        let clock = WorkersClock { points: Points::new(env.clone()) };
        TopicGate { env, gate: GateObject::new(SqlGateStore::new(State::from(state)), queues, clock) }
    }

    /// A call from the router or the queue consumer: a [`GateCall`]'s JSON,
    /// answered as [`http::answer_to_router`] (its future asserted unwind-safe,
    /// as the key object's are).
    pub async fn call(&self, wire: String) -> JsValue {
        self.gate.clock().points.begin();
        AssertUnwindSafe(async move { http::answer_to_router(self.serve(wire).await) }).await
    }
}
