//! The demo page's endpoints, for local use, built only with the `demo`
//! cargo feature (`cargo xtask dev` and the tests; the production worker
//! leaves them out): the search index over the world's places ([`places`]),
//! and on wasm32 the search endpoint, the demo receiver (the sink) and the
//! page's server side (`panel`: its client token and its admin views).

#[cfg(target_arch = "wasm32")]
pub(crate) mod panel;
pub mod places;
#[cfg(target_arch = "wasm32")]
pub(crate) mod search;
#[cfg(target_arch = "wasm32")]
pub(crate) mod sink;
