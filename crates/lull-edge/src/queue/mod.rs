//! Queue delivery (`delivery = "queue"`), runtime-free: a topic's gate
//! object ([`gate`]: its bound on forwards in flight and their rate, the
//! forwards waiting for it, its counters and dead-letter rows, over its
//! ports), what the consumer does with each message ([`consume`]), and the
//! router's short memory of which topics' dead letters are full ([`room`]).

pub(crate) mod consume;
pub(crate) mod gate;
pub(crate) mod room;
