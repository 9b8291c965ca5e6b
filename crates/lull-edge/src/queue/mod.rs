//! Queue delivery (`delivery = "queue"`), runtime-free: a topic's bound on
//! forwards in flight and their rate ([`gate`]), the forwards waiting for it
//! ([`wait`]), the logic of the topic's gate object over its ports
//! ([`gate_object`]: leases, counters, dead-letter rows), what the consumer
//! does with each message ([`consume`]), and the router's short memory of
//! which topics' dead letters are full ([`room`]).

pub mod consume;
pub mod gate;
pub mod gate_object;
pub mod room;
pub mod wait;
