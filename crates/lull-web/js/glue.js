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
