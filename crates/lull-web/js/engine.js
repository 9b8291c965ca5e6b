// Instantiating an engine: wasm bytes embedded in the JS, compiled
// synchronously on first use, so importing costs nothing and no bundler,
// Node or test runner needs configuration (a `.wasm` file beside the JS
// needs one in several of them). The module imports nothing.
//
// The bytes are written in hex: it keeps them byte-aligned, so gzip finds
// the module's repeats and costs ~10% over the bare wasm, where base64 costs ~33%.

// A hex digit's value from its char code: '0'-'9' are 0x30-0x39, 'a'-'f' 0x61-0x66.
const digit = (c) => (c & 15) + (c >> 6) * 9;

/** The exports of the wasm module whose bytes are `hex`. */
export function instantiate(hex) {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (digit(hex.charCodeAt(2 * i)) << 4) | digit(hex.charCodeAt(2 * i + 1));
  return new WebAssembly.Instance(new WebAssembly.Module(bytes), {}).exports;
}

/** What `keyed_poll` answers (lull-web's `actions::Kind`; 0 is none). */
export const FIRE = 1;
export const DROPPED = 2;
export const TIMED_OUT = 5;

/** A seed for the engine's retry jitter. */
export const seed = () => Math.random() * 9007199254740992;
