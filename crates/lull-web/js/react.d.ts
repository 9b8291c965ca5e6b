import type { DebounceAsyncOptions, DebounceOptions, DebouncedFunc, SearchOptions } from "./index.js";
import type { EdgeClient, EdgeOptions } from "./edge.js";

/** Options of `useDebouncedCallback` and `useDebouncedValue`: lull-web's `debounce` options, plus `flushOnUnmount`. */
export interface DebouncedCallbackOptions extends DebounceOptions {
  /** On unmount, run the pending call instead of dropping it. Default `false`. */
  flushOnUnmount?: boolean;
}

/** Options of `useThrottledCallback`: lull-web's `throttle` options, plus `flushOnUnmount`. */
export type ThrottledCallbackOptions = Pick<DebouncedCallbackOptions, "leading" | "trailing" | "flushOnHide" | "flushOnUnmount">;

/**
 * lull-web's `debounce` as a hook. The function returned keeps its identity
 * across renders and always calls the latest `fn`; it has `flush()`,
 * `cancel()` and `pending()`. Unmounting cancels a pending call (or flushes
 * it, with `flushOnUnmount`); calls after that are ignored. A change of
 * `wait` or an option applies from the next burst. Throws a `TypeError` for
 * a `fn` that is not a function or a `wait` that is not milliseconds (or `"auto"`).
 */
export function useDebouncedCallback<F extends (...args: any[]) => any>(
  fn: F,
  wait?: number | "auto",
  options?: DebouncedCallbackOptions,
): DebouncedFunc<F>;

/** lull-web's `throttle` as a hook, as `useDebouncedCallback`. */
export function useThrottledCallback<F extends (...args: any[]) => any>(
  fn: F,
  wait?: number,
  options?: ThrottledCallbackOptions,
): DebouncedFunc<F>;

/** What `useDebouncedValue` returns beside the value; keeps its identity. */
export interface DebouncedValueControls {
  /** Pass the pending value on now. */
  flush(): void;
  /** Drop the pending value. */
  cancel(): void;
  /** Whether a value waits to be passed on. */
  pending(): boolean;
}

/** `value`, debounced: the first render returns `value`; later values are passed on as `wait` and `options` say. */
export function useDebouncedValue<T>(
  value: T,
  wait?: number | "auto",
  options?: DebouncedCallbackOptions,
): [debounced: T, controls: DebouncedValueControls];

/** Options of `useDebouncedAsync`: lull-web's `debounceAsync` options, plus `flushOnUnmount`. */
export interface DebouncedAsyncOptions extends DebounceAsyncOptions {
  /** On unmount, run the window that waits instead of dropping it (and leave the run in flight alone). Default `false`. */
  flushOnUnmount?: boolean;
}

/** What `useDebouncedAsync` returns. */
export interface DebouncedAsync<A extends unknown[], R> {
  /** Call: resolves with its window's result (keeps its identity). */
  run(...args: A): Promise<R>;
  /** The newest result, `undefined` before any. */
  data: R | undefined;
  /** The newest failure (not an aborted run), cleared by the next result. */
  error: unknown;
  /** Whether a window waits or a run is going. */
  pending: boolean;
  /** Run the window that waits now. */
  flush(): void;
  /** Drop the window that waits (its callers reject with an `AbortError`). */
  cancel(): void;
}

/**
 * lull-web's `debounceAsync` as a hook. `fn` gets the latest call's arguments
 * and an `AbortSignal` that aborts when a newer run supersedes it or the
 * component unmounts; results never arrive out of order.
 */
export function useDebouncedAsync<A extends unknown[], R>(
  fn: (...args: [...A, AbortSignal]) => R | PromiseLike<R>,
  wait?: number | "auto",
  options?: DebouncedAsyncOptions,
): DebouncedAsync<A, Awaited<R>>;

/** What `useSearch` returns. */
export interface Search<T> {
  /** Put on the `<input>` (controlled or not): the binding listens to it. */
  ref: (input: HTMLInputElement | null) => void;
  /** The query `results` (or `error`) answer; `""` before any. */
  query: string;
  /** The newest results, `undefined` before any. */
  results: T | undefined;
  /** The newest failure of a search, cleared by the next results. */
  error: unknown;
  /** Whether a query waits or a request runs. */
  pending: boolean;
  /** Search the input's query now (what Enter does). */
  flush(): void;
  /** Drop the pending query and abort the request (what Escape does). */
  cancel(): void;
}

/**
 * lull-web's `bindSearch` as a hook: IME-aware, Enter searches now, Escape
 * cancels, stale requests aborted, responses never out of order, optional
 * cache. A change of `wait`, `maxWait`, `minLength` or `cache` binds the input
 * again once it is idle.
 */
export function useSearch<T>(options: SearchOptions<T>): Search<T>;

/** What `useEdge` returns: the client's calls (it keeps its identity; the hook closes the client on unmount). */
export type Edge = Omit<EdgeClient, "close">;

/**
 * A `lull-web/edge` client as a hook. A `token` function is called as the
 * client calls it (before `exp`, after a `401`); a change of `url`, of a
 * string `token` or of `retries` makes a new client. Unmounting hands over
 * what the page holds.
 */
export function useEdge(options: EdgeOptions): Edge;
