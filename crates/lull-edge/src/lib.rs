//! lull-edge: durable, distributed debounce on Cloudflare Workers, one
//! Durable Object per `(topic, key)`, driven by [`lull_core`].
//!
//! The crate map — every decision is runtime-free and tested natively; the
//! Worker (`runtime/`, wasm32 only) implements the ports and is a thin shell:
//!
//! ```text
//! http (route ──▶ plan: which object, which call, which credential, what body bound, coalescing;
//!       auth, client_token, cors, batch, coalesce)
//!   ├─▶ key   (one key's logic: KeyObject over Store, Host, Outbound)
//!   ├─▶ queue (a topic's gate: GateObject over GateStore, QueueSend, Clock; the consumer's decisions over Gates)
//!   └─▶ demo  (its routes: the one hook Route::parse asks; `demo/off.rs` without the feature)
//! key ──▶ delivery (the body a target receives, its signature, queue messages)
//! key, queue ──▶ target (a topic's target: active, paused, disabled), metrics (points and sums), isolate
//! http ──▶ recover (a topic's dead letters since a time, over the topic's and the keys' objects)
//! topic (LULL_TOPICS, every default), config (all of it, checked), names (keys, topics, object names), ports (the traits), error (ApiError)
//! runtime/ (wasm32): router (carries out http::plan), KeyClient, KeyWindow and TopicGate objects, their
//!   SQLite stores, the gate's client, coalescing's lanes, consumer, clock, fetch and queues, demo/ (the
//!   demo's Worker side)
//! ```
//!
//! - `topic`: topics as configured in `wrangler.toml` (validated at startup; every numeric range in
//!   one table, `topic::RANGES`);
//! - `config`: the worker's whole configuration as its variables and secrets give it, read once
//!   for the Worker and, every problem named, for a check before a deploy ([`check_config`]);
//! - `names`: topic and key names, and the Durable Object names they make;
//! - `error`: the crate's one error, [`ApiError`] (its status, code and JSON);
//! - `http`: routes, the router's plan (every decision of the fetch handler), bearer tokens,
//!   CORS, and events on their way in: a batch and coalescing (same-key events that arrive while
//!   the key's object request is in flight ride the next one);
//! - `key`: the key's whole logic over its [`ports`] (the Durable Object is a shell around it);
//! - `delivery`: the JSON a target receives, its [`signing`], and queue messages;
//! - `queue`: queue delivery — a topic's gate object (its bound on forwards in flight and their
//!   rate, its waiters, counters and dead letters) and what the consumer does with each message;
//! - [`ports`]: what the key object's logic needs from where it runs (the gate's own ports, which
//!   speak its types, stand beside it in `queue::gate` and are exported here);
//! - [`limits`]: every bound a caller can meet, in one list;
//! - `demo`: the demo's routes and its search index (the `demo` cargo feature; without it, its
//!   hooks, empty: `demo/off.rs`); its Worker side is `runtime/demo/`;
//! - `log`: a structured log line's content (a `Fact`), as the logic produces it;
//! - [`target`]: a topic's target as its answers describe it (throttles pause the topic, a `410`
//!   disables it), and each isolate's copy of it;
//! - [`metrics`]: data points (the `Metrics` port) and the counters `GET /v1/metrics` shows;
//! - [`isolate`]: what the objects of one isolate share (target states, metric sums);
//! - [`recover`]: `POST /v1/topics/{topic}/recover`, replaying a topic's dead letters since a time;
//! - `waits`: waiting without the runtime's per-wait garbage (pending promises by number, a
//!   future polled once before it is handed to an executor), for the Worker's awaits;
//! - `runtime` (wasm32 only): the Worker — the objects' shells, their SQLite stores, the clients,
//!   the router and the consumer; no decisions.
//!
//! The durable formats of both objects are in `STORAGE.md`.
//!
//! # The public API
//!
//! The modules are private; what a shell, a test harness or a user needs is exported below, as
//! quinn-proto exports its state machines: the two objects' logic and their calls
//! ([`KeyObject`], [`GateObject`], [`Consumer`]), the ports they run over ([`ports`], the gate's
//! store), configuration ([`Topics`], [`check_config`]), the error ([`ApiError`]), a receiver's verification
//! ([`signing`]) and the bounds ([`limits`]). On wasm32 the Worker's two Durable Object classes,
//! `KeyWindow` and `TopicGate`, are exported too.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
// Natively the Worker (`runtime`) is not built, so the logic only it calls is unused here;
// the wasm32 build, linted with `-D warnings`, holds the whole crate to dead-code checks.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

mod config;
mod delivery;
#[cfg_attr(not(feature = "demo"), path = "demo/off.rs")]
mod demo;
mod error;
mod http;
pub mod isolate;
mod key;
pub mod limits;
mod log;
pub mod metrics;
mod names;
pub mod ports;
mod queue;
pub mod recover;
pub mod target;
mod topic;
mod waits;

pub use config::{
    ConfigReport, DEAD_LETTER_BINDING, DEAD_LETTER_QUEUE_VAR, KEY_WINDOW_BINDING, METRICS_BINDING, TOPIC_GATE_BINDING,
    check_config,
};
/// How a receiver verifies a delivery (Standard Webhooks).
pub use delivery::signing;
pub use error::ApiError;
pub use http::route::Route;
pub use key::{KeyCall, KeyObject, KeyReply, KeyRequest};
pub use names::Key;
pub use queue::consume::{Consumer, Settle};
pub use queue::gate::{
    Counter, DeadLetterRow, DeadTotals, Failing, Forwarded, GateAnswer, GateCall, GateObject, GateOp, GateState,
    GateStatus, GateStore, Gates, Grant, NewDeadLetter, StatusLetter, TargetStatus, TopicStatus,
};
pub use topic::{ForwardBound, Topic, TopicError, Topics};

#[cfg(target_arch = "wasm32")]
mod runtime;
#[cfg(target_arch = "wasm32")]
pub use runtime::{KeyWindow, TopicGate};
