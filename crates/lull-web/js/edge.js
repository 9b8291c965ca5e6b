// `lull-web/edge`: a browser client for lull-edge. `send` coalesces a burst
// in the page first (lull's debounce, per topic and key), then hands the
// window to the edge under the same key, with an idempotency key the
// retries repeat; windows of several keys handed over at once (a flush, the
// page being hidden) travel in one batch request, sent with `keepalive` when
// the page is hidden. Its own entry: debounce-only apps don't pay for it.

import { debounce } from './debounce.js';
import { onHide, typeError } from './runtime.js';

/** An answer of the edge that is not a success: its HTTP status and error code. */
export class EdgeError extends Error {
  constructor(status, code, message) {
    super(`lull-edge: ${status} ${code}: ${message}`);
    this.name = 'EdgeError';
    this.status = status;
    this.code = code;
  }
}

// A body the browser still sends when the page goes: keepalive's quota is 64 KiB
// in flight. A batch holds at most this much, and at most 1,000 events (the edge's bound).
const KEEPALIVE_BYTES = 60 * 1024;
const BATCH_EVENTS = 1000;
const isHidden = () => typeof document !== 'undefined' && document.visibilityState === 'hidden';
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
const path = (topic, key) => `/v1/topics/${encodeURIComponent(topic)}/keys/${encodeURIComponent(key)}`;

function text(name, value) {
  if (typeof value !== 'string' || value === '') throw typeError(`\`${name}\` must be a non-empty string`);
  return value;
}

// `.` and `..` would be dot segments of the path (the edge refuses them too).
function keyOf(value) {
  if (text('key', value) === '.' || value === '..') throw typeError('`key` must not be "." or ".."');
  return value;
}

// A client token is fetched again this long (s) before its `exp`.
const REFRESH_S = 30;

/** A JWT's `exp` (unix s), if it is one that says. */
function expOf(token) {
  try {
    const claims = JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')));
    return typeof claims.exp === 'number' ? claims.exp : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The bearer token: the one given, or the one `c.mint()` gave, fetched again
 * before its `exp` and when `stale` (after a `401`); one fetch at a time.
 */
function bearer(c, stale) {
  const expiring = c.exp !== undefined && Date.now() / 1000 > c.exp - REFRESH_S;
  if (!c.mint || (c.token && !stale && !expiring)) return c.token;
  c.minting ??= Promise.resolve()
    .then(c.mint)
    .then((token) => {
      c.token = text('token', token);
      c.exp = expOf(token);
      return c.token;
    })
    .finally(() => (c.minting = undefined));
  return c.minting;
}

/**
 * One request. Retried after `Retry-After` or a jittered backoff: on `429`
 * and `503` (the edge changed nothing), and for a send or a read also on a
 * network error and any `5xx` (a send repeats its idempotency keys, so the
 * edge stores it once); a flush or cancel whose answer was lost is not
 * repeated. A `401` with a token function fetches a token and tries once more;
 * a `403` is never retried. `leaving`: read when the send started (the
 * page-hide hook sets it only while it hands over).
 */
async function call(c, method, route, body, headers = {}, leaving = c.leaving) {
  const init = { method, headers: { ...headers } };
  // A read, or a send: only sends have a body (their events carry idempotency keys).
  const repeatable = method === 'GET' || body !== undefined;
  let bytes = 0;
  if (body !== undefined) {
    init.body = body;
    init.headers['content-type'] = 'application/json';
    bytes = new TextEncoder().encode(body).length;
  }
  let refreshed = false;
  for (let attempt = 0; ; attempt++) {
    // A page that is going sends with the token it has: a fetch for a new one would not finish.
    const token = (leaving || c.leaving) && c.token ? c.token : await bearer(c, false);
    init.headers = { ...init.headers, authorization: `Bearer ${token}` };
    // keepalive (the page is going) while the bodies in flight stay within its quota.
    init.keepalive = bytes > 0 && (leaving || c.leaving || isHidden()) && c.keepalive + bytes <= KEEPALIVE_BYTES;
    const held = init.keepalive ? bytes : 0;
    c.keepalive += held;
    let res;
    try {
      res = await c.fetch(c.url + route, init);
    } catch (error) {
      if (!repeatable || attempt >= c.retries || error?.name === 'AbortError') throw error;
      await sleep(c.backoff(attempt));
      continue;
    } finally {
      c.keepalive -= held;
    }
    const json = await res.json().catch(() => null);
    if (res.ok) return json;
    if (res.status === 401 && c.mint && !refreshed) {
      refreshed = true;
      await bearer(c, true);
      attempt--;
      continue;
    }
    const again = res.status === 429 || res.status === 503 || (repeatable && res.status >= 500);
    if (!again || attempt >= c.retries) {
      throw new EdgeError(res.status, json?.error?.code ?? 'http_error', json?.error?.message ?? res.statusText);
    }
    const after = Number(res.headers.get('retry-after'));
    await sleep(after > 0 ? after * 1000 : c.backoff(attempt));
  }
}

/**
 * Hand a page window to the edge: one event, one idempotency key for all
 * its tries, after the key's previous hand-over settled (so a key's events
 * reach the edge in order; not when the page is going: then at once). It
 * waits for the running task's microtasks, and goes with the other windows
 * handed over in that task (`dispatch`). The promise resolves when it is
 * stored, or to the error that stopped it.
 */
function handOver(c, id, entry) {
  c.held.delete(id);
  const { topic, key, payloads } = entry;
  const event = JSON.stringify(entry.combine === 'all' ? payloads : payloads[payloads.length - 1]);
  const idempotencyKey = `${c.producer}.${++c.sent}`;
  const json = `{"key":${JSON.stringify(key)},"event":${event},"idempotency_key":"${idempotencyKey}"}`;
  const previous = c.leaving ? undefined : c.sending.get(id);
  const send = () =>
    new Promise((ok, fail) => {
      if (!c.out) {
        c.out = [];
        queueMicrotask(() => dispatch(c));
      }
      c.out.leaving ||= c.leaving;
      c.out.push({ topic, key, event, idempotencyKey, json, bytes: new TextEncoder().encode(json).length + 1, ok, fail });
    });
  const done = (previous ? previous.then(send) : send()).then(
    (reply) => entry.waiters.forEach((w) => w.ok({ ...reply, idempotencyKey, count: payloads.length })),
    (error) => {
      entry.waiters.forEach((w) => w.fail(error));
      return error;
    },
  );
  c.sending.set(id, done);
  done.then(() => c.sending.get(id) === done && c.sending.delete(id));
  return done;
}

/**
 * Send the windows handed over in this task: a lone window of a topic on its
 * key's route, several in batch requests (`events:batch`), as few as their
 * bound forces (largest first, each into the first request with room).
 */
function dispatch(c) {
  const { out } = c;
  c.out = undefined;
  const requests = [];
  for (const item of out.sort((a, b) => b.bytes - a.bytes)) {
    const fits = (q) => q.topic === item.topic && q.bytes + item.bytes <= KEEPALIVE_BYTES && q.length < BATCH_EVENTS;
    let r = requests.find(fits);
    if (!r) requests.push((r = Object.assign([], { topic: item.topic, bytes: 13 })));
    r.push(item);
    r.bytes += item.bytes;
  }
  for (const [item, ...more] of requests) {
    if (more.length) batch(c, [item, ...more], out.leaving);
    else {
      const route = path(item.topic, item.key) + '/events';
      call(c, 'POST', route, item.event, { 'idempotency-key': item.idempotencyKey }, out.leaving).then(item.ok, item.fail);
    }
  }
}

/**
 * One batch request of `items` (windows of one topic), answered per item: a
 * `202` is stored; a `429` or `5xx` goes again (alone with the others that
 * got one, after a jittered backoff, up to `retries` times); another status
 * is that item's `EdgeError`. A refusal of the whole request naming an item
 * (`events[i]: …`, nothing stored) is that item's; the others go again.
 */
async function batch(c, items, leaving) {
  const route = `/v1/topics/${encodeURIComponent(items[0].topic)}/events:batch`;
  for (let attempt = 0; items.length; ) {
    let results;
    try {
      ({ results } = await call(c, 'POST', route, `{"events":[${items.map((i) => i.json)}]}`, {}, leaving));
    } catch (error) {
      const named = error instanceof EdgeError && items[/ events\[(\d+)\]:/.exec(error.message)?.[1]];
      if (!named) return items.forEach((i) => i.fail(error));
      named.fail(error);
      items = items.filter((i) => i !== named);
      continue;
    }
    items = items.filter((item, n) => {
      const { status, error, ...reply } = results[n] ?? {};
      if (status === 202) item.ok(reply);
      else if ((status === 429 || status >= 500) && attempt < c.retries) return true;
      else item.fail(new EdgeError(status, error?.code ?? 'http_error', error?.message ?? 'no answer'));
    });
    if (items.length) await sleep(c.backoff(attempt++));
  }
}

/** Hand over every window the page holds now (for `key`, or all); resolves to the errors of those that failed. */
function handOverAll(c, topic, key) {
  const sending = [];
  for (const entry of [...c.held.values()]) {
    if ((topic === undefined || entry.topic === topic) && (key === undefined || entry.key === key)) {
      sending.push(entry.run.flush());
    }
  }
  return Promise.all(sending).then((outcomes) => outcomes.filter(Boolean));
}

/** A client of one lull-edge, made by `edge()`. */
class EdgeClient {
  #c;

  constructor(c) {
    this.#c = c;
  }

  /**
   * Send `payload` (JSON) as an event of `key`. With `debounce` (ms), sends
   * within that quiet period (and at most `maxWait` apart) coalesce in the
   * page into one event: the last payload, or all of them as an array with
   * `combine: "all"`. Resolves with the edge's `{ window, seq }` (plus the
   * `idempotencyKey` used and the `count` of sends it carried).
   */
  send(topic, key, payload, options = {}) {
    const c = this.#c;
    text('topic', topic);
    keyOf(key);
    if (JSON.stringify(payload) === undefined) throw typeError('`payload` must be JSON');
    const { debounce: wait = 0, maxWait, combine = 'last' } = options;
    if (combine !== 'last' && combine !== 'all') throw typeError('`combine` must be "last" or "all"');
    const id = `${topic}\u0000${key}`;
    let entry = c.held.get(id);
    if (!entry) {
      entry = { topic, key, combine, payloads: [], waiters: [] };
      entry.run = debounce(() => handOver(c, id, entry), wait, maxWait === undefined ? {} : { maxWait });
      c.held.set(id, entry);
    }
    entry.payloads.push(payload);
    const reply = new Promise((ok, fail) => entry.waiters.push({ ok, fail }));
    if (wait > 0) {
      entry.run();
    } else {
      // Sent at once, with whatever the page held for the key.
      entry.run.cancel();
      void handOver(c, id, entry);
    }
    return reply;
  }

  /**
   * Hand over now what the page holds (for `key`, or every key), then fire
   * the edge's open window of `key`. Rejects (firing nothing) if a hand-over failed.
   */
  async flush(topic, key) {
    const [failed] = await handOverAll(this.#c, topic, key);
    if (failed) throw failed;
    if (key === undefined) return undefined;
    return call(this.#c, 'POST', path(text('topic', topic), keyOf(key)) + '/flush');
  }

  /** Drop what the page holds for `key` (its sends reject) and cancel the edge's open window. */
  async cancel(topic, key) {
    const c = this.#c;
    const entry = c.held.get(`${text('topic', topic)}\u0000${keyOf(key)}`);
    if (entry) {
      entry.run.cancel();
      c.held.delete(`${topic}\u0000${key}`);
      const error = new DOMException('send cancelled', 'AbortError');
      entry.waiters.forEach((w) => w.fail(error));
    }
    return call(c, 'DELETE', path(topic, key));
  }

  /** The key's status at the edge (admin token). */
  status(topic, key) {
    return call(this.#c, 'GET', path(text('topic', topic), keyOf(key)));
  }

  /** The key's recent events, fires and deliveries (admin token): entries numbered after `after`. */
  timeline(topic, key, { after, limit } = {}) {
    const query = new URLSearchParams();
    if (after !== undefined) query.set('after', String(after));
    if (limit !== undefined) query.set('limit', String(limit));
    const q = query.toString();
    return call(this.#c, 'GET', path(text('topic', topic), keyOf(key)) + '/timeline' + (q ? '?' + q : ''));
  }

  /** Whether the page holds sends not yet handed over (for `key`, or any). */
  pending(topic, key) {
    for (const entry of this.#c.held.values()) {
      if ((topic === undefined || entry.topic === topic) && (key === undefined || entry.key === key)) return true;
    }
    return false;
  }

  /** Hand over what the page holds and stop listening for the page being hidden. */
  close() {
    handOverAll(this.#c);
    this.#c.unhook?.();
  }
}

/**
 * `edge()`'s defaults: `retries` defaults to 4 (tries after a network error,
 * `429` or `5xx`), each after a random delay up to `backoffMs` × 2^attempt
 * (`backoffMs` 250), at most `backoffCapMs` (10 s).
 */
const DEFAULTS = { retries: 4, backoffMs: 250, backoffCapMs: 10_000 };

/**
 * A client of the lull-edge at `url` with a bearer `token`: a client token
 * (a short-lived JWT scoped to a key or a key prefix: send, flush, cancel),
 * or a function returning (a promise of) one, called again before the token's
 * `exp` and after a `401`; status and timeline take the admin token.
 * `retries`: see `DEFAULTS`.
 */
export function edge({ url, token, retries = DEFAULTS.retries, fetch: fetchImpl } = {}) {
  const mint = typeof token === 'function' ? token : undefined;
  const c = {
    url: text('url', url).replace(/\/+$/, ''),
    token: mint ? undefined : text('token', token),
    mint,
    retries,
    fetch: fetchImpl ?? ((...args) => globalThis.fetch(...args)),
    held: new Map(),
    sending: new Map(),
    keepalive: 0,
    producer: Math.random().toString(36).slice(2, 10) + Date.now().toString(36),
    sent: 0,
    leaving: false,
    backoff: (attempt) => Math.random() * Math.min(DEFAULTS.backoffCapMs, DEFAULTS.backoffMs * 2 ** attempt),
  };
  // The hook holds the client weakly; held sends keep it alive (their timers hold it).
  c.unhook = onHide(true, c, () => {
    c.leaving = true;
    handOverAll(c);
    c.leaving = false;
  });
  return new EdgeClient(c);
}
