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
 */
export function syncSlot(func) {
  const slot = { self: undefined, args: undefined, result: undefined, error: undefined };
  slot.invoke = (run) => {
    const self = slot.self;
    const args = slot.args;
    slot.self = slot.args = undefined;
    if (!run) return false;
    try {
      slot.result = func.apply(self, args);
      return false;
    } catch (error) {
      slot.error = error;
      return true;
    }
  };
  slot.take = () => {
    const error = slot.error;
    slot.error = undefined;
    return error;
  };
  return slot;
}

/** lodash's callable over a synchronous driver and its slot; errors of `func` are rethrown to the caller. */
export function syncCallable(inner, slot) {
  const f = function (...args) {
    slot.self = this;
    slot.args = args;
    if (inner.call(performance.now())) throw slot.take();
    return slot.result;
  };
  f.cancel = () => inner.cancel(performance.now());
  f.flush = () => {
    if (inner.flush(performance.now())) throw slot.take();
    return slot.result;
  };
  f.pending = () => inner.pending();
  return f;
}
