// What lull-web's framework adapters (`lull-web/react`, `lull-web/vue`)
// share: reading their arguments, and the controllers that own one driver
// each for a component. A controller makes its driver on first use, never
// before (a server render makes nothing), reads the caller's latest function
// and settings through `read()`, and ends when its owner says so. The
// adapters only tie these to their framework: when the latest settings are
// kept, where state is published, and when an owner is gone.

import { debounceAsync } from './async.js';
import { edge } from './edge.js';
import { get } from './options.js';
import { domError, needFunction, typeError } from './runtime.js';
import { bindSearch } from './search.js';

// Reading the arguments. The adapters are lull's own API, so they refuse
// what lull-web's lodash-compatible drivers would quietly read as 0.

/** Refuse a `wait` that is not milliseconds (or `"auto"` where `auto`). */
export function needWait(wait, auto) {
  if (wait === undefined || (typeof wait === 'number' && wait >= 0 && wait <= Number.MAX_SAFE_INTEGER)) return;
  if (auto && wait === 'auto') return;
  throw typeError('`wait` must be a number of milliseconds from 0 to 9007199254740991' + (auto ? ' or "auto"' : ''));
}

/** Refuse options that are not an object (absent is fine unless `required`). */
export function needOptions(options, required) {
  if ((options === undefined || options === null) && !required) return;
  if (typeof options !== 'object' || options === null) throw typeError('options must be an object');
}

/** Refuse `useEdge` options without a `url` or a `token`. */
export function needEdgeOptions(options) {
  needOptions(options, true);
  if (typeof options.url !== 'string' || options.url === '') throw typeError('`url` must be a non-empty string');
  if (typeof options.token !== 'function' && typeof options.token !== 'string') {
    throw typeError('`token` must be a string or a function returning one');
  }
}

export { needFunction };

/** Whether two lists of settings are the same, item by item (`Object.is`). */
export const same = (a, b) => a !== undefined && a.length === b.length && a.every((x, i) => Object.is(x, b[i]));

/**
 * The driver of controller `h`: the one it has, or a new one made by
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

/** The settings of lull-web's debounce options that a new driver applies (compared, not read). */
const debounceSettings = (wait, options) => [wait, ...['leading', 'trailing', 'maxWait', 'flushOnHide'].map((k) => get(options, k))];

/**
 * A debounced function over `make(call, wait, options)` (lull-web's `debounce`
 * or `throttle`), with `flush()`, `cancel()` and `pending()`; `read()` gives
 * the latest `{ fn, wait, options }`. Returns its controller: `debounced`,
 * `gone` (set by the owner once it is gone: later calls are ignored) and
 * `end(flush)`, which runs or drops the pending call.
 */
export function timedCallback(make, read) {
  const h = {
    gone: false,
    driver: undefined,
    key: undefined,
    settings: () => debounceSettings(read().wait, read().options),
    make: (call) => make(call, read().wait, read().options),
    call(...args) {
      return read().fn.apply(this, args);
    },
  };
  const debounced = function (...args) {
    if (h.gone) return undefined; // the owner is gone: nothing would cancel it
    return driverOf(h).apply(this, args);
  };
  debounced.flush = () => h.driver?.flush();
  debounced.cancel = () => h.driver?.cancel();
  debounced.pending = () => h.driver?.pending() ?? false;
  h.debounced = debounced;
  h.end = (flush) => (flush ? debounced.flush() : debounced.cancel());
  return h;
}

const isAbort = (error) => error?.name === 'AbortError';

/**
 * `debounceAsync` for a component: `read()` gives the latest `{ fn, wait,
 * options }`; `publish(change)` receives the new `data`, `error` and
 * `pending`. Returns its controller: `run`, `flush`, `cancel`, `gone` (set
 * by the owner once it is gone: later runs reject) and `end(flush)`: run
 * what waits, or reject the waiting callers and abort the run in flight.
 */
export function asyncCallback(read, publish) {
  const h = {
    gone: false,
    driver: undefined,
    key: undefined,
    // The controllers of the runs in flight, aborted at the end.
    runs: new Set(),
    settings: () => [...debounceSettings(read().wait, read().options), ...['mode', 'timeout', 'signal'].map((k) => get(read().options, k))],
    make: (call) => debounceAsync(call, read().wait, read().options),
    // `fn` gets a signal that aborts with the driver's (a newer run superseded it) or at the end.
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
        const result = read().fn.apply(this, args);
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
    publish(change);
  };
  h.run = function (...args) {
    if (h.gone) return Promise.reject(domError('the component unmounted', 'AbortError'));
    const driver = driverOf(h);
    const promise = driver.apply(this, args);
    publish({ pending: true });
    promise.then(
      (value) => settled(driver, true, value),
      (error) => settled(driver, false, error),
    );
    return promise;
  };
  h.flush = () => h.driver?.flush();
  h.cancel = () => h.driver?.cancel();
  h.end = (flush) => {
    if (flush) {
      h.flush();
      return;
    }
    h.cancel();
    const error = domError('the component unmounted', 'AbortError');
    h.runs.forEach((controller) => controller.abort(error));
  };
  return h;
}

/** The settings of `bindSearch` that a new binding applies. */
export const SEARCH_SETTINGS = ['wait', 'maxWait', 'minLength', 'cache'];

/**
 * `bindSearch` for a component: `read()` gives the latest options (`value(o,
 * k)` reads a setting of them: `o[k]` unless told), `publish(change)`
 * receives the new `query`, `results`, `error` and `pending`. Returns its
 * controller: `ref(input)` binds that input (`null`: unbinds, aborting the
 * search in flight), `rebindIfChanged()` binds again if the settings changed
 * and the binding is idle (a query in progress keeps the ones it began
 * with; the cache starts empty), `flush` and `cancel`.
 */
export function searchBox(read, publish, value = (o, k) => o[k]) {
  const h = { input: null, binding: undefined, key: undefined };
  const settings = () => SEARCH_SETTINGS.map((k) => value(read(), k));
  const user = (name, ...args) => read()[name]?.apply(read(), args);
  // The binding's options: fixed for its life; each calls what the caller passed last.
  const bound = () => {
    const [wait, maxWait, minLength, cache] = settings();
    return {
      wait,
      maxWait,
      minLength,
      cache,
      search: (query, signal) => read().search.call(read(), query, signal),
      onResults: (results, query) => {
        publish({ query, results, error: undefined });
        user('onResults', results, query);
      },
      onError: (error, query) => {
        publish({ query, error });
        user('onError', error, query);
      },
      onPending: (pending) => {
        publish({ pending });
        user('onPending', pending);
        if (!pending) rebindIfChanged();
      },
    };
  };
  const unbind = () => {
    h.binding?.destroy();
    h.binding = undefined;
    publish({ pending: false });
  };
  const bind = () => {
    h.key = settings();
    h.binding = bindSearch(h.input, bound());
  };
  const rebindIfChanged = () => {
    if (!h.binding || same(h.key, settings()) || h.binding.pending()) return;
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
}

/**
 * A `lull-web/edge` client for a component: `read()` gives the latest `{
 * url, token, retries, fetch }`. Returns `{ api, close }`: `api` has the
 * client's calls, made on first use; a change of `url`, of a string `token`
 * or of `retries` makes a new client (the old one hands over what it held);
 * a token function may change freely (the latest is called). `close()`
 * hands over what the page holds.
 */
export function edgeClient(read) {
  const h = { client: undefined, key: undefined };
  // A token function is one setting however often it is made anew; the latest is called.
  const mint = () => read().token();
  const settings = () => {
    const { url, token, retries } = read();
    return [url, typeof token === 'function' ? mint : token, retries];
  };
  const client = () => {
    const key = settings();
    if (h.client === undefined || !same(h.key, key)) {
      h.client?.close();
      const [url, token, retries] = key;
      const fetch = (...args) => (read().fetch ?? globalThis.fetch)(...args);
      h.client = edge({ url, token, retries, fetch });
      h.key = key;
    }
    return h.client;
  };
  const close = () => {
    h.client?.close();
    h.client = undefined;
  };
  const api = {
    send: (...args) => client().send(...args),
    flush: (...args) => client().flush(...args),
    cancel: (...args) => client().cancel(...args),
    status: (...args) => client().status(...args),
    timeline: (...args) => client().timeline(...args),
    pending: (...args) => h.client?.pending(...args) ?? false,
  };
  return { api, close };
}
