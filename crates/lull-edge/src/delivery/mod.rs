//! What leaves a key when its window fires: the JSON a target receives and
//! its idempotency key ([`body`]), the signature a receiver verifies
//! ([`signing`]), and the same window as queue messages, split into parts
//! when large ([`queue_message`]).

pub(crate) mod body;
pub(crate) mod queue_message;
pub mod signing;
