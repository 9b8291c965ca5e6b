//! [`GateClient`]: how the queue consumer and the router call a topic's
//! `TopicGate` object — one [`GateCall`] as its wire text
//! ([`GateCall::to_wire`]), over RPC (the object's `call`,
//! [`http::call_object`]), the answer read back by serde
//! ([`GateAnswer::from_text`]), or passed on as written.

use worker::Env;

use super::http;
use crate::config::TOPIC_GATE_BINDING;
use crate::http::{ApiError, ObjectAnswer};
use crate::queue::gate::{GateAnswer, GateCall, GateOp, Gates};

/// [`Gates`] over the `TopicGate` namespace.
pub(super) struct GateClient {
    /// The worker's environment (the binding).
    pub env: Env,
}

impl GateClient {
    /// Ask `topic`'s gate object for `op`: its answer's status, JSON text (as
    /// written: unparsed) and `Retry-After` (on a refusal).
    pub(super) async fn call(&self, topic: &str, op: GateOp) -> Result<ObjectAnswer, ApiError> {
        let stub_of = || -> Result<worker::Stub, ApiError> {
            Ok(self.env.durable_object(TOPIC_GATE_BINDING)?.id_from_name(topic)?.get_stub()?)
        };
        let wire = GateCall { topic: topic.to_string(), op }.to_wire()?;
        http::call_object(stub_of, "https://gate/", &wire).await
    }
}

impl Gates for GateClient {
    async fn ask(&self, topic: &str, op: GateOp) -> Result<GateAnswer, String> {
        let name = op.name();
        let ObjectAnswer { status, body, .. } =
            self.call(topic, op.clone()).await.map_err(|e| format!("gate {name}: {}", e.message()))?;
        if status != 200 {
            let error = serde_json::from_str::<serde_json::Value>(&body).unwrap_or_default();
            let code = error.pointer("/error/code").and_then(|c| c.as_str()).unwrap_or("error");
            return Err(format!("gate {name}: {status} {code}"));
        }
        GateAnswer::from_text(&op, &body).ok_or_else(|| format!("gate {name}: an answer of another shape"))
    }
}
