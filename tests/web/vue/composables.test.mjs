// lull-web/vue's composables in jsdom under fake timers, in components
// mounted with @vue/test-utils: the latest function (no stale closure),
// disposal of the effect scope with pending calls (cancelled, or flushed when
// asked), a change of settings (refs, getters), useDebouncedRef's controls,
// useDebouncedAsync's refs and aborts, useSearch over an input (IME, Enter,
// Escape, cache, stale requests), useEdge over a fake fetch, and the clear
// errors on bad input.
import { mount } from '@vue/test-utils';
import { computed, defineComponent, effectScope, h, nextTick, ref, shallowRef, toRef } from 'vue';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { useDebouncedAsync, useDebouncedFn, useDebouncedRef, useEdge, useSearch, useThrottledFn } from 'lull-web/vue';
import { withSetup } from './lockstep.mjs';
import { edgeServer } from '../edge-fake.mjs';

beforeEach(() => vi.useFakeTimers({ now: 0 }));
afterEach(() => vi.useRealTimers());

const advance = (ms) => vi.advanceTimersByTime(ms);
/** Let promises settle, then Vue's queued jobs run. */
async function settle() {
  for (let i = 0; i < 20; i++) await Promise.resolve();
  await nextTick();
}
/** A promise and its resolvers. */
function deferred() {
  let resolve, reject;
  const promise = new Promise((ok, fail) => ((resolve = ok), (reject = fail)));
  return { promise, resolve, reject };
}
/** `make` with Vue's warnings about a component whose setup threw kept quiet while what it made runs. */
const quietly = (make) => (...args) => {
  const made = make(...args);
  return () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      return made();
    } finally {
      warn.mockRestore();
    }
  };
};
/** What `setup()` returned, from a component mounted to run it (and the wrapper, to unmount). */
function setup(fn) {
  let result;
  const wrapper = withSetup(() => (result = fn()));
  return { result, wrapper };
}

describe('useDebouncedFn / useThrottledFn', () => {
  test('calls the latest function given as a ref: no stale closure of a prop', async () => {
    const seen = [];
    const Saver = defineComponent({
      props: { onSave: Function },
      setup(props, { expose }) {
        // `props.onSave` alone would be the first one given; the ref reads the latest.
        const save = useDebouncedFn(toRef(() => props.onSave), 100);
        expose({ save });
        return () => null;
      },
    });
    const wrapper = mount(Saver, { props: { onSave: (x) => seen.push(['v1', x]) } });
    wrapper.vm.save(1);
    await wrapper.setProps({ onSave: (x) => seen.push(['v2', x]) });
    advance(100);
    expect(seen).toEqual([['v2', 1]]);
  });

  test('a plain function reads reactive state as it is when it runs', () => {
    const seen = [];
    const count = ref(0);
    const { result: report } = setup(() => useDebouncedFn(() => seen.push(count.value), 100));
    for (let i = 0; i < 3; i++) {
      count.value++;
      report();
    }
    advance(100);
    expect(seen).toEqual([3]);
  });

  test('passes `this`, the last arguments, and returns the last result', () => {
    const { result: run } = setup(() => useDebouncedFn(function (x) { return [this?.name, x]; }, 10, { leading: true }));
    const owner = { name: 'o', run };
    expect(owner.run(1)).toEqual(['o', 1]);
    owner.run(2);
    advance(10);
    expect(owner.run.flush()).toEqual(['o', 2]);
  });

  test('flush(), cancel() and pending()', () => {
    const runs = [];
    const { result: d } = setup(() => useDebouncedFn((x) => runs.push(x), 100));
    expect(d.pending()).toBe(false);
    d(1);
    expect(d.pending()).toBe(true);
    d.cancel();
    expect(d.pending()).toBe(false);
    advance(200);
    expect(runs).toEqual([]);
    d(2);
    d.flush();
    expect(runs).toEqual([2]);
    expect(d.pending()).toBe(false);
  });

  test('nothing is made until the first call (no engine held, no timer armed)', async () => {
    const { liveObjects } = await import('lull-web');
    const before = liveObjects();
    const { result: d } = setup(() => useDebouncedFn(() => {}, 100));
    expect([liveObjects(), vi.getTimerCount()]).toEqual([before, 0]);
    d();
    expect([liveObjects(), vi.getTimerCount()]).toEqual([before + 1, 1]);
  });

  test('unmount cancels a pending call; later calls are ignored', () => {
    const runs = [];
    const { result: save, wrapper } = setup(() => useDebouncedFn((x) => runs.push(x), 100));
    save(1);
    wrapper.unmount();
    expect(save.pending()).toBe(false);
    save(2);
    advance(500);
    expect(runs).toEqual([]);
  });

  test('unmount with flushOnUnmount runs the pending call with its last arguments, once', () => {
    const runs = [];
    const { result: tick, wrapper } = setup(() => useThrottledFn((x) => runs.push([Date.now(), x]), 100, { flushOnUnmount: true }));
    tick(1); // leading
    advance(10);
    tick(2);
    tick(3);
    wrapper.unmount();
    expect(runs).toEqual([[0, 1], [10, 3]]);
    advance(500);
    expect(runs).toHaveLength(2);
  });

  test('an effect scope of its own: stopping it cancels (or flushes) like an unmount', () => {
    const runs = [];
    const scope = effectScope();
    const [dropped, flushed] = scope.run(() => [
      useDebouncedFn((x) => runs.push(['dropped', x]), 100),
      useDebouncedFn((x) => runs.push(['flushed', x]), 100, { flushOnUnmount: true }),
    ]);
    dropped(1);
    flushed(2);
    scope.stop();
    advance(500);
    expect(runs).toEqual([['flushed', 2]]);
  });

  test('a change of wait (a ref) applies from the next burst: the burst in progress ends under the wait it began with', () => {
    const runs = [];
    const wait = ref(100);
    const { result: d } = setup(() => useDebouncedFn((x) => runs.push([Date.now(), x]), wait));
    d(1);
    wait.value = 20;
    advance(10);
    d(2); // joins the burst that began with wait 100
    advance(200); // runs at 110
    d(3); // a new burst: wait 20
    advance(200);
    wait.value = 50;
    d(4);
    advance(200);
    expect(runs).toEqual([[110, 2], [230, 3], [460, 4]]);
  });

  test('options as a getter, and an option as a ref, read when a burst begins', () => {
    const runs = [];
    const leading = ref(false);
    const props = { maxWait: 150 };
    const { result: d } = setup(() => useDebouncedFn((x) => runs.push([Date.now(), x]), 100, () => ({ leading, maxWait: props.maxWait })));
    for (let t = 0; t < 200; t += 50) {
      d(t);
      advance(50);
    }
    advance(200);
    expect(runs).toEqual([[150, 100], [250, 150]]); // maxWait 150 from the first call, then the quiet period
    leading.value = true;
    d('now');
    expect(runs.at(-1)).toEqual([400, 'now']);
  });

  test('bad input: clear TypeErrors', () => {
    const fails = quietly((f) => () => setup(f));
    expect(fails(() => useDebouncedFn('save', 10))).toThrow(new TypeError('lull: `fn` must be a function'));
    expect(fails(() => useDebouncedFn(ref('save'), 10))).toThrow(new TypeError('lull: `fn` must be a function'));
    expect(fails(() => useDebouncedFn(() => {}, -1))).toThrow(/`wait` must be a number of milliseconds/);
    expect(fails(() => useDebouncedFn(() => {}, ref(NaN)))).toThrow(/`wait` must be a number of milliseconds/);
    expect(fails(() => useThrottledFn(() => {}, 'auto'))).toThrow(/`wait` must be a number of milliseconds from 0 to 9007199254740991$/);
    expect(fails(() => useDebouncedFn(() => {}, 10, 'leading'))).toThrow(new TypeError('lull: options must be an object'));
    // A ref that turns bad is refused when a burst would begin with it.
    const wait = ref(10);
    const { result: d } = setup(() => useDebouncedFn(() => {}, wait));
    wait.value = '10ms';
    expect(() => d()).toThrow(/`wait` must be a number of milliseconds/);
  });
});

describe('useDebouncedRef', () => {
  test('starts with the value; flush, cancel and pending control the next', async () => {
    const text = ref('a');
    const { result: query } = setup(() => useDebouncedRef(text, 100));
    expect(query.value).toBe('a');
    text.value = 'ab';
    await nextTick();
    expect(query.value).toBe('a');
    expect(query.pending()).toBe(true);
    query.flush();
    expect(query.value).toBe('ab');
    text.value = 'abc';
    await nextTick();
    query.cancel();
    advance(200);
    expect(query.value).toBe('ab');
  });

  test('a getter source; the ref is readonly and reactive (a computed follows it)', async () => {
    const state = ref({ text: 'x' });
    const { result: debounced } = setup(() => useDebouncedRef(() => state.value.text, 50));
    const shout = computed(() => debounced.value.toUpperCase());
    state.value = { text: 'xy' };
    await nextTick();
    advance(50);
    expect(shout.value).toBe('XY');
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    debounced.value = 'written';
    expect(debounced.value).toBe('xy');
    warn.mockRestore();
  });

  test('a function value is kept as it is', async () => {
    const f = () => 'called';
    const g = () => 'called too';
    const source = shallowRef(f);
    const { result: debounced } = setup(() => useDebouncedRef(source, 10));
    source.value = g;
    await nextTick();
    advance(10);
    expect(debounced.value).toBe(g);
  });

  test('unmount drops the pending value (flushOnUnmount: takes it)', async () => {
    const source = ref(1);
    const a = setup(() => useDebouncedRef(source, 100));
    const b = setup(() => useDebouncedRef(source, 100, { flushOnUnmount: true }));
    source.value = 2;
    await nextTick();
    a.wrapper.unmount();
    b.wrapper.unmount();
    advance(200);
    expect([a.result.value, b.result.value]).toEqual([1, 2]);
  });
});

describe('useDebouncedAsync', () => {
  test('data, error and pending follow the newest window; a superseded run is aborted and never shown', async () => {
    const requests = [];
    const { result: s } = setup(() =>
      useDebouncedAsync((q, signal) => {
        const d = deferred();
        requests.push({ q, signal, ...d });
        return d.promise;
      }, 50),
    );
    expect([s.data.value, s.error.value, s.pending.value]).toEqual([undefined, undefined, false]);
    const first = s.run('a');
    first.catch(() => {});
    expect(s.pending.value).toBe(true);
    advance(50); // 'a' runs
    s.run('ab').catch(() => {});
    advance(50); // 'ab' runs, superseding 'a'
    expect(requests.map((r) => [r.q, r.signal.aborted])).toEqual([['a', true], ['ab', false]]);
    await expect(first).rejects.toMatchObject({ name: 'AbortError' });
    await settle();
    expect([s.data.value, s.error.value, s.pending.value]).toEqual([undefined, undefined, true]);
    requests[1].resolve('AB');
    requests[0].resolve('A (late)'); // the stale answer arrives last: never shown
    await settle();
    expect([s.data.value, s.error.value, s.pending.value]).toEqual(['AB', undefined, false]);
  });

  test('a failure is `error`; the next result clears it', async () => {
    const { result: s } = setup(() => useDebouncedAsync(async (x) => {
      if (x === 'bad') throw new Error('no');
      return x;
    }, 10));
    s.run('bad').catch(() => {});
    advance(10);
    await settle();
    expect(s.error.value).toEqual(new Error('no'));
    expect(s.pending.value).toBe(false);
    s.run('good');
    advance(10);
    await settle();
    expect([s.data.value, s.error.value]).toEqual(['good', undefined]);
  });

  test('calls the latest function given as a ref, and cancel() rejects the waiting callers', async () => {
    const fn = shallowRef(async (x) => `v1:${x}`);
    const { result: s } = setup(() => useDebouncedAsync(fn, 10));
    let p = s.run(1);
    fn.value = async (x) => `v2:${x}`;
    advance(10);
    await expect(p).resolves.toBe('v2:1');
    p = s.run(2);
    s.cancel();
    await expect(p).rejects.toMatchObject({ name: 'AbortError' });
    await settle();
    expect(s.pending.value).toBe(false);
  });

  test('unmount aborts the run in flight and rejects the waiting callers; later calls reject', async () => {
    let signal;
    const { result: s, wrapper } = setup(() => useDebouncedAsync((x, sig) => ((signal = sig), new Promise(() => {})), 10));
    s.run(1).catch(() => {});
    advance(10);
    const waiting = s.run(2);
    wrapper.unmount();
    expect(signal.aborted).toBe(true);
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
    await expect(s.run(3)).rejects.toMatchObject({ name: 'AbortError' });
  });

  test('unmount with flushOnUnmount runs the window that waits and leaves the run in flight alone', async () => {
    const signals = [];
    const { result: s, wrapper } = setup(() => useDebouncedAsync((x, sig) => (signals.push([x, sig]), Promise.resolve(x)), 100, { flushOnUnmount: true, mode: 'queue' }));
    const saved = s.run('draft');
    wrapper.unmount();
    await expect(saved).resolves.toBe('draft');
    expect(signals.map(([x, sig]) => [x, sig.aborted])).toEqual([['draft', false]]);
  });
});

describe('useSearch', () => {
  /** Once unbound: the one search in flight (`requests`) was aborted, and typing into `element` searches nothing more. */
  function expectUnbound(element, requests) {
    expect(requests[0].signal.aborted).toBe(true);
    element.value = 'abc';
    element.dispatchEvent(new Event('input'));
    advance(500);
    expect(requests).toHaveLength(1);
  }

  /** A search box; `search` records each request and answers when told. */
  function box(options = {}) {
    const requests = [];
    const search = (q, signal) => {
      const d = deferred();
      requests.push({ q, signal, ...d });
      return d.promise;
    };
    const Box = defineComponent({
      setup() {
        const { ref: input, query, results, pending, error } = useSearch({ search, wait: 100, ...options });
        return () =>
          h('div', [
            h('input', { ref: input, 'aria-label': 'q' }),
            h('output', JSON.stringify({ query: query.value, results: results.value, pending: pending.value, error: error.value?.message })),
          ]);
      },
    });
    const wrapper = mount(Box);
    const input = wrapper.find('input');
    const type = (value) => input.setValue(value);
    const shown = () => JSON.parse(wrapper.find('output').text());
    return { requests, input, type, shown, wrapper };
  }

  test('debounced, stale requests aborted, results never out of order', async () => {
    const { requests, type, shown } = box();
    await type('l');
    await type('li');
    expect(shown().pending).toBe(true);
    advance(100);
    await type('lis');
    advance(100);
    expect(requests.map((r) => [r.q, r.signal.aborted])).toEqual([['li', true], ['lis', false]]);
    requests[1].resolve(['Lisbon']);
    requests[0].resolve(['Lima']); // late and stale: never shown
    await settle();
    expect(shown()).toEqual({ query: 'lis', results: ['Lisbon'], pending: false });
  });

  test('IME composition: no search until it ends; Enter searches now; Escape cancels', async () => {
    const { requests, input, type, shown } = box();
    await input.trigger('compositionstart');
    await type('ni');
    await type('nih');
    advance(500);
    expect(requests).toHaveLength(0);
    await input.trigger('compositionend');
    await type('你好');
    await input.trigger('keydown', { key: 'Enter' });
    expect(requests.map((r) => r.q)).toEqual(['你好']);
    await type('你好吗');
    await input.trigger('keydown', { key: 'Escape' });
    advance(500);
    await settle();
    expect(requests.map((r) => r.q)).toEqual(['你好']);
    expect(requests[0].signal.aborted).toBe(true);
    expect(shown().pending).toBe(false);
  });

  test('cache: a repeated query is answered without a request; errors are shown until the next results', async () => {
    const { requests, type, shown } = box({ cache: 5 });
    await type('ab');
    advance(100);
    requests[0].resolve(['AB']);
    await settle();
    await type('abc');
    advance(100);
    requests[1].reject(new Error('down'));
    await settle();
    expect(shown()).toEqual({ query: 'abc', results: ['AB'], pending: false, error: 'down' });
    await type('ab');
    advance(100);
    await settle();
    expect(requests).toHaveLength(2);
    expect(shown()).toEqual({ query: 'ab', results: ['AB'], pending: false });
  });

  test('unmount aborts the request in flight and unbinds', async () => {
    const { requests, type, input, wrapper } = box();
    const element = input.element;
    await type('ab');
    advance(100);
    expect(requests).toHaveLength(1);
    wrapper.unmount();
    expectUnbound(element, requests);
  });

  test('an effect scope of its own, the ref set by hand: stopping the scope aborts the request in flight and unbinds', () => {
    const requests = [];
    const element = document.createElement('input');
    const scope = effectScope();
    scope.run(() => {
      const { ref: input } = useSearch({ search: (q, signal) => (requests.push({ q, signal }), new Promise(() => {})), wait: 100 });
      input.value = element;
    });
    element.value = 'ab';
    element.dispatchEvent(new Event('input'));
    advance(100);
    expect(requests.map((r) => [r.q, r.signal.aborted])).toEqual([['ab', false]]);
    scope.stop();
    expectUnbound(element, requests);
  });

  test('the latest `search` is called; a change of wait (a ref) binds again once idle (at once when it is idle)', async () => {
    const calls = [];
    const tag = ref('v1');
    const wait = ref(100);
    const Box = defineComponent({
      setup() {
        const { ref: input } = useSearch(() => ({ search: (q) => (calls.push([Date.now(), tag.value, q]), []), wait }));
        return () => h('input', { ref: input });
      },
    });
    const wrapper = mount(Box);
    const input = wrapper.find('input');
    await input.setValue('a');
    tag.value = 'v2';
    wait.value = 20;
    await nextTick();
    advance(100); // the query in progress keeps its wait
    await settle();
    await input.setValue('ab');
    advance(20);
    await settle();
    wait.value = 50; // while idle: bound again at once
    await nextTick();
    await input.setValue('abc');
    advance(50);
    expect(calls).toEqual([[100, 'v2', 'a'], [120, 'v2', 'ab'], [170, 'v2', 'abc']]);
  });

  test('bad input: clear TypeErrors', () => {
    const fails = quietly((f) => () => setup(f));
    expect(fails(() => useSearch())).toThrow(new TypeError('lull: options must be an object'));
    expect(fails(() => useSearch({ wait: 10 }))).toThrow(new TypeError('lull: `search` must be a function'));
    expect(fails(() => useSearch({ search: () => [], wait: ref('soon') }))).toThrow(/`wait` must be a number of milliseconds/);
  });
});

describe('useEdge', () => {
  test('sends coalesce in the page; the latest token function is called, again after a 401', async () => {
    const { got, fetch } = edgeServer();
    let mints = 0;
    const prefix = ref('stale');
    // The first token the edge refuses (401); the next is minted by the latest function.
    const options = computed(() => {
      const minted = `${prefix.value}-token-0123456789`; // each function mints its own: only the latest has the fresh one
      return { url: 'https://edge.example', token: () => (mints++ === 0 ? 'expired-token' : minted), fetch };
    });
    const { result: api } = setup(() => useEdge(options));
    prefix.value = 'fresh';
    api.send('docs', 'd1', { v: 1 }, { debounce: 100 });
    const sent = api.send('docs', 'd1', { v: 2 }, { debounce: 100 });
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
    const { result: api, wrapper } = setup(() => useEdge({ url: 'https://edge.example', token: 'ingest-token-0123456789', fetch }));
    void api.send('docs', 'd1', { text: 'unsaved' }, { debounce: 60_000 });
    expect(got).toHaveLength(0);
    wrapper.unmount();
    await vi.waitFor(() => expect(got.map((r) => r.body)).toEqual(['{"text":"unsaved"}']));
  });

  test('bad input: clear TypeErrors', () => {
    const fails = quietly((f) => () => setup(f));
    expect(fails(() => useEdge({ token: 't' }))).toThrow(new TypeError('lull: `url` must be a non-empty string'));
    expect(fails(() => useEdge({ url: 'https://edge.example' }))).toThrow(/`token` must be a string or a function/);
  });
});
