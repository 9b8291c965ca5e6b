// Leak checks, and `init()` for code written against earlier releases.

import { full } from './full.js';
import { lite } from './lite.js';

/**
 * How many debouncers, keyed groups, async debouncers and search bindings
 * hold an engine now (instantiating both engines to count).
 */
export const liveObjects = () => lite().live() + full().live();

/** Nothing to wait for: the engines are embedded and compile on first use. Kept for earlier code. */
export const init = () => Promise.resolve();
