//! A count of live driver states, to check that nothing leaks.

use std::cell::Cell;

use wasm_bindgen::prelude::*;

thread_local! {
    static LIVE: Cell<u32> = const { Cell::new(0) };
}

pub(crate) fn created() {
    LIVE.with(|n| n.set(n.get() + 1));
}

pub(crate) fn dropped() {
    LIVE.with(|n| n.set(n.get().saturating_sub(1)));
}

/// How many debouncers, keyed groups, async debouncers and search bindings
/// are alive in this module instance (for leak checks).
#[wasm_bindgen(js_name = liveObjects)]
pub fn live_objects() -> u32 {
    LIVE.with(Cell::get)
}
