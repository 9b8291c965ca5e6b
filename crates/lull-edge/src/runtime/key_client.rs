//! [`KeyClient`]: how the Worker calls a key's `KeyWindow` object — the
//! router, the coalescer's sender and the demo's panel alike — as the gate's
//! `GateClient` calls a topic's `TopicGate`: one [`KeyCall`] as text
//! ([`KeyCall::to_wire`]), over RPC ([`http::call_object`]), its answer read
//! as the object wrote it.

use worker::Env;

use super::config;
use super::http;
use crate::error::ApiError;
use crate::http::ObjectAnswer;
use crate::key::KeyCall;
use crate::names::object_name;

/// Calls to the key objects of the environment `env` binds (`KEY_WINDOW`).
pub(crate) struct KeyClient<'a> {
    /// The Worker's environment.
    pub env: &'a Env,
}

impl KeyClient<'_> {
    /// Hand `call` to its key's object and read its answer: status, JSON text
    /// (as written: unparsed) and `Retry-After` (on a refusal).
    pub(crate) async fn call(&self, call: KeyCall) -> Result<ObjectAnswer, ApiError> {
        let namespace = config::key_windows(self.env)?;
        let name = object_name(&call.topic, &call.key);
        let stub_of = || -> Result<worker::Stub, ApiError> { Ok(namespace.id_from_name(&name)?.get_stub()?) };
        http::call_object(stub_of, "https://key-window/", &call.to_wire()?).await
    }
}
