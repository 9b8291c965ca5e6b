//! lull-web's engine: [`lull_core`] as a WebAssembly module with plain
//! numeric exports, for the npm package `lull-web`.
//!
//! The package's JavaScript drivers (`crates/lull-web/js`) own the I/O: they
//! read the clock, arm one `setTimeout` per engine at the deadline it gives,
//! keep the `this`/arguments of each window, and call user code. Every timing
//! decision is made here, by lull-core. Numbers are all that cross: times
//! are `performance.now()` milliseconds (`f64`, floored), an absent value is
//! `-1`, engines are handles. No wasm-bindgen, no strings, no formatting: a
//! debounce costs what a debounce should.
//!
//! How to drive an engine (the quinn-proto shape):
//! 1. [`lite::create`] (or [`full::keyed_create`]) takes the policy as a few
//!    numbers and returns a handle, or a negative [`policy::refusal`] code;
//! 2. feed it inputs (the lite engine's `step`, a [`steps::Step`]; the full
//!    one's `keyed_event`, `keyed_timeout`, …, run outcomes);
//! 3. drain `poll` (the lite engine answers the window's last call, signed;
//!    the full one an `actions::Kind`, its fields read with `action_*`), then
//!    arm one timer at the deadline (the lite engine's `read`, a
//!    [`steps::Read`]); `free` the handle when its owner goes.
//!
//! Guarantees: a bad handle is ignored (answers `-1`/`0`), never a trap; the
//! module keeps no state besides the engines it was asked for ([`live`]) and
//! the fields of the action polled last. Handles are reused once freed: a
//! driver frees one only when nothing can use it again.
//!
//! One build holds one engine, chosen by a cargo feature: `lite` (module
//! `lite`, for `debounce`/`throttle`) or `full` (modules `full` and `actions`,
//! for the rest); a build with neither gets `full` (tests, lints). The shipped
//! modules add `module`: features `module,lite` and `module,full`.
#![cfg_attr(feature = "module", no_std)]
#![deny(missing_docs)]

extern crate alloc;

#[cfg(all(feature = "lite", feature = "full"))]
compile_error!("lull-web builds one engine: the feature `lite` or `full`, not both");

#[cfg(not(feature = "lite"))]
pub mod actions;
#[cfg(not(feature = "lite"))]
pub mod full;
#[cfg(feature = "lite")]
pub mod lite;
pub mod policy;
#[cfg(any(all(feature = "module", feature = "lite", target_arch = "wasm32"), test))]
mod slab;
pub mod steps;
mod table;
mod time;

#[cfg(all(test, not(target_arch = "wasm32")))]
mod js_constants;

/// Export `fn`s under their own names, as a plain module's functions.
macro_rules! exports {
    ($($(#[$meta:meta])* pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block)*) => {
        $(
            $(#[$meta])*
            #[allow(unsafe_code)] // `no_mangle` only: the symbol is the ABI's name
            #[unsafe(no_mangle)]
            pub extern "C" fn $name($($arg: $ty),*) $(-> $ret)? $body
        )*
    };
}
pub(crate) use exports;

exports! {
    /// How many engines are alive (not yet freed): a leak check for the drivers.
    pub fn live() -> u32 {
        #[cfg(feature = "lite")]
        let engines = lite::live();
        #[cfg(not(feature = "lite"))]
        let engines = full::live();
        engines
    }
}

/// The shipped full module's allocator: small (the engine allocates little and rarely).
#[cfg(all(feature = "module", not(feature = "lite"), target_arch = "wasm32"))]
#[global_allocator]
#[allow(unsafe_code)] // `AssumeSingleThreaded::new`: see SAFETY
// SAFETY: the module is built for wasm32 without the `atomics` feature (checked
// below): one thread, so the allocator is never entered twice at once.
static ALLOCATOR: lol_alloc::AssumeSingleThreaded<lol_alloc::FreeListAllocator> =
    unsafe { lol_alloc::AssumeSingleThreaded::new(lol_alloc::FreeListAllocator::new()) };

/// The shipped lite module's allocator: none. The lite engine allocates
/// nothing (its table has pages of its own: [`slab`]), and a request would
/// be refused (a trap), so nothing can take the pages the table grows into.
#[cfg(all(feature = "module", feature = "lite", target_arch = "wasm32"))]
#[global_allocator]
static ALLOCATOR: NoHeap = NoHeap;

#[cfg(all(feature = "module", feature = "lite", target_arch = "wasm32"))]
struct NoHeap;

// SAFETY: refusing every request (a null pointer) is always sound.
#[cfg(all(feature = "module", feature = "lite", target_arch = "wasm32"))]
#[allow(unsafe_code)]
unsafe impl core::alloc::GlobalAlloc for NoHeap {
    unsafe fn alloc(&self, _: core::alloc::Layout) -> *mut u8 {
        core::ptr::null_mut()
    }
    unsafe fn dealloc(&self, _: *mut u8, _: core::alloc::Layout) {}
}

#[cfg(all(feature = "module", target_feature = "atomics"))]
compile_error!("the shipped module assumes one thread: build it without the `atomics` target feature");

/// The shipped module traps on a panic (none is reachable from valid use):
/// no message, so no formatting machinery is linked.
#[cfg(all(feature = "module", target_arch = "wasm32", not(test)))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}
