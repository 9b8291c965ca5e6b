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
import { debounceAsync } from './async.js';
import { debounce, throttle } from './debounce.js';
import { edge } from './edge.js';
import { get } from './options.js';
import { domError, needFunction, typeError } from './runtime.js';
import { bindSearch } from './search.js';

// Reading the hooks' arguments. The hooks are lull's own API, so they refuse
// what lull-web's lodash-compatible drivers would quietly read as 0.

/** Refuse a `wait` that is not milliseconds (or `"auto"` where `auto`). */
function needWait(wait, auto) {
  if (wait === undefined || (typeof wait === 'number' && wait >= 0 && wait <= Number.MAX_SAFE_INTEGER)) return;
  if (auto && wait === 'auto') return;
  throw typeError('`wait` must be a number of milliseconds from 0 to 9007199254740991' + (auto ? ' or "auto"' : ''));
}

/** Refuse options that are not an object (absent is fine unless `required`). */
function needOptions(options, required) {
  if ((options === undefined || options === null) && !required) return;
  if (typeof options !== 'object' || options === null) throw typeError('options must be an object');
}

/** Whether two lists of settings are the same, item by item (`Object.is`). */
const same = (a, b) => a !== undefined && a.length === b.length && a.every((x, i) => Object.is(x, b[i]));

// What every hook shares: a state object made once per hook instance, the
// latest committed props, the unmount decision and a small store.

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
 * ran again meanwhile (StrictMode's simulated unmount and remount). `gone`
 * holds from then until the component shows again (React's `<Activity>`).
 */
function useLife(life, unmount) {
  const latest = useLatest(unmount);
  useEffect(() => {
    life.mounted = true;
    life.gone = false;
    return () => {
      life.mounted = false;
      Promise.resolve().then(() => {
        if (life.mounted || life.gone) return;
        life.gone = true;
        latest.current();
      });
    };
  }, [life]);
}

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

/**
 * The driver of hook state `h`: the one it has, or a new one made by
 * `make(call)` when there is none, or when `settings()` changed and the one
 * it has is idle (a change applies from the next burst: a burst in progress
 * ends under the settings it began with). `call` calls the latest function.
 */
function driverOf(h) {
  const settings = h.settings();
  if (h.driver === undefined || (!same(h.key, settings) && !h.driver.pending())) {
    h.key = settings;
    h.driver = h.make(h.call);
  }
  return h.driver;
}

/** The timing settings of lull-web's debounce options, which a new driver applies. */
const timing = (wait, options) => [wait, ...['leading', 'trailing', 'maxWait', 'flushOnHide'].map((k) => get(options, k))];

/** What `useDebouncedCallback` and `useThrottledCallback` share; `make(fn, wait, options)` is lull-web's driver. */
function useTimedCallback(make, fn, wait, options, auto) {
  needFunction(fn, 'fn');
  needWait(wait, auto);
  needOptions(options);
  const latest = useLatest({ fn, wait, options });
  const h = useOnce(() => {
    const h = {
      mounted: false,
      gone: false,
      driver: undefined,
      key: undefined,
      settings: () => timing(latest.current.wait, latest.current.options),
      make: (call) => make(call, latest.current.wait, latest.current.options),
      call(...args) {
        return latest.current.fn.apply(this, args);
      },
    };
    const debounced = function (...args) {
      if (h.gone) return undefined; // unmounted: nothing would cancel it
      return driverOf(h).apply(this, args);
    };
    debounced.flush = () => h.driver?.flush();
    debounced.cancel = () => h.driver?.cancel();
    debounced.pending = () => h.driver?.pending() ?? false;
    h.debounced = debounced;
    return h;
  });
  useLife(h, () => (get(latest.current.options, 'flushOnUnmount') ? h.debounced.flush() : h.debounced.cancel()));
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

const isAbort = (error) => error?.name === 'AbortError';

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
    const h = {
      mounted: false,
      gone: false,
      driver: undefined,
      key: undefined,
      // The controllers of the runs in flight, aborted at unmount.
      runs: new Set(),
      store: store({ data: undefined, error: undefined, pending: false }),
      settings: () => [...timing(latest.current.wait, latest.current.options), ...['mode', 'timeout', 'signal'].map((k) => get(latest.current.options, k))],
      make: (call) => debounceAsync(call, latest.current.wait, latest.current.options),
      // `fn` gets a signal that aborts with the driver's (a newer run superseded it) or at unmount.
      call(...args) {
        const controller = new AbortController();
        if (typeof AbortSignal === 'function' && args.at(-1) instanceof AbortSignal) {
          const signal = args.pop();
          signal.addEventListener('abort', () => controller.abort(signal.reason), { once: true });
        }
        args.push(controller.signal);
        h.runs.add(controller);
        const done = () => h.runs.delete(controller);
        try {
          const result = latest.current.fn.apply(this, args);
          Promise.resolve(result).then(done, done);
          return result;
        } catch (error) {
          done();
          throw error;
        }
      },
    };
    /** A caller's promise settled: publish its window's outcome (an aborted run changes only `pending`). */
    const settled = (driver, ok, value) => {
      const change = { pending: driver.pending() };
      if (ok) Object.assign(change, { data: value, error: undefined });
      else if (!isAbort(value)) change.error = value;
      h.store.set(change);
    };
    h.run = function (...args) {
      if (h.gone) return Promise.reject(domError('the component unmounted', 'AbortError'));
      const driver = driverOf(h);
      const promise = driver.apply(this, args);
      h.store.set({ pending: true });
      promise.then(
        (value) => settled(driver, true, value),
        (error) => settled(driver, false, error),
      );
      return promise;
    };
    h.flush = () => h.driver?.flush();
    h.cancel = () => h.driver?.cancel();
    return h;
  });
  useLife(h, () => {
    if (get(latest.current.options, 'flushOnUnmount')) {
      h.flush();
      return;
    }
    h.cancel();
    const error = domError('the component unmounted', 'AbortError');
    h.runs.forEach((controller) => controller.abort(error));
  });
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
    const h = {
      input: null,
      binding: undefined,
      key: undefined,
      store: store({ query: '', results: undefined, error: undefined, pending: false }),
      settings: () => ['wait', 'maxWait', 'minLength', 'cache'].map((k) => latest.current[k]),
    };
    const user = (name, ...args) => latest.current[name]?.apply(latest.current, args);
    // The binding's options: fixed for its life; each calls what the latest render passed.
    const bound = () => {
      const o = latest.current;
      return {
        wait: o.wait,
        maxWait: o.maxWait,
        minLength: o.minLength,
        cache: o.cache,
        search: (query, signal) => latest.current.search.call(latest.current, query, signal),
        onResults: (results, query) => {
          h.store.set({ query, results, error: undefined });
          user('onResults', results, query);
        },
        onError: (error, query) => {
          h.store.set({ query, error });
          user('onError', error, query);
        },
        onPending: (pending) => {
          h.store.set({ pending });
          user('onPending', pending);
          if (!pending) rebindIfChanged();
        },
      };
    };
    const unbind = () => {
      h.binding?.destroy();
      h.binding = undefined;
      h.store.set({ pending: false });
    };
    const bind = () => {
      h.key = h.settings();
      h.binding = bindSearch(h.input, bound());
    };
    // New settings apply once the binding is idle (a query in progress keeps the ones it began with).
    const rebindIfChanged = () => {
      if (!h.binding || same(h.key, h.settings()) || h.binding.pending()) return;
      unbind();
      bind();
    };
    h.rebindIfChanged = rebindIfChanged;
    h.ref = (input) => {
      if (input === h.input) return;
      unbind();
      h.input = input;
      if (input) bind();
    };
    h.flush = () => h.binding?.flush();
    h.cancel = () => h.binding?.cancel();
    return h;
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
  needOptions(options, true);
  if (typeof options.url !== 'string' || options.url === '') throw typeError('`url` must be a non-empty string');
  if (typeof options.token !== 'function' && typeof options.token !== 'string') {
    throw typeError('`token` must be a string or a function returning one');
  }
  const latest = useLatest(options);
  const h = useOnce(() => {
    const h = { mounted: false, gone: false, client: undefined, key: undefined };
    // A token function is one setting however often it is made anew; the latest is called.
    const settings = () => {
      const { url, token, retries } = latest.current;
      return [url, typeof token === 'function' ? mint : token, retries];
    };
    const mint = () => latest.current.token();
    const client = () => {
      const key = settings();
      if (h.client === undefined || !same(h.key, key)) {
        h.client?.close();
        const { url, token, retries } = latest.current;
        const fetch = (...args) => (latest.current.fetch ?? globalThis.fetch)(...args);
        h.client = edge({ url, token: typeof token === 'function' ? mint : token, retries, fetch });
        h.key = key;
      }
      return h.client;
    };
    h.close = () => {
      h.client?.close();
      h.client = undefined;
    };
    h.api = {
      send: (...args) => client().send(...args),
      flush: (...args) => client().flush(...args),
      cancel: (...args) => client().cancel(...args),
      status: (...args) => client().status(...args),
      timeline: (...args) => client().timeline(...args),
      pending: (...args) => h.client?.pending(...args) ?? false,
    };
    return h;
  });
  useLife(h, h.close);
  return h.api;
}
