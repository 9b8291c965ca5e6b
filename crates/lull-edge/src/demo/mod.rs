//! The demo, for local use, built only with the `demo` cargo feature (`cargo
//! xtask dev` and the tests; the production worker leaves it out and builds
//! `demo/off.rs` in its place: the same hooks, empty). Its runtime-free side:
//!
//! - its routes ([`route`]: `/sink`, `/demo/…`), the one hook
//!   `Route::parse` asks, and which of them need an admin token;
//! - [`BUILT`]: whether `LULL_DEMO_SINK` can switch it on at all;
//! - the search index over the world's places ([`places`]).
//!
//! Its Worker side (the search endpoint, the demo receiver, the page's server
//! side) is `runtime/demo/`, served through one hook of the router's.

pub(crate) mod places;
pub(crate) mod route;

/// Whether the demo is built in: `LULL_DEMO_SINK = "on"` serves it.
pub(crate) const BUILT: bool = true;
