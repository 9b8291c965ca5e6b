// A promise awaited by the wasm (runtime/settle.rs) with no closure of the
// wasm's made for it: wasm-bindgen's JsFuture makes two per promise (each a JS
// function registered with a FinalizationRegistry, unregistered and freed
// when the promise settles). Here the wasm hands one function over, once per
// isolate, and each promise reports to it by the slot the wasm gave it.

/** The wasm's `(slot, fulfilled, value)`, installed once ([`install`]). */
let settled = null;

/** `report` takes every watched promise's outcome from now on. */
export function install(report) {
  settled = report;
}

/** `promise`'s outcome to the installed function, under `slot`. */
export function watch(promise, slot) {
  promise.then(
    (value) => settled(slot, true, value),
    (error) => settled(slot, false, error),
  );
}
