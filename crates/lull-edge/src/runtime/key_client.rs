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
use crate::key::{KeyCall, KeyRequest};
use crate::names::Key;
use crate::names::object_name;
use crate::recover::KeyReplays;

/// Calls to the key objects of the environment `env` binds (`KEY_WINDOW`).
pub(crate) struct KeyClient<'a> {
    /// The Worker's environment.
    pub env: &'a Env,
}

impl KeyReplays for KeyClient<'_> {
    async fn replay_since(&self, topic: &str, key: &str, since: u64) -> Result<(u64, u64), ApiError> {
        let call_key = key.to_string();
        let key = Key::from_path_segment(key)?;
        let call = KeyCall { topic: topic.to_string(), key, request: KeyRequest::ReplaySince { since } };
        let answer = self.call(call).await?;
        let body: serde_json::Value = serde_json::from_str(&answer.body).unwrap_or_default();
        match (answer.status, body["replayed"].as_u64(), body["dead_letter_count"].as_u64()) {
            (200, Some(replayed), Some(left)) => Ok((replayed, left)),
            (status, ..) => Err(ApiError::Unavailable {
                why: format!("key {:?}: {status}", call_key),
                retry_after_secs: crate::error::UNAVAILABLE_RETRY_SECS,
            }),
        }
    }
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
