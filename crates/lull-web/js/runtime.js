// What every driver shares: the clock, the event loop's turn, errors, the
// one timer, the page-hide hook, and letting an engine go. No timing
// decision lives here: the engine gives the deadline, a driver follows it.

// The engine's clock, monotonic: `performance.now()`, but read at most once
// per wall-clock millisecond (the engine counts whole milliseconds, and in
// some browsers `performance.now()` costs several times `Date.now()`). A
// reading is at most ~1 ms old; a wall-clock jump changes `Date.now()` and
// forces a fresh one, so jumps never leak in. (Held in an object: module-level
// `let`s cost a check on every read, and this is read on every call.)
const clock = { wallMs: NaN, monotonicMs: 0 };
export function now() {
  const wall = Date.now();
  if (wall !== clock.wallMs) {
    clock.wallMs = wall;
    clock.monotonicMs = performance.now();
  }
  return clock.monotonicMs;
}

// The event loop's turn: a number that changes once the task running now
// (and its microtasks) has ended. Two calls in one turn (a synchronous loop)
// had no chance to let a timer run between them.
let turn = 0;
let turnEnding = false;
export function thisTurn() {
  if (!turnEnding) {
    turnEnding = true;
    queueMicrotask(() => {
      turnEnding = false;
      turn++;
    });
  }
  return turn;
}

/** Report an error thrown by user code where no caller can get it, as an uncaught error would be. */
export function reportLater(error) {
  if (typeof reportError === 'function') {
    reportError(error);
  } else {
    setTimeout(() => {
      throw error;
    });
  }
}

/** A `TypeError` with lull's prefix. */
export const typeError = (message) => new TypeError('lull: ' + message);

/** A `DOMException` named `name` (`AbortError`, `TimeoutError`), as `fetch` rejects with. */
export function domError(message, name) {
  if (typeof DOMException === 'function') return new DOMException('lull: ' + message, name);
  const error = new Error('lull: ' + message);
  error.name = name;
  return error;
}

/**
 * Start `run` (an object naming its window) as `s.running`: `call(signal)`
 * runs user code with a fresh `AbortSignal` (none where `AbortController` is
 * missing); once what it returned or threw settles, `finish(s, run, ok, value)`.
 * The drivers with runs in flight (`debounceAsync`, `bindSearch`) share this.
 */
export function startRun(s, run, call, finish) {
  run.controller = typeof AbortController === 'function' ? new AbortController() : undefined;
  s.running = run;
  let returned;
  try {
    returned = Promise.resolve(call(run.controller?.signal));
  } catch (error) {
    returned = Promise.reject(error);
  }
  returned.then(
    (value) => finish(s, run, true, value),
    (error) => finish(s, run, false, error),
  );
}

/** Abort the signal of `run` (if any) with `reason`. */
export const abort = (run, reason) => run?.controller?.abort(reason);

/** Refuse what is not a function. */
export function needFunction(value, name) {
  if (typeof value !== 'function') throw typeError('`' + name + '` must be a function');
  return value;
}

// Browsers run a longer delay at once; a far deadline is reached in steps.
const MAX_DELAY_MS = 2147483647;

/**
 * Follow the engine's `deadline` (ms, -1 for none) with `state`'s one
 * `setTimeout`: re-armed only when the deadline moves earlier (an event
 * never moves it later, so typing costs no timer calls), cleared when there
 * is none. When it goes off, `fire(state)`. While armed, the timeout holds
 * the state: a pending call runs even if its owner let go.
 */
export function follow(state, deadline, fire) {
  if (deadline < 0) {
    clear(state);
    return;
  }
  if (state.timer !== undefined && state.due <= deadline) return;
  clear(state);
  const at = Math.floor(performance.now());
  const delay = Math.min(Math.max(deadline - at, 0), MAX_DELAY_MS);
  state.due = at + delay;
  state.timer = setTimeout(() => {
    state.timer = undefined;
    fire(state);
  }, delay);
}

/** Clear `state`'s timer. */
export function clear(state) {
  if (state.timer !== undefined) {
    clearTimeout(state.timer);
    state.timer = undefined;
  }
}

/**
 * With `enabled`, call `flush(state)` when the page is hidden or unloaded
 * (browsers throttle timers in hidden tabs and drop them on close). The
 * listeners hold the state weakly; returns what removes them.
 */
export function onHide(enabled, state, flush) {
  if (!enabled || typeof document === 'undefined') return undefined; // a worker, or Node: no page to hide
  const target = weak(state);
  const listener = (event) => {
    const s = target.deref();
    if (s && (event.type === 'pagehide' || document.visibilityState === 'hidden')) flush(s);
  };
  document.addEventListener('visibilitychange', listener);
  addEventListener('pagehide', listener);
  return () => {
    document.removeEventListener('visibilitychange', listener);
    removeEventListener('pagehide', listener);
  };
}

/** A weak reference to `value` (a strong one where `WeakRef` is missing). */
export const weak = (value) => (typeof WeakRef === 'function' ? new WeakRef(value) : { deref: () => value });

const registry = typeof FinalizationRegistry === 'function' ? new FinalizationRegistry((release) => release()) : undefined;

/**
 * Once `state` is collected, let its engine go (`free(handle)`) and remove
 * its listeners (`unhook()`). The closure kept for that is made here, in a
 * scope that holds nothing else: one made beside a driver's closures would
 * share their scope (V8 allocates one context per function), hold the
 * state, and keep it from ever being collected.
 */
export function own(state, free, handle, unhook) {
  registry?.register(state, () => {
    free(handle);
    unhook?.();
  });
}
