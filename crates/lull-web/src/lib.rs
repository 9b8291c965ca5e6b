//! lull-web: lull's engine in the browser, as the npm package `lull-web`.
//!
//! A thin wasm-bindgen driver around [`lull_core`]: it reads
//! `performance.now()`, owns at most one `setTimeout` per debouncer (armed at
//! the engine's deadline, re-armed only when it moves earlier), keeps the JS
//! values the engine's fires refer to, and calls back. Every timing decision
//! is the engine's.
//!
//! Exports: `debounce`, `throttle` (lodash-compatible), `debounceAsync`
//! (promises; latest wins or queue), `debounceKeyed` (one timer, many keys),
//! `bindSearch` (a search box), `liveObjects` (leak checks).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod debounce;
mod debounce_async;
mod hide;
mod js;
mod keyed;
mod live;
mod options;
mod search;
mod shared;
mod timer;

pub use debounce::{Debounced, debounce, throttle};
pub use debounce_async::{AsyncDebounced, debounce_async};
pub use keyed::{KeyedDebounced, debounce_keyed};
pub use live::live_objects;
pub use search::{SearchBinding, bind_search};

/// Seed for retry jitter: `Math.random()` is enough for spreading retries.
pub(crate) fn seed() -> u64 {
    (js_sys::Math::random() * 9_007_199_254_740_992.0) as u64
}

#[wasm_bindgen::prelude::wasm_bindgen(typescript_custom_section)]
const TYPESCRIPT: &str = include_str!("../js/lull-web.d.ts");
