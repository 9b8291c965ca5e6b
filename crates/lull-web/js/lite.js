// The engine behind `debounce` and `throttle`: lull-core's `Lite`, lodash's
// timing alone (no run lifecycle), as small as it gets.
// `cargo xtask package` puts the module's bytes in place of the marker.
import { instantiate } from './engine.js';

let engine;

/** The lite engine's exports (lull-web's `lite` module, features `module,lite`), instantiated on first use. */
export const lite = () => (engine ??= instantiate('@LITE_WASM@'));
