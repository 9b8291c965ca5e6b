import type { MaybeRefOrGetter, Ref, ShallowRef } from "vue";
import type { DebounceAsyncOptions, DebounceOptions, DebouncedFunc, SearchOptions } from "./index.js";
import type { EdgeClient, EdgeOptions } from "./edge.js";

/** An options object whose fields may each be a ref (read when a burst begins). */
export type MaybeRefFields<T> = { [K in keyof T]: T[K] | Ref<T[K]> };

/** Options as a composable takes them: an object, or a ref or getter of one; a field may be a ref. */
export type ComposableOptions<T> = MaybeRefOrGetter<MaybeRefFields<T>>;

/** Options of `useDebouncedFn` and `useDebouncedRef`: lull-web's `debounce` options, plus `flushOnUnmount`. */
export interface DebouncedFnOptions extends DebounceOptions {
  /** When the effect scope is disposed (the component unmounts), run the pending call instead of dropping it. Default `false`. */
  flushOnUnmount?: boolean;
}

/** Options of `useThrottledFn`: lull-web's `throttle` options, plus `flushOnUnmount`. */
export type ThrottledFnOptions = Pick<DebouncedFnOptions, "leading" | "trailing" | "flushOnHide" | "flushOnUnmount">;

/** A function, or a ref holding one (`toRef(() => props.onSave)`): the latest is called. */
export type MaybeRefFn<F> = F | Readonly<Ref<F>>;

/**
 * lull-web's `debounce` as a composable. `wait` and the options may be refs
 * or getters, read when a burst begins. The function returned has `flush()`,
 * `cancel()` and `pending()`. When the effect scope is disposed a pending
 * call is dropped (with `flushOnUnmount`: run); later calls are ignored.
 * Throws a `TypeError` for a `fn` that is not a function or a `wait` that is
 * not milliseconds (or `"auto"`).
 */
export function useDebouncedFn<F extends (...args: any[]) => any>(
  fn: MaybeRefFn<F>,
  wait?: MaybeRefOrGetter<number | "auto" | undefined>,
  options?: ComposableOptions<DebouncedFnOptions>,
): DebouncedFunc<F>;

/** lull-web's `throttle` as a composable, as `useDebouncedFn`. */
export function useThrottledFn<F extends (...args: any[]) => any>(
  fn: MaybeRefFn<F>,
  wait?: MaybeRefOrGetter<number | undefined>,
  options?: ComposableOptions<ThrottledFnOptions>,
): DebouncedFunc<F>;

/** The controls of a debounced ref (not reactive: they read the debouncer now). */
export interface DebouncedRefControls {
  /** Take the pending value now. */
  flush(): void;
  /** Drop the pending value. */
  cancel(): void;
  /** Whether a value waits to be taken. */
  pending(): boolean;
}

/** What `useDebouncedRef` returns: a readonly ref, with the controls beside `value`. */
export type DebouncedRef<T> = Readonly<Ref<T>> & DebouncedRefControls;

/**
 * `source` (a ref or a getter), debounced: a readonly ref that starts with
 * `source`'s value and takes each later value as `wait` and `options` say.
 */
export function useDebouncedRef<T>(
  source: MaybeRefOrGetter<T>,
  wait?: MaybeRefOrGetter<number | "auto" | undefined>,
  options?: ComposableOptions<DebouncedFnOptions>,
): DebouncedRef<T>;

/** Options of `useDebouncedAsync`: lull-web's `debounceAsync` options, plus `flushOnUnmount`. */
export interface DebouncedAsyncOptions extends DebounceAsyncOptions {
  /** When the scope is disposed, run the window that waits instead of dropping it (and leave the run in flight alone). Default `false`. */
  flushOnUnmount?: boolean;
}

/** What `useDebouncedAsync` returns. */
export interface DebouncedAsync<A extends unknown[], R> {
  /** Call: resolves with its window's result. */
  run(...args: A): Promise<R>;
  /** The newest result, `undefined` before any. */
  data: Readonly<ShallowRef<R | undefined>>;
  /** The newest failure (not an aborted run), cleared by the next result. */
  error: Readonly<ShallowRef<unknown>>;
  /** Whether a window waits or a run is going. */
  pending: Readonly<ShallowRef<boolean>>;
  /** Run the window that waits now. */
  flush(): void;
  /** Drop the window that waits (its callers reject with an `AbortError`). */
  cancel(): void;
}

/**
 * lull-web's `debounceAsync` as a composable. `fn` gets the latest call's
 * arguments and an `AbortSignal` that aborts when a newer run supersedes it
 * or the scope is disposed; results never arrive out of order.
 */
export function useDebouncedAsync<A extends unknown[], R>(
  fn: MaybeRefFn<(...args: [...A, AbortSignal]) => R | PromiseLike<R>>,
  wait?: MaybeRefOrGetter<number | "auto" | undefined>,
  options?: ComposableOptions<DebouncedAsyncOptions>,
): DebouncedAsync<A, Awaited<R>>;

/** What `useSearch` returns. */
export interface Search<T> {
  /** A template ref: put it on the `<input>` (`ref="input"` after `const { ref: input } = useSearch(…)`, or `:ref`). */
  ref: ShallowRef<HTMLInputElement | null>;
  /** The query `results` (or `error`) answer; `""` before any. */
  query: Readonly<ShallowRef<string>>;
  /** The newest results, `undefined` before any. */
  results: Readonly<ShallowRef<T | undefined>>;
  /** The newest failure of a search, cleared by the next results. */
  error: Readonly<ShallowRef<unknown>>;
  /** Whether a query waits or a request runs. */
  pending: Readonly<ShallowRef<boolean>>;
  /** Search the input's query now (what Enter does). */
  flush(): void;
  /** Drop the pending query and abort the request (what Escape does). */
  cancel(): void;
}

/** Options of `useSearch`: `bindSearch`'s; `wait`, `maxWait`, `minLength` and `cache` may be refs. */
export type SearchComposableOptions<T> = Omit<SearchOptions<T>, SearchSetting> & MaybeRefFields<Pick<SearchOptions<T>, SearchSetting>>;

/** The settings of a search binding, which a new binding applies. */
export type SearchSetting = "wait" | "maxWait" | "minLength" | "cache";

/**
 * lull-web's `bindSearch` as a composable: IME-aware, Enter searches now,
 * Escape cancels, stale requests aborted, responses never out of order,
 * optional cache. A change of `wait`, `maxWait`, `minLength` or `cache` binds
 * the input again once it is idle.
 */
export function useSearch<T>(options: MaybeRefOrGetter<SearchComposableOptions<T>>): Search<T>;

/** What `useEdge` returns: the client's calls (the composable closes the client when the scope is disposed). */
export type Edge = Omit<EdgeClient, "close">;

/**
 * A `lull-web/edge` client as a composable. A `token` function is called as
 * the client calls it (before `exp`, after a `401`); a change of `url`, of a
 * string `token` or of `retries` makes a new client. Disposing the scope
 * hands over what the page holds.
 */
export function useEdge(options: MaybeRefOrGetter<EdgeOptions>): Edge;
