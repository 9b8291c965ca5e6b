//! Queue delivery (`delivery = "queue"`), runtime-free: a topic's bound on
//! forwards in flight and their rate ([`gate`]), the logic of the topic's
//! gate object over its storage ([`gate_object`]), and what the consumer
//! does with each message ([`consume`]).

pub mod consume;
pub mod gate;
pub mod gate_object;
