//! Headers on the worker's internal requests, from the router and the queue
//! consumer to the Durable Objects (never seen by callers).

/// The topic a `TopicGate` request is for.
pub const TOPIC_HEADER: &str = "lull-topic";
/// A `KeyWindow` request's [`crate::key::KeyCall`] (topic, key, request), as JSON.
pub const KEY_CALL_HEADER: &str = "lull-key-call";
