//! The Worker itself (wasm32 only): shells and port implementations, no
//! decisions. The fetch router ([`router`]) carries out what
//! [`crate::http::plan`] decides: it hands each key's request to its
//! `KeyWindow` Durable Object through [`key_client`] (a single event or a
//! batch's share through [`coalesce`], the shell of [`crate::http::coalesce`]:
//! same-key events in flight together) ([`key_window`], a shell around
//! [`crate::key::KeyObject`] over SQLite ([`store`], its statements bound
//! once in [`statements`]), the alarm and `fetch`
//! ([`outbound`])), a queue topic's requests to its `TopicGate` through
//! [`gate_client`], and the demo's routes to `demo` (the `demo` feature's
//! Worker side; without it, `demo/off.rs`: nothing to serve). A queue topic's
//! windows are forwarded by the queue consumer ([`consumer`]) within the bound
//! its `TopicGate` object keeps ([`topic_gate`], a shell around
//! [`crate::queue::gate::GateObject`] over SQLite and key-value storage
//! ([`gate_store`]), the queues and the clock ([`clock`])). Every timing
//! decision is `lull-core`'s; every decision about what a key must do is
//! [`crate::key`]'s, about a topic's gate [`crate::queue::gate`]'s, about a
//! request [`crate::http::plan`]'s.

mod clock;
mod coalesce;
pub(crate) mod config;
pub(crate) mod consumer;
#[cfg_attr(not(feature = "demo"), path = "demo/off.rs")]
mod demo;
mod gate_client;
mod gate_store;
pub(crate) mod http;
pub(crate) mod key_client;
mod key_window;
mod outbound;
mod points;
pub(crate) mod router;
mod settle;
mod statements;
mod store;
mod sys;
mod topic_gate;

pub use key_window::KeyWindow;
pub use topic_gate::TopicGate;
