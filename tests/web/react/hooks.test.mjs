// lull-web/react's hooks in jsdom under fake timers: identity, the latest
// function (no stale closure), StrictMode, unmount, a change of settings,
// useDebouncedValue's controls, useDebouncedAsync's state and aborts,
// useSearch over an input (IME, Enter, Escape, cache, stale requests),
// useEdge over a fake fetch, and the clear errors on bad input.
import { act, cleanup, fireEvent, render, renderHook, screen } from '@testing-library/react';
import { StrictMode, createElement as h, useEffect, useState, version } from 'react';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { liveObjects } from 'lull-web';
import { useDebouncedAsync, useDebouncedCallback, useDebouncedValue, useEdge, useSearch, useThrottledCallback } from 'lull-web/react';
import { useDebouncedCallback as udDebounced } from 'use-debounce';
import { edgeServer } from '../edge-fake.mjs';

beforeEach(() => vi.useFakeTimers({ now: 0 }));
afterEach(() => {
  cleanup();
  vi.useRealTimers();
});

const advance = (ms) => act(() => vi.advanceTimersByTime(ms));
/** Let promises settle (and the microtask that decides an unmount run). */
const settle = () => act(async () => {});
/** A promise and its resolvers. */
function deferred() {
  let resolve, reject;
  const promise = new Promise((ok, fail) => ((resolve = ok), (reject = fail)));
  return { promise, resolve, reject };
}

describe('useDebouncedCallback / useThrottledCallback', () => {
  test('keeps its identity across renders, with options written inline', () => {
    const { result, rerender } = renderHook(({ n }) => useDebouncedCallback(() => n, 50, { maxWait: 200 }), { initialProps: { n: 1 } });
    const first = result.current;
    rerender({ n: 2 });
    rerender({ n: 3 });
    expect(result.current).toBe(first);
  });

  test('calls the latest function: no stale closure', () => {
    const seen = [];
    function Counter() {
      const [count, setCount] = useState(0);
      const report = useDebouncedCallback(() => seen.push(count), 100);
      return h('button', { onClick: () => (setCount((c) => c + 1), report()) }, String(count));
    }
    render(h(Counter));
    for (let i = 0; i < 3; i++) fireEvent.click(screen.getByRole('button'));
    advance(100);
    // The call was made while count was 2; the run reads the render after it: 3.
    expect(seen).toEqual([3]);
  });

  test('passes `this`, the last arguments, and returns the last result', () => {
    const { result } = renderHook(() => useDebouncedCallback(function (x) { return [this?.name, x]; }, 10, { leading: true }));
    const owner = { name: 'o', run: result.current };
    let returned;
    act(() => (returned = owner.run(1)));
    expect(returned).toEqual(['o', 1]);
    act(() => owner.run(2));
    advance(10);
    act(() => (returned = owner.run.flush()));
    expect(returned).toEqual(['o', 2]);
  });

  test('flush(), cancel() and pending()', () => {
    const runs = [];
    const { result } = renderHook(() => useDebouncedCallback((x) => runs.push(x), 100));
    expect(result.current.pending()).toBe(false);
    act(() => result.current(1));
    expect(result.current.pending()).toBe(true);
    act(() => result.current.cancel());
    expect(result.current.pending()).toBe(false);
    advance(200);
    expect(runs).toEqual([]);
    act(() => result.current(2));
    act(() => result.current.flush());
    expect(runs).toEqual([2]);
    expect(result.current.pending()).toBe(false);
  });

  test('the tests run on the React the suite asked for (18 and 19 are both peers)', () => {
    expect(version.split('.')[0]).toBe(process.env.LULL_REACT);
  });

  test('StrictMode: one debouncer, one run, and the double effects cancel nothing', async () => {
    const runs = [];
    const identities = new Set();
    const committed = new Set();
    function Saver() {
      const save = useDebouncedCallback((x) => runs.push([Date.now(), x]), 100);
      identities.add(save);
      useEffect(() => {
        committed.add(save);
        save('mounted');
      }, [save]);
      return null;
    }
    render(h(StrictMode, null, h(Saver)));
    await settle();
    advance(100);
    expect(runs).toEqual([[100, 'mounted']]);
    // The double effects see one debouncer.
    expect(committed.size).toBe(1);
    // StrictMode renders twice. React 19 keeps the first render's state, so one
    // identity is ever returned; React 18 throws the first render away, state
    // and all, so that render made one of its own, never committed (a
    // controller only: a driver is made on first call, and it was never called).
    expect(identities.size).toBe(version.startsWith('18.') ? 2 : 1);
  });

  test('unmount cancels a pending call; later calls are ignored', async () => {
    const runs = [];
    const { result, unmount } = renderHook(() => useDebouncedCallback((x) => runs.push(x), 100));
    const save = result.current;
    act(() => save(1));
    unmount();
    await settle();
    expect(save.pending()).toBe(false);
    act(() => save(2));
    advance(500);
    expect(runs).toEqual([]);
  });

  test('unmount cancels a pending call at once: a clock advanced before the unmount is decided runs nothing (as use-debounce)', async () => {
    const runs = { lull: [], ud: [] };
    const { result, unmount } = renderHook(() => ({
      lull: useDebouncedCallback((x) => runs.lull.push(x), 100),
      ud: udDebounced((x) => runs.ud.push(x), 100),
    }));
    act(() => {
      result.current.lull(1);
      result.current.ud(1);
    });
    advance(20);
    unmount();
    vi.advanceTimersByTime(80); // the timer is due before the microtask that decides the unmount
    await settle();
    vi.advanceTimersByTime(500);
    expect(runs).toEqual({ lull: [], ud: [] });
  });

  test('StrictMode: a call made while mounting runs once, after its wait (the simulated unmount holds and drops nothing)', async () => {
    const runs = [];
    function Editor() {
      const save = useDebouncedCallback((x) => runs.push([Date.now(), x]), 30);
      useEffect(() => void save('a'), [save]);
      return null;
    }
    render(h(StrictMode, null, h(Editor)));
    await settle();
    advance(30);
    advance(100);
    expect(runs).toEqual([[30, 'a']]);
  });

  test('unmount with flushOnUnmount runs a pending call once, even when its timer is due before the decision', async () => {
    const runs = [];
    const { result, unmount } = renderHook(() => useDebouncedCallback((x) => runs.push([Date.now(), x]), 100, { flushOnUnmount: true }));
    act(() => result.current(1));
    unmount();
    vi.advanceTimersByTime(100); // due: held until the decision
    expect(runs).toEqual([]);
    await settle();
    expect(runs).toEqual([[100, 1]]);
    vi.advanceTimersByTime(500);
    expect(runs).toHaveLength(1);
  });

  test('unmount with flushOnUnmount runs the pending call with its last arguments, once', async () => {
    const runs = [];
    const { result, unmount } = renderHook(() => useThrottledCallback((x) => runs.push([Date.now(), x]), 100, { flushOnUnmount: true }));
    act(() => result.current(1)); // leading
    advance(10);
    act(() => result.current(2));
    act(() => result.current(3));
    unmount();
    await settle();
    expect(runs).toEqual([[0, 1], [10, 3]]);
    advance(500);
    expect(runs).toHaveLength(2);
  });

  test('a change of wait applies from the next burst: the burst in progress ends under the wait it began with', () => {
    const runs = [];
    const { result, rerender } = renderHook(({ wait }) => useDebouncedCallback((x) => runs.push([Date.now(), x]), wait), { initialProps: { wait: 100 } });
    act(() => result.current(1));
    rerender({ wait: 20 });
    advance(10);
    act(() => result.current(2)); // joins the burst that began with wait 100
    advance(200); // runs at 110
    act(() => result.current(3)); // a new burst: wait 20
    advance(200);
    rerender({ wait: 50 });
    act(() => result.current(4));
    advance(200);
    expect(runs).toEqual([[110, 2], [230, 3], [460, 4]]);
  });

  test('bad input: clear TypeErrors', () => {
    const quiet = vi.spyOn(console, 'error').mockImplementation(() => {});
    expect(() => renderHook(() => useDebouncedCallback('save', 10))).toThrow(new TypeError('lull: `fn` must be a function'));
    expect(() => renderHook(() => useDebouncedCallback(() => {}, -1))).toThrow(/`wait` must be a number of milliseconds/);
    expect(() => renderHook(() => useDebouncedCallback(() => {}, NaN))).toThrow(/`wait` must be a number of milliseconds/);
    expect(() => renderHook(() => useDebouncedCallback(() => {}, 10, 'leading'))).toThrow(new TypeError('lull: options must be an object'));
    quiet.mockRestore();
  });
});

describe('useDebouncedValue', () => {
  test('the first render returns the value; flush, cancel and pending control the next', () => {
    const { result, rerender } = renderHook(({ v }) => useDebouncedValue(v, 100), { initialProps: { v: 'a' } });
    expect(result.current[0]).toBe('a');
    const controls = result.current[1];
    rerender({ v: 'ab' });
    expect(result.current[0]).toBe('a');
    expect(controls.pending()).toBe(true);
    act(() => controls.flush());
    expect(result.current[0]).toBe('ab');
    rerender({ v: 'abc' });
    act(() => controls.cancel());
    advance(200);
    expect(result.current[0]).toBe('ab');
    expect(result.current[1]).toBe(controls);
  });

  test('a function value is kept as it is, not called as a state updater', () => {
    const f = () => 'called';
    const g = () => 'called too';
    const { result, rerender } = renderHook(({ v }) => useDebouncedValue(v, 10), { initialProps: { v: f } });
    rerender({ v: g });
    advance(10);
    expect(result.current[0]).toBe(g);
  });
});

describe('useDebouncedAsync', () => {
  test('data, error and pending follow the newest window; a superseded run is aborted and never shown', async () => {
    const requests = [];
    const { result } = renderHook(() =>
      useDebouncedAsync((q, signal) => {
        const d = deferred();
        requests.push({ q, signal, ...d });
        return d.promise;
      }, 50),
    );
    expect([result.current.data, result.current.error, result.current.pending]).toEqual([undefined, undefined, false]);
    let first;
    act(() => {
      first = result.current.run('a');
      first.catch(() => {});
    });
    expect(result.current.pending).toBe(true);
    advance(50); // 'a' runs
    act(() => void result.current.run('ab').catch(() => {}));
    advance(50); // 'ab' runs, superseding 'a'
    expect(requests.map((r) => [r.q, r.signal.aborted])).toEqual([['a', true], ['ab', false]]);
    await expect(first).rejects.toMatchObject({ name: 'AbortError' });
    await settle();
    // A superseded run is no failure: nothing to show yet, still pending.
    expect([result.current.data, result.current.error, result.current.pending]).toEqual([undefined, undefined, true]);
    requests[1].resolve('AB');
    requests[0].resolve('A (late)'); // the stale answer arrives last: never shown
    await settle();
    expect([result.current.data, result.current.error, result.current.pending]).toEqual(['AB', undefined, false]);
  });

  test('a failure is `error`; the next result clears it', async () => {
    const { result } = renderHook(() => useDebouncedAsync(async (x) => {
      if (x === 'bad') throw new Error('no');
      return x;
    }, 10));
    act(() => void result.current.run('bad').catch(() => {}));
    advance(10);
    await settle();
    expect(result.current.error).toEqual(new Error('no'));
    expect(result.current.pending).toBe(false);
    act(() => void result.current.run('good'));
    advance(10);
    await settle();
    expect([result.current.data, result.current.error]).toEqual(['good', undefined]);
  });

  test('calls the latest function, and cancel() rejects the waiting callers', async () => {
    const { result, rerender } = renderHook(({ tag }) => useDebouncedAsync(async (x) => `${tag}:${x}`, 10), { initialProps: { tag: 'v1' } });
    let p;
    act(() => {
      p = result.current.run(1);
    });
    rerender({ tag: 'v2' });
    advance(10);
    await expect(p).resolves.toBe('v2:1');
    rerender({ tag: 'v3' });
    act(() => {
      p = result.current.run(1);
    });
    advance(10);
    await expect(p).resolves.toBe('v3:1');
    act(() => {
      p = result.current.run(2);
    });
    act(() => result.current.cancel());
    await expect(p).rejects.toMatchObject({ name: 'AbortError' });
    await settle();
    expect(result.current.pending).toBe(false);
  });

  test('unmount aborts the run in flight and rejects the waiting callers; later calls reject', async () => {
    let signal;
    const { result, unmount } = renderHook(() => useDebouncedAsync((x, s) => ((signal = s), new Promise(() => {})), 10));
    const run = result.current.run;
    act(() => void run(1).catch(() => {}));
    advance(10);
    let waiting;
    act(() => {
      waiting = run(2);
    });
    unmount();
    await settle();
    expect(signal.aborted).toBe(true);
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
    await expect(run(3)).rejects.toMatchObject({ name: 'AbortError' });
  });

  test('unmount rejects a waiting call at once: a run due before the unmount is decided never starts', async () => {
    const started = [];
    const { result, unmount } = renderHook(() => useDebouncedAsync((x) => (started.push(x), Promise.resolve(x)), 50));
    let waiting;
    act(() => {
      waiting = result.current.run(1);
      waiting.catch(() => {});
    });
    unmount();
    vi.advanceTimersByTime(50); // due before the microtask that decides the unmount
    await settle();
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
    expect(started).toEqual([]);
  });

  test('StrictMode: the double effects abort nothing (a leading run in flight at the simulated unmount goes on)', async () => {
    const signals = [];
    function Search() {
      // leading: the run starts in the first effect, before StrictMode's simulated unmount; queue: none supersedes another
      const { run, data } = useDebouncedAsync((q, s) => (signals.push(s), Promise.resolve(q.toUpperCase())), 10, { leading: true, mode: 'queue' });
      useEffect(() => void run('x'), [run]);
      return h('p', null, data ?? '-');
    }
    render(h(StrictMode, null, h(Search)));
    await settle();
    advance(10);
    await settle();
    expect(signals.length).toBeGreaterThan(0);
    expect(signals.map((s) => s.aborted)).toEqual(signals.map(() => false));
    expect(screen.getByText('X')).toBeTruthy();
  });
});

describe('useSearch', () => {
  /** A search box; `search` records each request and answers when told. */
  function setup(options = {}, strict = false) {
    const requests = [];
    const search = (q, signal) => {
      const d = deferred();
      requests.push({ q, signal, ...d });
      return d.promise;
    };
    function Box() {
      const { ref, query, results, pending, error } = useSearch({ search, wait: 100, ...options });
      return h('div', null, h('input', { ref, 'aria-label': 'q' }), h('output', null, JSON.stringify({ query, results, pending, error: error?.message })));
    }
    const view = render(strict ? h(StrictMode, null, h(Box)) : h(Box));
    const input = screen.getByLabelText('q');
    const type = (value) => fireEvent.input(input, { target: { value } });
    const shown = () => JSON.parse(screen.getByRole('status').textContent);
    return { requests, input, type, shown, view };
  }

  test('debounced, stale requests aborted, results never out of order', async () => {
    const { requests, type, shown } = setup();
    type('l');
    type('li');
    expect(shown().pending).toBe(true);
    advance(100);
    type('lis');
    advance(100);
    expect(requests.map((r) => [r.q, r.signal.aborted])).toEqual([['li', true], ['lis', false]]);
    requests[1].resolve(['Lisbon']);
    requests[0].resolve(['Lima']); // late and stale: never shown
    await settle();
    expect(shown()).toEqual({ query: 'lis', results: ['Lisbon'], pending: false });
  });

  test('IME composition: no search until it ends; Enter searches now; Escape cancels', async () => {
    const { requests, input, type, shown } = setup();
    fireEvent.compositionStart(input);
    type('ni');
    type('nih');
    advance(500);
    expect(requests).toHaveLength(0);
    fireEvent.compositionEnd(input);
    type('你好'); // (jsdom: the composed text arrives as an input event)
    fireEvent.keyDown(input, { key: 'Enter' });
    expect(requests.map((r) => r.q)).toEqual(['你好']);
    type('你好吗');
    fireEvent.keyDown(input, { key: 'Escape' });
    advance(500);
    expect(requests.map((r) => r.q)).toEqual(['你好']);
    expect(requests[0].signal.aborted).toBe(true);
    expect(shown().pending).toBe(false);
  });

  test('cache: a repeated query is answered without a request; errors are shown until the next results', async () => {
    const { requests, type, shown } = setup({ cache: 5 });
    type('ab');
    advance(100);
    requests[0].resolve(['AB']);
    await settle();
    type('abc');
    advance(100);
    requests[1].reject(new Error('down'));
    await settle();
    expect(shown()).toEqual({ query: 'abc', results: ['AB'], pending: false, error: 'down' });
    type('ab');
    advance(100);
    expect(requests).toHaveLength(2);
    expect(shown()).toEqual({ query: 'ab', results: ['AB'], pending: false });
  });

  test('unmount aborts the request in flight and unbinds (StrictMode too)', async () => {
    const before = liveObjects();
    const { requests, type, view } = setup({}, true);
    type('ab');
    advance(100);
    expect(requests).toHaveLength(1); // StrictMode's double ref left one binding
    view.unmount();
    expect(requests[0].signal.aborted).toBe(true);
    expect(liveObjects()).toBeGreaterThanOrEqual(before);
  });

  test('the latest `search` is called; a change of wait binds again once idle', async () => {
    const calls = [];
    function Box({ tag, wait }) {
      const { ref } = useSearch({ search: (q) => (calls.push([Date.now(), tag, q]), []), wait });
      return h('input', { ref, 'aria-label': 'q' });
    }
    const view = render(h(Box, { tag: 'v1', wait: 100 }));
    const input = screen.getByLabelText('q');
    fireEvent.input(input, { target: { value: 'a' } });
    view.rerender(h(Box, { tag: 'v2', wait: 20 }));
    advance(100);
    await settle();
    fireEvent.input(input, { target: { value: 'ab' } });
    advance(20);
    expect(calls).toEqual([[100, 'v2', 'a'], [120, 'v2', 'ab']]);
  });

  test('bad input: clear TypeErrors', () => {
    const quiet = vi.spyOn(console, 'error').mockImplementation(() => {});
    expect(() => renderHook(() => useSearch())).toThrow(new TypeError('lull: options must be an object'));
    expect(() => renderHook(() => useSearch({ wait: 10 }))).toThrow(new TypeError('lull: `search` must be a function'));
    expect(() => renderHook(() => useSearch({ search: () => [], wait: 'soon' }))).toThrow(/`wait` must be a number of milliseconds/);
    quiet.mockRestore();
  });
});

describe('useEdge', () => {
  test('keeps its identity; sends coalesce in the page; the latest token function is called, again after a 401', async () => {
    const { got, fetch } = edgeServer();
    let mints = 0;
    // The first token the edge refuses (401); the next is minted by the function of the latest render.
    const token = (prefix) => () => (mints++ === 0 ? 'expired-token' : `${prefix}-token-0123456789`);
    const { result, rerender } = renderHook(({ prefix }) => useEdge({ url: 'https://edge.example', token: token(prefix), fetch }), {
      initialProps: { prefix: 'stale' },
    });
    const api = result.current;
    rerender({ prefix: 'fresh' });
    expect(result.current).toBe(api);
    let sent;
    act(() => {
      api.send('docs', 'd1', { v: 1 }, { debounce: 100 });
      sent = api.send('docs', 'd1', { v: 2 }, { debounce: 100 });
    });
    expect(api.pending('docs', 'd1')).toBe(true);
    advance(100);
    await vi.waitFor(async () => expect(await sent).toMatchObject({ window: 1, count: 2 }));
    expect(got.map((r) => [r.auth, r.body])).toEqual([
      ['Bearer expired-token', '{"v":2}'],
      ['Bearer fresh-token-0123456789', '{"v":2}'],
    ]);
  });

  test('unmount hands over what the page holds', async () => {
    const { got, fetch } = edgeServer();
    const { result, unmount } = renderHook(() => useEdge({ url: 'https://edge.example', token: 'ingest-token-0123456789', fetch }));
    act(() => void result.current.send('docs', 'd1', { text: 'unsaved' }, { debounce: 60_000 }));
    expect(got).toHaveLength(0);
    unmount();
    await settle();
    await vi.waitFor(() => expect(got.map((r) => r.body)).toEqual(['{"text":"unsaved"}']));
  });

  test('bad input: clear TypeErrors', () => {
    const quiet = vi.spyOn(console, 'error').mockImplementation(() => {});
    expect(() => renderHook(() => useEdge({ token: 't' }))).toThrow(new TypeError('lull: `url` must be a non-empty string'));
    expect(() => renderHook(() => useEdge({ url: 'https://edge.example' }))).toThrow(/`token` must be a string or a function/);
    quiet.mockRestore();
  });
});
