//! The Worker itself (wasm32 only): shells and port implementations, no
//! decisions. The fetch router ([`router`]) hands each key's request to its
//! `KeyWindow` Durable Object (a single event through [`coalesce`], the shell of
//! [`crate::coalesce`]: same-key events in flight together) ([`key_window`], a shell around
//! [`crate::key::KeyObject`] over SQLite ([`store`]), the alarm and `fetch`
//! ([`outbound`])); a queue topic's windows are forwarded by the queue
//! consumer ([`consumer`]) within the bound its `TopicGate` object keeps
//! ([`topic_gate`], a shell around [`crate::queue::gate::GateObject`] over
//! SQLite and key-value storage ([`gate_store`]), the queues and the clock
//! ([`clock`])), which the consumer and the router call through
//! [`gate_client`]. Every timing decision is `lull-core`'s; every decision
//! about what a key must do is [`crate::key`]'s, about a topic's gate
//! [`crate::queue::gate`]'s.

mod clock;
mod coalesce;
pub(crate) mod config;
pub(crate) mod consumer;
mod gate_client;
mod gate_store;
pub(crate) mod http;
mod key_window;
mod outbound;
pub(crate) mod router;
mod store;
mod sys;
mod topic_gate;

pub use key_window::KeyWindow;
pub use topic_gate::TopicGate;
