//! Headers on the worker's internal requests (never seen by callers): the
//! router's [`crate::key::KeyCall`] to a `KeyWindow` object. (A `TopicGate`
//! call travels in its request's body: a dead letter is larger than a header.)

/// A `KeyWindow` request's [`crate::key::KeyCall`] (topic, key, request), as JSON.
pub const KEY_CALL_HEADER: &str = "lull-key-call";
