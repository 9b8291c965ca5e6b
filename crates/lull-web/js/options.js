// Reading option objects. The timing options and `wait` are read as lodash
// reads them — never refused: a non-object `options` is ignored, flags are
// truthy or falsy, numbers go through `Number()` (`NaN` is 0), and unknown
// keys are ignored. One difference: a key present but `undefined` counts as
// missing (lodash takes `{ maxWait: undefined }` as `maxWait: 0`,
// lodash#5857). lull's own options get clear `TypeError`s.

import { typeError } from './runtime.js';

/** Largest duration: 2^53 - 1 ms, as the engine takes it. */
const MAX_MS = 9007199254740991;

/** lodash's `isObject`: an object or a function. */
const isObject = (value) => value !== null && (typeof value === 'object' || typeof value === 'function');

/** `options[key]`, or `undefined` when `options` is not an object. */
export const get = (options, key) => (isObject(options) ? options[key] : undefined);

/** lodash's `toNumber(value) || 0`. */
function toNumber(value) {
  const n = typeof value === 'symbol' || typeof value === 'bigint' ? NaN : +value;
  return n === n ? n : 0;
}

/** Milliseconds as lodash takes them: negative is 0, at most 2^53 - 1. */
const clampMs = (ms) => Math.floor(Math.min(Math.max(ms, 0), MAX_MS));

/** `wait` as lodash reads it (`undefined` and non-numbers are 0). */
export const lodashWait = (value) => clampMs(toNumber(value));

/** `wait` as lull's drivers take it: `"auto"` (learned from the gaps), else as lodash reads it. */
const waitOf = (value) => (value === 'auto' ? value : lodashWait(value));

/** A flag: `undefined` when absent, else truthy or falsy. */
const flag = (options, key) => {
  const value = get(options, key);
  return value === undefined ? undefined : !!value;
};

/**
 * The engine's policy, named: what every driver hands the engine, and the
 * one place it becomes the engine's arguments ([`liteArgs`], [`groupArgs`]).
 * - `wait`: ms, or `"auto"` (learned from the gaps);
 * - `maxWait`: ms, or `undefined` for no bound;
 * - `leading`, `trailing`: the edges;
 * - `overlap` (groups only): `"queue"` (a newer run waits for the one running)
 *   or `"supersede"` (it replaces it);
 * - `runTimeout` (groups only): ms after which a run not ended has failed, or `undefined`.
 * @typedef {{ wait: number | 'auto', maxWait?: number, leading: boolean, trailing: boolean,
 *   overlap?: 'queue' | 'supersede', runTimeout?: number }} Policy
 */

/**
 * lodash's timing from `wait` and `options` as lodash reads them, the edges
 * defaulting to `edges` (`{ leading, trailing }`): a [`Policy`] without
 * `overlap` and `runTimeout`.
 */
export function lodashTiming(wait, options, edges) {
  const maxWait = get(options, 'maxWait');
  return {
    wait: waitOf(wait),
    maxWait: maxWait === undefined ? undefined : clampMs(toNumber(maxWait)),
    leading: flag(options, 'leading') ?? edges.leading,
    trailing: flag(options, 'trailing') ?? edges.trailing,
  };
}

/** The engine's numbers for a wait: ms, or -1 for `"auto"`. */
const waitArg = (wait) => (wait === 'auto' ? -1 : wait);

/** `policy` as the lite engine's `create` takes it: wait, max wait (-1: none), leading, trailing. */
export const liteArgs = (policy) => [waitArg(policy.wait), policy.maxWait ?? -1, +policy.leading, +policy.trailing];

/** `policy` as the full engine's `keyed_create` takes it after its seed: the lite four, supersede (1 or 0), run timeout (-1: none). */
export const groupArgs = (policy) => [...liteArgs(policy), +(policy.overlap === 'supersede'), policy.runTimeout ?? -1];

/** lull's own count option (strict): absent, or a whole number from 0 to 4294967295. */
export function count(options, key) {
  const n = get(options, key);
  if (n === undefined) return undefined;
  if (typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 4294967295) return n;
  throw typeError('`' + key + '` must be a whole number from 0 to 4294967295');
}

/** lull's own duration option (strict): absent, or milliseconds from 0 to 2^53 - 1. */
export function duration(options, key) {
  const ms = get(options, key);
  if (ms === undefined) return undefined;
  if (typeof ms === 'number' && ms >= 0 && ms <= MAX_MS) return Math.floor(ms);
  throw typeError('`' + key + '` must be a number of milliseconds from 0 to 9007199254740991');
}

/** What `create` answers when the engine cannot keep one more (out of memory). */
const UNUSABLE = -99;

/** A handle `create` gave, or the refusal it stands for, thrown. */
export function created(handle) {
  if (handle >= 0) return handle;
  if (handle === UNUSABLE) throw new RangeError('lull: out of memory');
  throw typeError(handle === -6 ? 'run_timeout must be at least 1 ms' : 'the policy was refused (rule ' + -handle + ')');
}
