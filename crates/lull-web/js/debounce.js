// `debounce` and `throttle`: lodash-compatible, synchronous callbacks.
//
// The hot path: a call before the engine's horizon (`read(h, HORIZON)`, see
// lull-web's `steps::Read`) only adds to the open window, so it stays here,
// counted (`kept`), and goes to the engine with the next `step`, ahead of that
// step's own input. Any other call crosses into wasm once, with the time; the
// engine decides, and the function runs when it fires. Each window runs with
// its own last call's `this` and arguments.

import { CANCEL, DEADLINE, EVENT, EVENT_IN_TURN, FLUSH, HORIZON, PENDING, TIMEOUT, lite } from './lite.js';
import { get, liteArgs, lodashTiming, lodashWait } from './options.js';
import { follow, needFunction, now, onHide, own, reportLater, thisTurn } from './runtime.js';

/**
 * One input to the engine at `t`, a `step` kind; the calls kept under the
 * horizon go with it, first: every way into the engine is here. Answers the
 * call's seq for an event.
 */
function step(s, kind, t) {
  const kept = s.kept;
  s.kept = 0;
  return s.e.step(s.h, kind, t, kept, s.keptAt);
}

/** The call being made becomes the latest of its window. */
function accept(s) {
  if (s.nextArgs !== undefined) {
    s.self = s.nextSelf;
    s.args = s.nextArgs;
    s.nextSelf = s.nextArgs = undefined;
  }
}

/**
 * Carry out the engine's actions (the function may call back in), then
 * follow its deadline and horizon. `incoming` is the seq of the call being
 * made (-1: none): a window whose last event is it runs with that call.
 * Returns whether the function threw (the error waits in `s.error`).
 */
function pump(s, incoming) {
  const e = s.e;
  let threw = false;
  // No call made while the function runs may be kept: the window it would join has fired.
  s.until = -1;
  // Each action is its window's last call: positive to run it, negative to drop it.
  for (let last; (last = e.poll(s.h)) !== 0; ) {
    if (incoming >= 0 && Math.abs(last) >= incoming) accept(s);
    const self = s.self;
    const args = s.args;
    s.self = s.args = undefined;
    if (last < 0) continue;
    try {
      s.result = s.func.apply(self, args);
    } catch (error) {
      // The first error of a step goes to its caller; a later one is reported, never lost.
      if (s.failed) {
        reportLater(error);
      } else {
        s.failed = true;
        s.error = error;
      }
      threw = true;
    }
  }
  follow(s, e.read(s.h, DEADLINE), onTimer);
  s.until = e.read(s.h, HORIZON);
  return threw;
}

/** The error the function threw. */
function take(s) {
  const error = s.error;
  s.error = undefined;
  s.failed = false;
  return error;
}

function onTimer(s) {
  step(s, TIMEOUT, performance.now());
  if (pump(s, -1)) reportLater(take(s));
}

function flushOnHide(s) {
  if (flushNow(s)) reportLater(take(s));
}

function flushNow(s) {
  step(s, FLUSH, now());
  return pump(s, -1);
}

function make(func, policy, options) {
  needFunction(func, 'func');
  const e = lite();
  const h = e.create(...liteArgs(policy));
  // lodash's timing is never refused; only memory can run out (`UNUSABLE`).
  if (h < 0) throw new RangeError('lull: out of memory');
  const s = {
    e,
    h,
    func,
    self: undefined,
    args: undefined,
    result: undefined,
    error: undefined,
    failed: false,
    nextSelf: undefined,
    nextArgs: undefined,
    until: -1,
    kept: 0,
    keptAt: 0,
    turn: -1,
    timer: undefined,
    due: 0,
  };
  own(s, e.free, h, onHide(get(options, 'flushOnHide'), s, flushOnHide));
  const debounced = function (...args) {
    const t = now();
    if (t < s.until) {
      s.kept++;
      s.keptAt = t;
      s.self = this;
      s.args = args;
      return s.result;
    }
    s.nextSelf = this;
    s.nextArgs = args;
    const current = thisTurn();
    const sameTurn = s.turn === current;
    s.turn = current;
    const seq = step(s, sameTurn ? EVENT_IN_TURN : EVENT, t);
    const threw = pump(s, seq);
    accept(s);
    if (threw) throw take(s);
    return s.result;
  };
  debounced.cancel = () => {
    step(s, CANCEL, now());
    pump(s, -1);
  };
  debounced.flush = () => {
    if (flushNow(s)) throw take(s);
    return s.result;
  };
  debounced.pending = () => e.read(h, PENDING) === 1;
  return debounced;
}

/**
 * lodash's `debounce(func, wait, { leading, trailing, maxWait })`, plus
 * `flushOnHide`; `wait` may be `"auto"` (learned from the rhythm of calls).
 * Returns a function with `cancel()`, `flush()`, `pending()`.
 */
export function debounce(func, wait, options) {
  return make(func, lodashTiming(wait, options, DEBOUNCE), options);
}

/** lodash's `throttle(func, wait, { leading, trailing })`, plus `flushOnHide`; `maxWait` is always `wait`. */
export function throttle(func, wait, options) {
  const policy = lodashTiming(lodashWait(wait), options, THROTTLE);
  return make(func, { ...policy, maxWait: policy.wait }, options);
}

/** `debounce`'s defaults, as lodash's: `leading` defaults to `false`, `trailing` to `true`, no `maxWait`. */
const DEBOUNCE = { leading: false, trailing: true };

/** `throttle`'s defaults, as lodash's: `leading` and `trailing` default to `true`. */
const THROTTLE = { leading: true, trailing: true };
