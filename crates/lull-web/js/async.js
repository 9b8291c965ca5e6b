// `debounceAsync`: a promise per call; every caller of a window gets that
// window's outcome. A run gets the window's last call's arguments and an
// `AbortSignal`; with `mode: "latest"` a newer run supersedes it (the signal
// aborts, its callers reject), with `"queue"` a newer run waits for it.

import { DROPPED, FIRE, TIMED_OUT, seed } from './engine.js';
import { full } from './full.js';
import { created, duration, get, groupArgs, lodashTiming } from './options.js';
import { abort, domError, follow, needFunction, now, onHide, own, startRun, typeError, weak } from './runtime.js';

// The one key of the engine's group.
const KEY = 0;

/** Reject every caller in `waiters` with `error`. */
const rejectAll = (waiters, error) => waiters?.forEach(([, reject]) => reject(error));


/** Take the callers waiting for `window`. */
function waitersOf(s, window) {
  const waiters = s.waiters.get(window);
  s.waiters.delete(window);
  return waiters;
}

/** Carry out the engine's actions, then follow its deadline. */
function pump(s) {
  const e = s.e;
  for (let kind; (kind = e.keyed_poll(s.h)) !== 0; ) {
    const window = e.action_window();
    if (kind === FIRE) {
      start(s, window, e.action_supersedes());
    } else if (kind === DROPPED) {
      s.calls.delete(window);
      rejectAll(waitersOf(s, window), domError('cancelled', 'AbortError'));
    } else if (kind === TIMED_OUT) {
      // A run that did not settle in time: its callers reject, its signal
      // aborts, and the next window may run (it cannot pin the queue).
      const error = domError('the run did not settle within `timeout`', 'TimeoutError');
      if (s.running?.window === window) {
        abort(s.running, error);
        s.running = undefined;
      }
      rejectAll(waitersOf(s, window), error);
    }
  }
  follow(s, e.keyed_deadline(s.h), onTimer);
}

function onTimer(s) {
  s.e.keyed_timeout(s.h, performance.now());
  pump(s);
}

/** Run `window` with its last call's arguments plus a fresh `AbortSignal`. */
function start(s, window, supersedes) {
  if (supersedes >= 0 && s.running?.window === supersedes) {
    const error = domError('superseded by a newer run', 'AbortError');
    abort(s.running, error);
    rejectAll(waitersOf(s, supersedes), error);
  }
  const call = s.calls.get(window) ?? [undefined, []];
  s.calls.delete(window);
  startRun(s, { window }, (signal) => s.func.apply(call[0], signal ? [...call[1], signal] : call[1]), finish);
}

/** A run settled: settle its callers, unless it is over (superseded, timed out, cancelled). */
function finish(s, run, ok, value) {
  if (s.running !== run) return;
  s.running = undefined;
  const e = s.e;
  e.keyed_ended(s.h, KEY, run.window, +ok, performance.now());
  s.waiters.get(run.window)?.forEach(([resolve, reject]) => (ok ? resolve : reject)(value));
  s.waiters.delete(run.window);
  pump(s);
}

function cancel(s) {
  s.e.keyed_cancel(s.h, KEY, now());
  pump(s);
}

function flush(s) {
  s.e.keyed_flush(s.h, KEY, now());
  pump(s);
}

/** Cancel when `signal` aborts (holding the state weakly); returns what removes that, and `unhook`s. */
function onAbort(signal, s, unhook) {
  const target = weak(s);
  const listener = () => {
    const s = target.deref();
    if (s) cancel(s);
  };
  signal.addEventListener('abort', listener);
  return () => {
    signal.removeEventListener('abort', listener);
    unhook?.();
  };
}

/**
 * `debounceAsync`'s defaults: lodash's edges (`leading` defaults to `false`,
 * `trailing` to `true`), no `maxWait`; `mode` defaults to `"latest"` (a newer
 * run supersedes the one running); no `timeout`.
 */
const DEFAULTS = { leading: false, trailing: true, mode: 'latest' };

/**
 * `debounceAsync(fn, wait, { leading, trailing, maxWait, mode, timeout, signal, flushOnHide })`.
 * With `timeout` (ms), a run not settled by then is over: its callers reject
 * with a `TimeoutError` and its signal aborts, so a promise that never
 * settles cannot hold the queue.
 */
export function debounceAsync(func, wait, options) {
  needFunction(func, 'func');
  const mode = get(options, 'mode') ?? DEFAULTS.mode;
  if (mode !== 'latest' && mode !== 'queue') {
    throw typeError('`mode` must be "latest" or "queue"');
  }
  let signal = get(options, 'signal');
  if (signal === null) signal = undefined;
  if (signal !== undefined && !(typeof AbortSignal === 'function' && signal instanceof AbortSignal)) {
    throw typeError('`signal` must be an AbortSignal');
  }
  const timeout = duration(options, 'timeout');
  const e = full();
  const policy = { ...lodashTiming(wait, options, DEFAULTS), overlap: mode === 'queue' ? 'queue' : 'supersede', runTimeout: timeout };
  const h = created(e.keyed_create(seed(), ...groupArgs(policy)));
  const s = { e, h, func, calls: new Map(), waiters: new Map(), running: undefined, timer: undefined, due: 0 };
  const unhook = onHide(get(options, 'flushOnHide'), s, flush);
  own(s, e.keyed_free, h, signal ? onAbort(signal, s, unhook) : unhook);
  const debounced = function (...args) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const window = e.keyed_event(h, KEY, now());
      // The latest call of each window (an older window may still be due).
      s.calls.set(window, [this, args]);
      const waiters = s.waiters.get(window);
      if (waiters) waiters.push([resolve, reject]);
      else s.waiters.set(window, [[resolve, reject]]);
      pump(s);
    });
  };
  debounced.cancel = () => cancel(s);
  debounced.flush = () => flush(s);
  debounced.pending = () => e.keyed_pending(h, KEY) === 1 || s.running !== undefined;
  return debounced;
}
