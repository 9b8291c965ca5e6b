// `bindSearch`: a search box. Debounced queries, IME-aware, stale requests
// aborted, responses never delivered out of order, optional LRU cache.

import { DROPPED, FIRE, seed } from './engine.js';
import { full } from './full.js';
import { count, created, groupArgs, lodashTiming } from './options.js';
import { abort, clear, domError, follow, needFunction, now, own, reportLater, startRun, typeError, weak } from './runtime.js';

// The one key of the engine's group.
const KEY = 0;

/** Call an optional callback like a method of the options (`this` is the options object). */
function call(s, name, a, b) {
  const f = s.callbacks[name];
  if (!f) return;
  try {
    f.call(s.options, a, b);
  } catch (error) {
    reportLater(error);
  }
}

/** The input's value changed (or composition ended): schedule its query. */
function onInput(s) {
  if (s.composing) return;
  const query = s.input.value.trim();
  if (s.scheduled === query) return; // unchanged (e.g. a trailing space): nothing to do
  if ([...query].length < s.minLength) {
    s.scheduled = undefined;
    stop(s);
    return;
  }
  s.scheduled = query;
  s.latest = query;
  s.queries.set(s.e.keyed_event(s.h, KEY, now()), query);
  pump(s);
}

/** Cancel the pending query and abort the running request. */
function stop(s) {
  s.e.keyed_cancel(s.h, KEY, now());
  const running = s.running;
  s.running = undefined;
  abort(running, domError('search cancelled', 'AbortError'));
  pump(s);
}

function pump(s) {
  const e = s.e;
  for (let kind; (kind = e.keyed_poll(s.h)) !== 0; ) {
    const window = e.action_window();
    if (kind === FIRE) start(s, window);
    else if (kind === DROPPED) s.queries.delete(window);
  }
  follow(s, e.keyed_deadline(s.h), onTimer);
  const pending = e.keyed_pending(s.h, KEY) === 1 || s.running !== undefined;
  if (pending !== s.reportedPending) {
    s.reportedPending = pending;
    call(s, 'onPending', pending);
  }
}

function onTimer(s) {
  s.e.keyed_timeout(s.h, performance.now());
  pump(s);
}

/** Search a window's query: from the cache, or with a request that a newer one aborts. */
function start(s, window) {
  const query = s.queries.get(window) ?? s.latest;
  s.queries.delete(window);
  const stale = s.running;
  s.running = undefined;
  abort(stale, domError('superseded by a newer query', 'AbortError'));
  if (s.cache.has(query)) {
    const results = s.cache.get(query);
    remember(s, query, results);
    s.e.keyed_ended(s.h, KEY, window, 1, performance.now());
    call(s, 'onResults', results, query);
    return;
  }
  startRun(s, { window, query }, (signal) => s.callbacks.search.call(s.options, query, signal), finish);
}

/** Keep `results` as the most recent entry of the LRU cache. */
function remember(s, query, results) {
  if (s.capacity === 0) return;
  s.cache.delete(query);
  s.cache.set(query, results);
  if (s.cache.size > s.capacity) s.cache.delete(s.cache.keys().next().value);
}

/** A request settled: deliver it only if it is still the latest. */
function finish(s, run, ok, value) {
  if (s.running !== run) return; // aborted or superseded: never delivered
  s.running = undefined;
  s.e.keyed_ended(s.h, KEY, run.window, +ok, performance.now());
  if (ok) remember(s, run.query, value);
  call(s, ok ? 'onResults' : 'onError', value, run.query);
  pump(s);
}

function onKey(s, event) {
  if (event.isComposing || s.composing) return;
  if (event.key === 'Enter') {
    flushNow(s);
  } else if (event.key === 'Escape') {
    s.scheduled = undefined;
    stop(s);
  }
}

function flushNow(s) {
  onInput(s);
  s.e.keyed_flush(s.h, KEY, now());
  pump(s);
}

/** The callback `name` of the options: required, or `undefined` when absent. */
function callback(options, name, required) {
  const f = options[name];
  return f === undefined && !required ? undefined : needFunction(f, name);
}

/** A search box bound by `bindSearch`. Keep it to call `destroy()`. */
class SearchBinding {
  #s;
  #unlisten;

  constructor(s, unlisten) {
    this.#s = s;
    this.#unlisten = unlisten;
  }

  /** Remove every listener, disarm the timer, abort the running request. */
  destroy() {
    this.#unlisten();
    stop(this.#s);
    clear(this.#s);
  }

  /** Search the current query now (what Enter does). */
  flush() {
    flushNow(this.#s);
  }

  /** Drop the pending query and abort the running request (what Escape does). */
  cancel() {
    this.#s.scheduled = undefined;
    stop(this.#s);
  }

  /** The quiet period in force (ms): `wait`, or with `"auto"` what it learned from the typing (`undefined` before any). */
  wait() {
    const s = this.#s;
    const ms = s.e.keyed_wait(s.h, KEY);
    return ms < 0 ? s.fixed : ms;
  }

  /** Whether a query waits or a request is running. */
  pending() {
    return this.#s.e.keyed_pending(this.#s.h, KEY) === 1 || this.#s.running !== undefined;
  }
}

/**
 * `bindSearch`'s defaults: `wait` defaults to 250 ms, `minLength` to 1
 * (shorter queries are not searched), `cache` to 0 (no cache), no `maxWait`.
 */
const DEFAULTS = { wait: 250, minLength: 1, cache: 0 };

/** A search runs on the trailing edge only, and a newer one supersedes (aborts) the one running. */
const EDGES = { leading: false, trailing: true };

/** `bindSearch(input, { search, wait, maxWait, minLength, cache, onResults, onError, onPending })`. */
export function bindSearch(input, options) {
  if (!(typeof HTMLInputElement === 'function' && input instanceof HTMLInputElement)) {
    throw typeError('`input` must be an <input> element');
  }
  if (options === null || typeof options !== 'object') {
    throw typeError('bindSearch options must be an object with a `search` function');
  }
  const minLength = count(options, 'minLength') ?? DEFAULTS.minLength;
  const capacity = count(options, 'cache') ?? DEFAULTS.cache;
  const callbacks = {
    search: callback(options, 'search', true),
    onResults: callback(options, 'onResults'),
    onError: callback(options, 'onError'),
    onPending: callback(options, 'onPending'),
  };
  const e = full();
  // Only `wait` and `maxWait` are read: the edges and the overlap are the search's own.
  const wait = options.wait === undefined ? DEFAULTS.wait : options.wait;
  const policy = { ...lodashTiming(wait, { maxWait: options.maxWait }, EDGES), overlap: 'supersede' };
  const fixed = policy.wait === 'auto' ? undefined : policy.wait;
  const h = created(e.keyed_create(seed(), ...groupArgs(policy)));
  const s = {
    e,
    h,
    input,
    options,
    callbacks,
    minLength,
    capacity,
    fixed,
    composing: false,
    latest: '',
    queries: new Map(),
    scheduled: undefined,
    running: undefined,
    cache: new Map(),
    reportedPending: false,
    timer: undefined,
    due: 0,
  };
  // The listeners hold the state weakly: the input does not keep a binding
  // alive that nothing else holds.
  const target = weak(s);
  const listeners = [
    ['input', onInput],
    [
      'compositionstart',
      (s) => {
        s.composing = true;
      },
    ],
    [
      'compositionend',
      (s) => {
        s.composing = false;
        onInput(s);
      },
    ],
    ['keydown', onKey],
  ].map(([type, handle]) => {
    const listener = (event) => {
      const s = target.deref();
      if (s) handle(s, event);
    };
    input.addEventListener(type, listener);
    return [type, listener];
  });
  const unlisten = () => listeners.forEach(([type, listener]) => input.removeEventListener(type, listener));
  own(s, e.keyed_free, h, unlisten);
  return new SearchBinding(s, unlisten);
}
