//! `TopicGate`: the Durable Object of one queue topic (named by the topic) —
//! a shell around [`GateObject`] over its key-value storage ([`KvGateStore`]);
//! and [`GateClient`], how the consumer and the status route call it: one
//! [`GateCall`] as JSON in the request's body, the answer as JSON.

use std::collections::BTreeMap;

use worker::{DurableObject, Env, Method, Request, RequestInit, Response, State, durable_object};

use super::config;
use super::http::{self, now_ms};
use crate::http::ApiError;
use crate::ports::{GateAnswer, GateOp, GateState, GateStore, Gates, StoreError};
use crate::queue::gate::Gate;
use crate::queue::gate_object::{GateCall, GateObject};

/// The binding's name in `wrangler.toml`.
pub const TOPIC_GATE_BINDING: &str = "TOPIC_GATE";
/// Where the gate and its counters are stored (see `STORAGE.md`).
const GATE_KEY: &str = "gate";
/// Where the dead letters are stored.
const DEAD_KEY: &str = "dead";

/// [`GateStore`] over the object's key-value storage.
pub struct KvGateStore {
    state: State,
}

fn store_error(e: worker::Error) -> StoreError {
    StoreError(e.to_string())
}

impl GateStore for KvGateStore {
    async fn load(&self) -> Result<Option<GateState>, StoreError> {
        let stored: Option<(Gate, BTreeMap<String, u64>)> =
            self.state.storage().get(GATE_KEY).await.map_err(store_error)?;
        Ok(stored.map(|(gate, counters)| GateState { gate, counters }))
    }

    async fn save(&self, state: &GateState) -> Result<(), StoreError> {
        self.state.storage().put(GATE_KEY, (&state.gate, &state.counters)).await.map_err(store_error)
    }

    async fn dead_letters(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.state.storage().get(DEAD_KEY).await.map_err(store_error)?.unwrap_or_default())
    }

    async fn save_dead_letters(&self, dead: &[String]) -> Result<(), StoreError> {
        self.state.storage().put(DEAD_KEY, dead).await.map_err(store_error)
    }
}

/// [`Gates`] over the `TopicGate` namespace.
pub struct GateClient<'a> {
    /// The worker's environment (the binding).
    pub env: &'a Env,
}

impl GateClient<'_> {
    /// Ask `topic`'s gate object for `op`: its answer's status and JSON.
    pub async fn call(&self, topic: &str, op: GateOp) -> Result<(u16, serde_json::Value), ApiError> {
        let stub = self.env.durable_object(TOPIC_GATE_BINDING)?.id_from_name(topic)?.get_stub()?;
        let body = serde_json::to_string(&GateCall { topic: topic.to_string(), op })
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let mut init = RequestInit::new();
        init.with_method(Method::Post).with_body(Some(body.into()));
        let mut res = stub.fetch_with_request(Request::new_with_init("https://gate/", &init)?).await?;
        Ok((res.status_code(), res.json().await?))
    }
}

impl Gates for GateClient<'_> {
    async fn ask(&self, topic: &str, op: GateOp) -> Result<GateAnswer, String> {
        let name = op.name();
        let (status, body) = self.call(topic, op.clone()).await.map_err(|e| format!("gate {name}: {}", e.message()))?;
        if status != 200 {
            return Err(match op {
                GateOp::DeadLetter { .. } => format!("the gate kept no dead letter ({status})"),
                _ => format!("gate {name}: {status}"),
            });
        }
        GateAnswer::from_json(&op, &body).ok_or_else(|| format!("gate {name}: an answer of another shape"))
    }
}

/// One queue topic's bound on forwards, counters and dead letters.
#[durable_object]
pub struct TopicGate {
    env: Env,
    gate: GateObject<KvGateStore>,
}

impl TopicGate {
    async fn serve(&self, mut req: Request) -> Result<Response, ApiError> {
        let call: GateCall =
            serde_json::from_str(&req.text().await?).map_err(|e| ApiError::Internal(format!("gate call: {e}")))?;
        // A dead letter is kept whatever the configuration is (even none that loads).
        let config = match call.op {
            GateOp::DeadLetter { .. } => None,
            _ => Some(config::load(&self.env)?),
        };
        let topic = config.as_ref().and_then(|c| c.topics.get(&call.topic));
        let answer = self.gate.call(&call.topic, topic, call.op, now_ms()).await?;
        Ok(http::json(200, &answer.to_json())?)
    }
}

impl DurableObject for TopicGate {
    fn new(state: State, env: Env) -> Self {
        TopicGate { env, gate: GateObject::new(KvGateStore { state }) }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        http::respond(self.serve(req).await)
    }
}
