// `lull-web/vue`: Vue composables over lull-web's drivers (peer dependency
// `vue` >= 3.3, not bundled).
//
// Each composable owns its driver and makes it on first use, never in
// `setup()`: a server render (`renderToString`) makes nothing, arms no timer
// and sends nothing. A driver calls the latest function (a `fn` given as a
// ref is read at each run) and reads `wait` and the options (values, refs or
// getters) when a burst begins, so a change applies from the next burst.
// When the effect scope that called it is disposed (a component unmounts,
// `effectScope().stop()`), a composable cancels what waits (or flushes it,
// with `flushOnUnmount`) and later calls are ignored. The controllers are
// the React hooks' (adapter.js): one behaviour, two frameworks.

import { getCurrentScope, isRef, onScopeDispose, shallowReadonly, shallowRef, toValue, unref, watch } from 'vue';
import { SEARCH_SETTINGS, asyncCallback, edgeClient, needEdgeOptions, needFunction, needOptions, needWait, searchBox, timedCallback } from './adapter.js';
import { debounce, throttle } from './debounce.js';
import { get } from './options.js';

/** Run `end` when the current effect scope is disposed (none outside a scope: the caller ends it). */
function onDispose(end) {
  if (getCurrentScope()) onScopeDispose(end);
}

/** Options as given (an object, or a ref or getter of one), with each field that is a ref read. */
function resolved(options) {
  const o = toValue(options);
  if (o === null || typeof o !== 'object') return o;
  let copy;
  for (const k of Object.keys(o)) if (isRef(o[k])) (copy ??= { ...o })[k] = o[k].value;
  return copy ?? o;
}

/** The latest `{ fn, wait, options }` of a composable, checked (a `TypeError` for bad input). */
function reader(fn, wait, options, auto) {
  const read = () => {
    const w = toValue(wait);
    needWait(w, auto);
    const o = resolved(options);
    needOptions(o);
    return { fn: needFunction(unref(fn), 'fn'), wait: w, options: o };
  };
  read(); // bad input is refused at once, where the composable is called
  return read;
}

/** End controller `h` with the scope: later calls are ignored; what waits is dropped (or run, with `flushOnUnmount`). */
function endWithScope(h, options) {
  onDispose(() => {
    h.gone = true;
    h.end(get(resolved(options), 'flushOnUnmount'));
  });
}

/** Readonly refs holding `initial`'s fields, and the `publish(change)` that sets them. */
function published(initial) {
  const state = Object.fromEntries(Object.entries(initial).map(([k, v]) => [k, shallowRef(v)]));
  const publish = (change) => {
    for (const k of Object.keys(change)) state[k].value = change[k];
  };
  return { refs: Object.fromEntries(Object.entries(state).map(([k, r]) => [k, shallowReadonly(r)])), publish };
}

/** What `useDebouncedFn` and `useThrottledFn` share; `make(fn, wait, options)` is lull-web's driver. */
function timed(make, fn, wait, options, auto) {
  const h = timedCallback(make, reader(fn, wait, options, auto));
  endWithScope(h, options);
  return h.debounced;
}

/**
 * lull-web's `debounce` as a composable: `useDebouncedFn(fn, wait, { leading,
 * trailing, maxWait, flushOnHide, flushOnUnmount })`. `fn` is a function, or a
 * ref holding one (`toRef(() => props.onSave)`: the latest is called); `wait`
 * and the options may be refs or getters (read when a burst begins). Returns
 * a function with `flush()`, `cancel()` and `pending()`. When the scope is
 * disposed a pending call is dropped (with `flushOnUnmount`: run); later calls
 * are ignored.
 */
export function useDebouncedFn(fn, wait, options) {
  return timed(debounce, fn, wait, options, true);
}

/** lull-web's `throttle` as a composable: as `useDebouncedFn`, with `{ leading, trailing, flushOnHide, flushOnUnmount }`. */
export function useThrottledFn(fn, wait, options) {
  return timed(throttle, fn, wait, options, false);
}

/**
 * `source` (a ref or a getter), debounced: a readonly ref that starts with
 * `source`'s value and takes each later value once `wait` (and the options,
 * as `useDebouncedFn`'s) says, with `flush()`, `cancel()` and `pending()`
 * beside `value`. VueUse's `refDebounced`, with controls.
 */
export function useDebouncedRef(source, wait, options) {
  const debounced = shallowRef(toValue(source));
  const pass = useDebouncedFn(
    (next) => {
      debounced.value = next;
    },
    wait,
    options,
  );
  if (isRef(source) || typeof source === 'function') watch(source, (next) => pass(next));
  Object.assign(debounced, { flush: pass.flush, cancel: pass.cancel, pending: pass.pending });
  return shallowReadonly(debounced);
}

/**
 * lull-web's `debounceAsync` as a composable: `{ run, data, error, pending,
 * flush, cancel }`, `data`, `error` and `pending` readonly refs. `run(...args)`
 * returns its window's promise; `fn` gets the latest call's arguments and an
 * `AbortSignal`. `data` is the newest result and `error` the newest failure
 * (an aborted run is neither); a run a newer one superseded is aborted, so
 * results never arrive out of order. When the scope is disposed the callers
 * waiting reject and the run in flight is aborted (with `flushOnUnmount`:
 * what waits runs instead); later calls reject.
 */
export function useDebouncedAsync(fn, wait, options) {
  const { refs, publish } = published({ data: undefined, error: undefined, pending: false });
  const h = asyncCallback(reader(fn, wait, options, true), publish);
  endWithScope(h, options);
  return { run: h.run, ...refs, flush: h.flush, cancel: h.cancel };
}

/**
 * lull-web's `bindSearch` as a composable: `useSearch({ search, wait,
 * maxWait, minLength, cache, onResults, onError, onPending })` (an object, or
 * a ref or getter of one; a setting may be a ref) returns `{ ref, query,
 * results, error, pending, flush, cancel }`. `ref` is a template ref: put it on
 * an `<input>` (`ref="input"` with `const { ref: input } = useSearch(…)`, or
 * `:ref`); everything `bindSearch` does holds there (no search
 * mid-IME-composition, Enter searches now, Escape cancels, stale requests
 * aborted, responses never out of order, the cache). `query`, `results`,
 * `error` and `pending` are readonly refs. `search` and the callbacks are
 * the latest given; a change of `wait`, `maxWait`, `minLength` or `cache`
 * binds the input again once it is idle. Unmounting the input or disposing
 * the scope aborts the search in flight.
 */
export function useSearch(options) {
  const read = () => {
    const o = resolved(options);
    needOptions(o, true);
    needFunction(o.search, 'search');
    needWait(o.wait, true);
    return o;
  };
  read();
  const { refs, publish } = published({ query: '', results: undefined, error: undefined, pending: false });
  const h = searchBox(read, publish);
  const input = shallowRef(null);
  // `sync`: bound as soon as Vue sets the template ref, unbound as soon as it clears it.
  watch(input, (element) => h.ref(element ?? null), { flush: 'sync' });
  watch(
    () => SEARCH_SETTINGS.map((k) => read()[k]),
    () => h.rebindIfChanged(),
  );
  onDispose(() => h.ref(null));
  return { ref: input, ...refs, flush: h.flush, cancel: h.cancel };
}

/**
 * A `lull-web/edge` client as a composable: `useEdge({ url, token, retries,
 * fetch })` (an object, or a ref or getter of one) returns the client's
 * `send`, `flush`, `cancel`, `status`, `timeline` and `pending`, the client
 * made on first use. A `token` function is called as the client calls it
 * (before the token's `exp`, and after a `401`), the latest one given. A
 * change of `url`, of a string `token` or of `retries` makes a new client
 * (the old one hands over what it held). Disposing the scope hands over what
 * the page holds, as when the page is hidden.
 */
export function useEdge(options) {
  const read = () => {
    const o = resolved(options);
    needEdgeOptions(o);
    return o;
  };
  read();
  const { api, close } = edgeClient(read);
  onDispose(close);
  return api;
}
