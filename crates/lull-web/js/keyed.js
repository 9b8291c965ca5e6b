// `debounceKeyed`: one timer for many keys (per-field autosave, per-row
// sync). Keys cross into the engine as numbers; a key the engine forgot
// (idle) is forgotten here too, so memory stays bounded.

import { FIRE, seed } from './engine.js';
import { full } from './full.js';
import { created, get, groupArgs, lodashTiming } from './options.js';
import { follow, needFunction, now, onHide, own, reportLater, typeError } from './runtime.js';

/** Keys are strings or numbers (numbers as their string form, like object keys). */
function keyOf(key) {
  if (typeof key === 'string') return key;
  if (typeof key === 'number') return String(key);
  throw typeError('a key must be a string or a number');
}

/** The engine's number for `key`, made if it has none. */
function idOf(s, key) {
  let id = s.ids.get(key);
  if (id === undefined) {
    id = s.nextId++;
    s.ids.set(key, id);
  }
  return id;
}

/** Forget the numbers of keys the engine forgot, once they outnumber its keys. */
function sweep(s) {
  const e = s.e;
  if (s.ids.size <= 2 * e.keyed_len(s.h) + 64) return;
  for (const [key, id] of s.ids) {
    if (!e.keyed_has(s.h, id)) s.ids.delete(key);
  }
}

/**
 * Call the function for each fire as `fn(key, ...args)`, then follow the
 * deadline. Returns the first error the function threw (a later one is
 * reported, never lost), or `undefined`.
 */
function pump(s) {
  const e = s.e;
  let error;
  let threw = false;
  for (let kind; (kind = e.keyed_poll(s.h)) !== 0; ) {
    const window = e.action_window();
    const id = e.action_key();
    const call = s.calls.get(window);
    s.calls.delete(window);
    if (kind !== FIRE) continue;
    if (call) {
      try {
        s.func.apply(call[1], [call[0], ...call[2]]);
      } catch (thrown) {
        if (threw) reportLater(thrown);
        else [threw, error] = [true, thrown];
      }
    }
    e.keyed_ended(s.h, id, window, 1, performance.now());
  }
  follow(s, e.keyed_deadline(s.h), onTimer);
  sweep(s);
  return [threw, error];
}

/** Pump; throw what the function threw. */
function pumpOrThrow(s) {
  const [threw, error] = pump(s);
  if (threw) throw error;
}

function flushOnHide(s) {
  s.e.keyed_flush(s.h, -1, now());
  const [threw, error] = pump(s);
  if (threw) reportLater(error);
}

function onTimer(s) {
  s.e.keyed_timeout(s.h, performance.now());
  const [threw, error] = pump(s);
  if (threw) reportLater(error);
}

/** `debounceKeyed`'s defaults, lodash's: `leading` defaults to `false`, `trailing` to `true`, no `maxWait`. */
const DEFAULTS = { leading: false, trailing: true };

/**
 * `debounceKeyed(fn, wait, { leading, trailing, maxWait, flushOnHide })`:
 * `f(key, ...args)` debounces per key, with one timer for all keys; `fn` is
 * called as `fn(key, ...latestArgs)`. `cancel(key?)`, `flush(key?)`,
 * `pending(key?)`, `remove(key)`.
 */
export function debounceKeyed(func, wait, options) {
  needFunction(func, 'func');
  const e = full();
  const h = created(e.keyed_create(seed(), ...groupArgs(lodashTiming(wait, options, DEFAULTS))));
  const s = { e, h, func, ids: new Map(), nextId: 0, calls: new Map(), timer: undefined, due: 0 };
  /** `act` on `key`, or on every key when `key` is `undefined`; then pump. */
  const onKeyOrAll = (key, act) => {
    act(h, key === undefined ? -1 : idOf(s, keyOf(key)), now());
    pumpOrThrow(s);
  };
  own(s, e.keyed_free, h, onHide(get(options, 'flushOnHide'), s, flushOnHide));
  const debounced = function (key, ...args) {
    const given = key;
    const window = e.keyed_event(h, idOf(s, keyOf(key)), now());
    // The latest call of each window (an older window of the key may still be due).
    s.calls.set(window, [given, this, args]);
    pumpOrThrow(s);
  };
  debounced.cancel = (key) => onKeyOrAll(key, e.keyed_cancel);
  debounced.flush = (key) => onKeyOrAll(key, e.keyed_flush);
  debounced.pending = (key) => {
    const id = key === undefined ? -1 : s.ids.get(keyOf(key));
    return id !== undefined && e.keyed_pending(h, id) === 1;
  };
  /**
   * Forget `key`: drop its pending call (as `cancel`) and what it learned (an
   * adaptive wait starts again). Idle adaptive keys are also forgotten on
   * their own past 1,000, the one idle longest first.
   */
  debounced.remove = (key) => {
    const name = keyOf(key);
    const id = idOf(s, name);
    e.keyed_cancel(h, id, now());
    try {
      pumpOrThrow(s);
    } finally {
      e.keyed_remove(h, id);
      s.ids.delete(name);
    }
  };
  return debounced;
}
