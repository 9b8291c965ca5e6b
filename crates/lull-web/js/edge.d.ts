/** An answer of lull-edge that is not a success. */
export class EdgeError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The edge's error code (`unauthorized`, `too_many_pending`, …). */
  readonly code: string;
}

/** Options of `edge()`. */
export interface EdgeOptions {
  /** The worker's origin, e.g. `https://lull.example.com`. */
  url: string;
  /**
   * A bearer token: a client token (a short-lived JWT for one key or a key
   * prefix: send, flush, cancel), or a function returning (a promise of) one,
   * called again before the token's `exp` and after a `401`. Status and
   * timeline take the admin token. A `403` is never retried.
   */
  token: string | (() => string | Promise<string>);
  /**
   * Tries after `429` or `503` (after `Retry-After` or a jittered backoff), and for sends and reads
   * also after a network error or another `5xx`. Default 4. In a batch, each event's own `429` or
   * `5xx` counts the same way: only those events go again.
   */
  retries?: number;
  /** The `fetch` to use. Default `globalThis.fetch`. */
  fetch?: typeof fetch;
}

/** Options of `send`. */
export interface SendOptions {
  /** Coalesce sends of this key in the page for this quiet period (ms) first. Default 0: send now. */
  debounce?: number;
  /** Longest the page holds a burst (ms). */
  maxWait?: number;
  /** What the coalesced event carries: the last payload (default) or all of them as an array. */
  combine?: "last" | "all";
}

/** The edge's answer to a send. */
export interface Sent {
  /** The edge's window the event joined. */
  window: number;
  /** The event's sequence number at the key. */
  seq: number;
  /** The idempotency key it was sent (and retried) with: the `Idempotency-Key` header, or its `idempotency_key` in a batch. */
  idempotencyKey: string;
  /** How many `send` calls it carried. */
  count: number;
}

/** One entry of a key's timeline: a log line of the key, with its number `n` and time `t`. */
export interface TimelineEntry {
  n: number;
  t: number;
  /** `accept`, `fire`, `queued`, `deliver`, `retry`, `timeout`, `dead_letter`, `cancel`, `replay`, … */
  lull: string;
  [field: string]: unknown;
}

/** A page of a key's timeline. */
export interface Timeline {
  timeline: TimelineEntry[];
  /** Pass as `after` to get only newer entries. */
  next_after: number | null;
  /** When the key's object started keeping it (unix ms); a change means it restarted. */
  since: number;
  /** Entries kept at most. */
  kept: number;
  /** Entries dropped past that bound. */
  dropped: number;
}

/** A client of one lull-edge. */
export interface EdgeClient {
  /** Send `payload` as an event of `key` (coalesced in the page first with `debounce`). */
  send(topic: string, key: string, payload: unknown, options?: SendOptions): Promise<Sent>;
  /** Hand over what the page holds (for `key`, or all), then fire the edge's open window of `key`; rejects, firing nothing, if a hand-over failed. */
  flush(topic?: string, key?: string): Promise<Record<string, unknown> | undefined>;
  /** Drop what the page holds for `key` (its sends reject with an `AbortError`) and cancel the edge's open window. */
  cancel(topic: string, key: string): Promise<Record<string, unknown>>;
  /** The key's status at the edge. */
  status(topic: string, key: string): Promise<Record<string, unknown>>;
  /** The key's recent events, fires and deliveries. */
  timeline(topic: string, key: string, options?: { after?: number; limit?: number }): Promise<Timeline>;
  /** Whether the page holds sends not yet handed over (for `key`, or any). */
  pending(topic?: string, key?: string): boolean;
  /** Hand over what the page holds and stop listening for the page being hidden. */
  close(): void;
}

/**
 * A client of lull-edge. Sends held in the page are handed over (with
 * `fetch`'s `keepalive`, within its 64 KiB quota) when the page is hidden;
 * a key's sends reach the edge in order. Windows of several keys of a topic
 * handed over at once (a flush, `close()`, the page being hidden) go in one
 * `events:batch` request, or in as few as bodies of 60 KiB allow; a lone
 * key's on its own route. `close()` when done with it.
 */
export function edge(options: EdgeOptions): EdgeClient;
