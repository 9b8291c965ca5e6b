//! Headers on the worker's internal requests, from the router and the queue
//! consumer to the Durable Objects (never seen by callers).

/// The topic a `TopicGate` request is for.
pub const TOPIC_HEADER: &str = "lull-topic";
/// See [`TOPIC_HEADER`]: the (percent-encoded) key a `KeyWindow` request is for.
pub const KEY_HEADER: &str = "lull-key";
/// The producer's `Idempotency-Key`, checked, passed to the object.
pub const PRODUCER_KEY_HEADER: &str = "lull-producer-key";
