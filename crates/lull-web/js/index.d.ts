/** lodash's debounce options, plus `flushOnHide`. */
export interface DebounceOptions {
  /** Call on the leading edge of a burst. Default `false` (throttle: `true`). */
  leading?: boolean;
  /** Call on the trailing edge of a burst. Default `true`. */
  trailing?: boolean;
  /** Longest time (ms) a burst may defer the call; raised to `wait` if smaller. */
  maxWait?: number;
  /** Flush when the page is hidden or unloaded. Default `false`. */
  flushOnHide?: boolean;
}

/** A debounced function: lodash's callable with `cancel`, `flush`, `pending`. */
export interface DebouncedFunc<F extends (...args: any[]) => any> {
  (this: ThisParameterType<F>, ...args: Parameters<F>): ReturnType<F> | undefined;
  /** Drop the pending call. */
  cancel(): void;
  /** Run the pending call now; returns the latest result. */
  flush(): ReturnType<F> | undefined;
  /** Whether a call is pending. */
  pending(): boolean;
}

/** lodash-compatible debounce. `wait` in ms, or `"auto"` to learn it from the call rhythm. */
export function debounce<F extends (...args: any[]) => any>(
  func: F,
  wait?: number | "auto",
  options?: DebounceOptions,
): DebouncedFunc<F>;

/** lodash-compatible throttle. */
export function throttle<F extends (...args: any[]) => any>(
  func: F,
  wait?: number,
  options?: Pick<DebounceOptions, "leading" | "trailing" | "flushOnHide">,
): DebouncedFunc<F>;

/** Options of `debounceAsync`. */
export interface DebounceAsyncOptions extends DebounceOptions {
  /**
   * `"latest"` (default): a newer run aborts the running one (its `AbortSignal`
   * fires) and its callers reject with an `AbortError`. `"queue"`: a newer
   * run waits until the running one settles; never two at once.
   */
  mode?: "latest" | "queue";
  /**
   * A run not settled after this many ms is over: its callers reject with a
   * `TimeoutError` and its signal aborts, so a promise that never settles
   * cannot hold the queue (`mode: "queue"`).
   */
  timeout?: number;
  /** Aborting it cancels: pending callers reject, later calls reject at once. */
  signal?: AbortSignal;
}

/** A function made by `debounceAsync`: every call returns its window's promise. */
export interface DebouncedAsyncFunc<A extends unknown[], R> {
  (...args: A): Promise<R>;
  /** Reject the callers of the window not yet run with an `AbortError`. */
  cancel(): void;
  /** Run the pending window now. */
  flush(): void;
  /** Whether a window waits or a run is going. */
  pending(): boolean;
}

/**
 * Promise-returning debounce: every caller of a window settles with that
 * window's result or error. `func` gets the latest call's arguments, then an
 * `AbortSignal` that aborts when a newer run supersedes it.
 */
export function debounceAsync<A extends unknown[], R>(
  func: (...args: [...A, AbortSignal]) => R | PromiseLike<R>,
  wait?: number | "auto",
  options?: DebounceAsyncOptions,
): DebouncedAsyncFunc<A, Awaited<R>>;

/** A function made by `debounceKeyed`: debounced per key, one timer for all. */
export interface KeyedDebouncedFunc<K extends string | number, A extends unknown[]> {
  (key: K, ...args: A): void;
  /** Drop the pending call of `key`, or of every key. */
  cancel(key?: K): void;
  /** Run the pending call of `key`, or of every key, now. */
  flush(key?: K): void;
  /** Whether `key` (or any key) has a call pending. */
  pending(key?: K): boolean;
  /**
   * Forget `key`: drop its pending call and what it learned. Idle keys are
   * forgotten on their own (with `wait: "auto"`, past 1,000 idle keys the one
   * idle longest goes first).
   */
  remove(key: K): void;
}

/** Debounce per key (e.g. autosave per form field): `func(key, ...latestArgs)`. */
export function debounceKeyed<K extends string | number, A extends unknown[]>(
  func: (key: K, ...args: A) => unknown,
  wait?: number | "auto",
  options?: DebounceOptions,
): KeyedDebouncedFunc<K, A>;

/** Options of `bindSearch`. */
export interface SearchOptions<T> {
  /** Run a query; abort the request when `signal` fires (a newer query superseded it). */
  search(query: string, signal: AbortSignal): PromiseLike<T> | T;
  /** Quiet period in ms, or `"auto"` to learn it from the typing rhythm. Default 250. */
  wait?: number | "auto";
  /** Longest a query may wait while typing continues (ms). */
  maxWait?: number;
  /** Shortest (trimmed) query searched. Default 1. */
  minLength?: number;
  /** Remember this many recent results (LRU) and answer repeats without a request. Default 0. */
  cache?: number;
  /** The newest results; an older response is never delivered after a newer one. */
  onResults?(results: T, query: string): void;
  /** A failed search (aborted ones are not reported). */
  onError?(error: unknown, query: string): void;
  /** A query waits or a request runs (`true`), or neither (`false`). */
  onPending?(pending: boolean): void;
}

/**
 * Bind a search box: debounced, no search mid-IME-composition (one at
 * `compositionend`), Enter searches now, Escape cancels, trimmed and
 * unchanged queries skipped, stale requests aborted. Call `destroy()` to unbind.
 */
export function bindSearch<T>(input: HTMLInputElement, options: SearchOptions<T>): SearchBinding;

/** A search box bound by `bindSearch`. */
export interface SearchBinding {
  /** Remove every listener, disarm the timer, abort the running request. */
  destroy(): void;
  /** Search the current query now (what Enter does). */
  flush(): void;
  /** Drop the pending query and abort the running request (what Escape does). */
  cancel(): void;
  /** The quiet period in force (ms): `wait`, or with `"auto"` what it learned from the typing (`undefined` before any). */
  wait(): number | undefined;
  /** Whether a query waits or a request is running. */
  pending(): boolean;
}

/**
 * How many debouncers, keyed groups, async debouncers and search bindings
 * hold an engine now (a leak check; a collected one lets its engine go).
 */
export function liveObjects(): number;

/** Resolves at once: the engines are embedded and compile on first use. Kept for earlier code. */
export function init(): Promise<void>;

/** `init`, as earlier releases exported it: `import init from "lull-web"`. */
export default init;
