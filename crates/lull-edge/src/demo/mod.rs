//! The demo page's endpoints, for local use: the search index over the
//! world's places ([`places`]), and on wasm32 the search endpoint and the
//! demo receiver (the sink).

pub mod places;
#[cfg(target_arch = "wasm32")]
pub(crate) mod search;
#[cfg(target_arch = "wasm32")]
pub(crate) mod sink;
