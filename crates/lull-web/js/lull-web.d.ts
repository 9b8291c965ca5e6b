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
