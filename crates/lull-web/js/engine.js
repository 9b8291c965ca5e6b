// Instantiating an engine: wasm bytes embedded in the JS (base64), compiled
// synchronously on first use, so importing costs nothing and no bundler,
// Node or test runner needs configuration (a `.wasm` file beside the JS
// needs one in several of them). The module imports nothing.

/** The exports of the wasm module whose bytes are `base64`. */
export function instantiate(base64) {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  return new WebAssembly.Instance(new WebAssembly.Module(bytes), {}).exports;
}

/** What `poll` answers (lull-web's `actions::Kind`). */
export const FIRE = 1;
export const DROPPED = 2;
export const DEAD_LETTERED = 3;
export const TIMED_OUT = 5;

/** A seed for the engine's retry jitter. */
export const seed = () => Math.random() * 9007199254740992;
