//! lull-edge: durable, distributed debounce on Cloudflare Workers, one
//! Durable Object per `(topic, key)`, driven by [`lull_core`].
//!
//! These modules are the runtime-free part of the worker, testable natively:
//! - [`topic`]: topics as configured in `wrangler.toml` (validated at startup);
//! - [`key`]: topic and key names from request paths;
//! - [`signing`]: the `Lull-Signature` HMAC a receiver verifies;
//! - [`delivery`]: the JSON a target receives, and its idempotency key;
//! - [`api_error`]: the stable JSON error shape and its HTTP statuses;
//! - [`route`]: methods and paths to operations, and bearer-token access;
//! - [`cors`]: which web origins may call the API from a browser;
//! - [`gate`]: a topic's bound on forwards in flight and their rate (queue delivery);
//! - [`queue_message`]: a fired window as queue messages, split into parts when large;
//! - [`key_state`]: one key's engine, outbox and counters, and the effects of each operation;
//! - [`ports`]: what the key's logic needs from where it runs (storage, host, outbound call);
//! - [`key_object`]: the key's whole logic over those ports (the Durable Object is a shell around it);
//! - [`timeline`]: a key's recent log lines, bounded, for its timeline route;
//! - [`places`]: the demo's search index (the demo page's search endpoint).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod api_error;
pub mod cors;
pub mod delivery;
pub mod gate;
pub mod key;
pub mod key_object;
pub mod key_state;
pub mod places;
pub mod ports;
pub mod queue_message;
pub mod route;
pub mod signing;
pub mod timeline;
pub mod topic;

#[cfg(target_arch = "wasm32")]
mod runtime;
#[cfg(target_arch = "wasm32")]
pub use runtime::{KeyWindow, TopicGate};
