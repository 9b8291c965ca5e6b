//! Queue delivery (`delivery = "queue"`), runtime-free: a topic's bound on
//! forwards in flight and their rate ([`gate`]).

pub mod gate;
