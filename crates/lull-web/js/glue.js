// The one piece of hand-written JS: a Rust export cannot be a callable with
// methods, so these wrap a driver object into one. No logic lives here.

/** A function forwarding `this` and arguments to `inner.call`, with the driver's methods. */
export function callable(inner, methods) {
  const f = function (...args) {
    return inner.call(this, args);
  };
  for (const name of methods) {
    f[name] = (...args) => inner[name](...args);
  }
  return f;
}

/** Settle what user code returned (a value, a promise, or a throw) and call `done(ok, value)` once, later. */
export function settle(value, threw, done) {
  (threw ? Promise.reject(value) : Promise.resolve(value)).then(
    (v) => done(true, v),
    (e) => done(false, e),
  );
}

/** Report an error thrown by user code inside a timer, as an uncaught error would be. */
export function reportLater(error) {
  if (typeof globalThis.reportError === 'function') {
    globalThis.reportError(error);
  } else {
    setTimeout(() => {
      throw error;
    });
  }
}

/**
 * The latest call of a synchronous debouncer, kept on the JS side so a call
 * crosses into wasm once, with just the time. `invoke(true)` runs `func` with
 * the latest `this` and arguments, keeps its result, and returns whether it
 * threw (the error waits in `take()`); `invoke(false)` lets them go
 * (cancelled). It holds `func` and the slot, never the driver.
 *
 * Calls made before the engine's horizon (`until`, at most `room` of them)
 * only add to the open window: they stay here (`kept`, the last at `keptAt`)
 * and the driver takes them (`takeKept()`) before anything else it does.
 */
export function syncSlot(func) {
  const slot = {
    self: undefined,
    args: undefined,
    result: undefined,
    error: undefined,
    failed: false,
    nextSelf: undefined,
    nextArgs: undefined,
    until: -1,
    room: 0,
    kept: 0,
    keptAt: 0,
    turn: -1,
  };
  slot.horizon = (until, room) => {
    slot.until = until;
    slot.room = room;
  };
  slot.takeKept = () => {
    const kept = slot.kept;
    slot.kept = 0;
    return kept;
  };
  // The call being made (`nextArgs` set): it becomes the latest call once the
  // engine has run (or let go) any older window it ended.
  slot.accept = () => {
    if (slot.nextArgs !== undefined) {
      slot.self = slot.nextSelf;
      slot.args = slot.nextArgs;
      slot.nextSelf = slot.nextArgs = undefined;
    }
  };
  slot.invoke = (run, fresh) => {
    if (fresh) slot.accept();
    const self = slot.self;
    const args = slot.args;
    slot.self = slot.args = undefined;
    if (!run) return false;
    try {
      slot.result = func.apply(self, args);
      return false;
    } catch (error) {
      // The first error of a step goes to its caller; a later one is reported, never lost.
      if (slot.failed) {
        reportLater(error);
      } else {
        slot.failed = true;
        slot.error = error;
      }
      return true;
    }
  };
  slot.take = () => {
    const error = slot.error;
    slot.error = undefined;
    slot.failed = false;
    return error;
  };
  return slot;
}

// The engine's clock, monotonic: `performance.now()`, but read at most once per
// wall-clock millisecond (the engine counts whole milliseconds, and in some
// browsers `performance.now()` costs several times `Date.now()`). A reading
// is at most ~1 ms old; a wall-clock jump changes `Date.now()` and forces a
// fresh one, so jumps never leak in.
let wallMs = NaN;
let monotonicMs = 0;
function now() {
  const wall = Date.now();
  if (wall !== wallMs) {
    wallMs = wall;
    monotonicMs = performance.now();
  }
  return monotonicMs;
}

// The event loop's turn: a number that changes once the task running now (and
// its microtasks) has ended. Two calls in one turn (a synchronous loop) had no
// chance to let a timer run between them.
let turn = 0;
let turnEnding = false;
function thisTurn() {
  if (!turnEnding) {
    turnEnding = true;
    queueMicrotask(() => {
      turnEnding = false;
      turn++;
    });
  }
  return turn;
}

/** lodash's callable over a synchronous driver and its slot; errors of `func` are rethrown to the caller. */
export function syncCallable(inner, slot) {
  const f = function (...args) {
    const t = now();
    if (t < slot.until && slot.kept < slot.room) {
      slot.kept++;
      slot.keptAt = t;
      slot.self = this;
      slot.args = args;
      return slot.result;
    }
    slot.nextSelf = this;
    slot.nextArgs = args;
    const current = thisTurn();
    const sameTurn = slot.turn === current;
    slot.turn = current;
    const threw = inner.call(t, sameTurn);
    slot.accept();
    if (threw) throw slot.take();
    return slot.result;
  };
  f.cancel = () => inner.cancel(now());
  f.flush = () => {
    if (inner.flush(now())) throw slot.take();
    return slot.result;
  };
  f.pending = () => inner.pending();
  return f;
}
