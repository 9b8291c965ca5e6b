// The engine behind `debounceAsync`, `debounceKeyed` and `bindSearch`:
// lull-core's keyed groups with the whole run lifecycle (supersede, queue,
// timeouts). `cargo xtask package` puts the module's bytes in place of the marker.
import { instantiate } from './engine.js';

let engine;

/** The full engine's exports (lull-web's `full` module, features `module,full`), instantiated on first use. */
export const full = () => (engine ??= instantiate('@FULL_WASM@'));
