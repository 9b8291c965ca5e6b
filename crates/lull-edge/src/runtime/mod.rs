//! The Worker itself (wasm32 only): the fetch router, the `KeyWindow`
//! Durable Object, its SQLite store, outbound deliveries, and the demo's sink and search endpoint.
//! Thin drivers: every timing decision is `lull-core`'s, every decision about
//! what a key must do is [`crate::key_state`]'s.

mod config;
mod consumer;
mod demo;
mod http;
// The glue `#[durable_object]` generates (wasm-bindgen exports) has no docs.
#[allow(missing_docs)]
mod object;
// Same: the glue of `#[durable_object]`.
#[allow(missing_docs)]
mod gate_object;
mod outbound;
mod router;
mod sink;
mod store;

pub use gate_object::TopicGate;
pub use object::KeyWindow;
