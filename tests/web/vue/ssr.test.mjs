// @vitest-environment node
// Server rendering: Vue's renderToString (@vue/server-renderer) of a page
// using every composable, in Node with no window and no document. Nothing
// runs in setup: no driver is made (no engine held), no timer armed, no
// request sent, and the page renders each composable's initial state.
import { createSSRApp, h, ref } from 'vue';
import { renderToString } from 'vue/server-renderer';
import { expect, test, vi } from 'vitest';
import { liveObjects } from 'lull-web';
import { useDebouncedAsync, useDebouncedFn, useDebouncedRef, useEdge, useSearch, useThrottledFn } from 'lull-web/vue';

const Page = {
  setup() {
    const save = useDebouncedFn(() => {}, 500, { flushOnUnmount: true });
    const onScroll = useThrottledFn(() => {}, 100);
    const text = ref('initial');
    const value = useDebouncedRef(text, 200);
    text.value = 'changed in setup'; // a server render never passes it on
    const suggest = useDebouncedAsync(async (q) => [q], 200);
    const { ref: input, query, results, pending } = useSearch({ search: async (q) => [q], wait: 'auto', cache: 10 });
    const client = useEdge({ url: 'https://edge.example', token: () => 'minted-on-demand' });
    return () =>
      h('main', [
        h('input', { ref: input, value: '' }),
        h('p', `value=${value.value} pending=${value.pending()} save=${save.pending()} scroll=${onScroll.pending()}`),
        h('p', `data=${suggest.data.value} pending=${suggest.pending.value} results=${results.value} query="${query.value}" searching=${pending.value} held=${client.pending()}`),
      ]);
  },
};

test('renderToString with no DOM: the initial state, and nothing made, armed or sent', async () => {
  expect([typeof window, typeof document]).toEqual(['undefined', 'undefined']);
  const timers = vi.spyOn(globalThis, 'setTimeout');
  const fetch = vi.spyOn(globalThis, 'fetch');
  const html = await renderToString(createSSRApp(Page));
  expect(html).toContain('value=initial pending=false save=false scroll=false');
  expect(html).toContain('data=undefined pending=false results=undefined query=&quot;&quot; searching=false held=false');
  await new Promise((resolve) => setImmediate(resolve)); // anything queued by setup would have run
  expect(timers).not.toHaveBeenCalled();
  expect(fetch).not.toHaveBeenCalled();
  expect(liveObjects()).toBe(0);
});
