// The engine behind `debounce` and `throttle`: lull-core's `Lite`, lodash's
// timing alone (no run lifecycle), as small as it gets.
// `cargo xtask package` puts the module's bytes in place of the marker.
import { instantiate } from './engine.js';

let engine;

/** The lite engine's exports (lull-web's `lite` module, features `module,lite`), instantiated on first use. */
export const lite = () => (engine ??= instantiate('@LITE_WASM@'));

/** What `step` does (lull-web's `steps::Step`). */
export const EVENT = 0;
export const EVENT_IN_TURN = 1;
export const TIMEOUT = 2;
export const FLUSH = 3;
export const CANCEL = 4;

/** What `read` answers (lull-web's `steps::Read`). */
export const DEADLINE = 0;
export const HORIZON = 1;
export const PENDING = 2;
