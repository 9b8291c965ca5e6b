// `lull-web/react`: React hooks over lull-web's drivers (peer dependency
// `react` >= 18, not bundled).
//
// Each hook owns its driver and makes it on first use, never during render:
// a server render or a render React throws away makes nothing. Drivers call
// the function and read the options of the last committed render (no stale
// closure). What a component renders from a driver (results, pending) is a
// store read with `useSyncExternalStore`, or React state: no tearing in
// concurrent rendering. On unmount a hook cancels (or flushes, with
// `flushOnUnmount`), decided a microtask after the effect's cleanup, so
// StrictMode's simulated unmount and remount changes nothing.

import { useEffect, useInsertionEffect, useRef, useState, useSyncExternalStore } from 'react';
import { asyncCallback, edgeClient, needEdgeOptions, needFunction, needOptions, needWait, searchBox, timedCallback } from './adapter.js';
import { debounce, throttle } from './debounce.js';
import { get } from './options.js';
import { domError, reportLater } from './runtime.js';

// What every hook shares: a controller made once per hook instance (see
// adapter.js), the latest committed props, the unmount decision and a small store.

/** A value kept for the hook's lifetime, made by `make()` on the first render (a discarded render's is dropped). */
function useOnce(make) {
  return useState(make)[0];
}

/** A ref to `value` as of the last commit: callbacks read it, render never writes it. */
function useLatest(value) {
  const ref = useRef(value);
  // Insertion effects run first in a commit: a child's layout effect already sees the new value.
  useInsertionEffect(() => {
    ref.current = value;
  });
  return ref;
}

/**
 * Track `life` (`{ mounted, gone }`) and call `unmount()` when the component
 * unmounts for real: a microtask after the effect's cleanup, unless an effect
 * ran again meanwhile (StrictMode's simulated unmount and remount). Until
 * then a controller that can (`hold`, `resume`: see `holding`) holds what
 * its driver runs, so an unmount cancels a pending call at once, as
 * use-debounce does, even under fake timers advanced before the microtask.
 * `gone` holds from then until the component shows again (React's `<Activity>`).
 */
function useLife(life, unmount) {
  const latest = useLatest(unmount);
  useEffect(() => {
    life.mounted = true;
    life.gone = false;
    // Mounted again before the decision (StrictMode): what the driver ran meanwhile runs now.
    life.resume?.();
    return () => {
      life.mounted = false;
      // Until the decision, what the driver runs is held: a real unmount drops it, even if its timer came first.
      life.hold?.();
      Promise.resolve().then(() => {
        if (life.mounted || life.gone) return;
        life.gone = true;
        latest.current();
      });
    };
  }, [life]);
}

/**
 * Let controller `h` (adapter.js) hold what its driver runs while React
 * decides whether the component is gone: from `hold()` each run the driver
 * starts waits (`wait(entry)` is what the driver gets meanwhile); `resume()`
 * runs them in order (the component stayed: StrictMode); `end(flush)` runs
 * them (flushing) or drops them (`drop(entry)`) before it ends the driver.
 */
function holding(h, wait, drop) {
  const held = [];
  const { call, end } = h;
  const release = (run) => {
    h.holding = false;
    held.splice(0).forEach((entry) => (run ? entry.run() : drop(entry)));
  };
  h.call = function (...args) {
    if (!h.holding) return call.apply(this, args);
    const entry = { run: () => call.apply(this, args) };
    held.push(entry);
    return wait(entry);
  };
  h.hold = () => (h.holding = true);
  h.resume = () => release(true);
  h.end = (flush) => (release(flush), end(flush));
  return h;
}

/** A held timed call: nothing for the driver; what it throws when run is reported, as the driver's timer would. */
const heldCall = (entry) => {
  const run = entry.run;
  entry.run = () => {
    try {
      run();
    } catch (error) {
      reportLater(error);
    }
  };
};

/** A held async run: a promise for the driver, settled by the run, or rejected as the unmount aborts it. */
const heldRun = (entry) =>
  new Promise((resolve, reject) => {
    const start = entry.run;
    entry.run = () => {
      try {
        resolve(start());
      } catch (error) {
        reject(error);
      }
    };
    entry.reject = reject;
  });

/** A store for `useSyncExternalStore`: a snapshot object replaced (never changed) on each update. */
function store(initial) {
  const listeners = new Set();
  const s = {
    snapshot: initial,
    subscribe: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    get: () => s.snapshot,
    getInitial: () => initial,
    /** Merge `change` into the snapshot; listeners hear of it if anything changed. */
    set: (change) => {
      const next = { ...s.snapshot, ...change };
      if (Object.keys(next).every((k) => Object.is(next[k], s.snapshot[k]))) return;
      s.snapshot = next;
      listeners.forEach((listener) => listener());
    },
  };
  return s;
}

/** Read `store` in render; the server and hydration read its initial snapshot. */
const useStore = (s) => useSyncExternalStore(s.subscribe, s.get, s.getInitial);

/** What `useDebouncedCallback` and `useThrottledCallback` share; `make(fn, wait, options)` is lull-web's driver. */
function useTimedCallback(make, fn, wait, options, auto) {
  needFunction(fn, 'fn');
  needWait(wait, auto);
  needOptions(options);
  const latest = useLatest({ fn, wait, options });
  const h = useOnce(() => holding(timedCallback(make, () => latest.current), heldCall, () => {}));
  useLife(h, () => h.end(get(latest.current.options, 'flushOnUnmount')));
  return h.debounced;
}

/**
 * lull-web's `debounce` as a hook: `useDebouncedCallback(fn, wait, { leading,
 * trailing, maxWait, flushOnHide, flushOnUnmount })`. The function returned
 * keeps its identity across renders and always calls the latest `fn`; it has
 * `flush()`, `cancel()` and `pending()`. Unmounting cancels a pending call (or
 * flushes it, with `flushOnUnmount`); calls after that are ignored. A change of
 * `wait` or an option applies from the next burst.
 */
export function useDebouncedCallback(fn, wait, options) {
  return useTimedCallback(debounce, fn, wait, options, true);
}

/** lull-web's `throttle` as a hook: as `useDebouncedCallback`, with `{ leading, trailing, flushOnHide, flushOnUnmount }`. */
export function useThrottledCallback(fn, wait, options) {
  return useTimedCallback(throttle, fn, wait, options, false);
}

/**
 * `value`, debounced: `[debounced, { flush, cancel, pending }]`. The first
 * render returns `value`; each later value is passed on once `wait` (and
 * `options`, as `useDebouncedCallback`'s) says. The controls keep their identity.
 */
export function useDebouncedValue(value, wait, options) {
  const [debounced, setDebounced] = useState(value);
  // `() => next`: a function value is stored as it is, not called as an updater.
  const pass = useDebouncedCallback((next) => setDebounced(() => next), wait, options);
  const h = useOnce(() => ({ sent: value, controls: { flush: pass.flush, cancel: pass.cancel, pending: pass.pending } }));
  useEffect(() => {
    if (Object.is(h.sent, value)) return;
    h.sent = value;
    pass(value);
  }, [h, pass, value]);
  return [debounced, h.controls];
}

/**
 * lull-web's `debounceAsync` as a hook: `{ run, data, error, pending, flush,
 * cancel }`. `run(...args)` (stable) returns its window's promise; `fn` gets
 * the latest call's arguments and an `AbortSignal`. `data` is the newest
 * result and `error` the newest failure (an aborted run is neither); runs a
 * newer one superseded are aborted, so results never arrive out of order.
 * Unmounting cancels what waits and aborts the run in flight (with
 * `flushOnUnmount`: runs what waits instead); later calls reject.
 */
export function useDebouncedAsync(fn, wait, options) {
  needFunction(fn, 'fn');
  needWait(wait, true);
  needOptions(options);
  const latest = useLatest({ fn, wait, options });
  const h = useOnce(() => {
    const s = store({ data: undefined, error: undefined, pending: false });
    const unmounted = (entry) => entry.reject(domError('the component unmounted', 'AbortError'));
    return Object.assign(holding(asyncCallback(() => latest.current, s.set), heldRun, unmounted), { store: s });
  });
  useLife(h, () => h.end(get(latest.current.options, 'flushOnUnmount')));
  const { data, error, pending } = useStore(h.store);
  return { run: h.run, data, error, pending, flush: h.flush, cancel: h.cancel };
}

/**
 * lull-web's `bindSearch` as a hook: `useSearch({ search, wait, maxWait,
 * minLength, cache, onResults, onError, onPending })` returns `{ ref, query,
 * results, error, pending, flush, cancel }`. Put `ref` on an `<input>` (it
 * may be controlled or not): the binding listens to it, so everything
 * `bindSearch` does holds (no search mid-IME-composition, Enter searches now,
 * Escape cancels, stale requests aborted, responses never out of order, the
 * cache). `results` answer `query`; `error` is the newest failure of a
 * search (cleared by the next results). `search` and the callbacks are the
 * latest rendered; a change of `wait`, `maxWait`, `minLength` or `cache`
 * binds the input again once it is idle (the cache starts empty). Unmounting
 * (or taking `ref` off the input) aborts the search in flight.
 */
export function useSearch(options) {
  needOptions(options, true);
  needFunction(options.search, 'search');
  needWait(options.wait, true);
  const latest = useLatest(options);
  const h = useOnce(() => {
    const s = store({ query: '', results: undefined, error: undefined, pending: false });
    return Object.assign(searchBox(() => latest.current, s.set), { store: s });
  });
  useEffect(() => h.rebindIfChanged());
  const { query, results, error, pending } = useStore(h.store);
  return { ref: h.ref, query, results, error, pending, flush: h.flush, cancel: h.cancel };
}

/**
 * A `lull-web/edge` client as a hook: `useEdge({ url, token, retries, fetch })`
 * returns an object that keeps its identity, with the client's `send`,
 * `flush`, `cancel`, `status`, `timeline` and `pending`. A `token` function
 * is called as the client calls it (before the token's `exp`, and after a
 * `401`), the latest one rendered. A change of `url`, of a string `token` or
 * of `retries` makes a new client (the old one hands over what it held).
 * Unmounting hands over what the page holds, as when the page is hidden.
 */
export function useEdge(options) {
  needEdgeOptions(options);
  const latest = useLatest(options);
  const h = useOnce(() => ({ mounted: false, gone: false, ...edgeClient(() => latest.current) }));
  useLife(h, h.close);
  return h.api;
}
