// @vitest-environment node
// Server rendering: react-dom/server's renderToString of a page using every
// hook, in Node with no window and no document. Nothing runs at render: no
// driver is made (no engine held), no timer armed, no request sent.
import { createElement as h } from 'react';
import { renderToString } from 'react-dom/server';
import { expect, test, vi } from 'vitest';
import { liveObjects } from 'lull-web';
import { useDebouncedAsync, useDebouncedCallback, useDebouncedValue, useEdge, useSearch, useThrottledCallback } from 'lull-web/react';

function Page() {
  const save = useDebouncedCallback(() => {}, 500, { flushOnUnmount: true });
  const onScroll = useThrottledCallback(() => {}, 100);
  const [value, controls] = useDebouncedValue('initial', 200);
  const suggest = useDebouncedAsync(async (q) => [q], 200);
  const search = useSearch({ search: async (q) => [q], wait: 'auto', cache: 10 });
  const client = useEdge({ url: 'https://edge.example', token: () => 'minted-on-demand' });
  return h(
    'main',
    null,
    h('input', { ref: search.ref, defaultValue: '' }),
    h('p', null, `value=${value} pending=${controls.pending()} save=${save.pending()} scroll=${onScroll.pending()}`),
    h('p', null, `data=${suggest.data} pending=${suggest.pending} results=${search.results} query="${search.query}" held=${client.pending()}`),
  );
}

test('renderToString with no DOM: the initial state, and nothing made, armed or sent', () => {
  expect([typeof window, typeof document]).toEqual(['undefined', 'undefined']);
  const timers = vi.spyOn(globalThis, 'setTimeout');
  const fetch = vi.spyOn(globalThis, 'fetch');
  const html = renderToString(h(Page));
  expect(html).toContain('value=initial pending=false save=false scroll=false');
  expect(html).toContain('data=undefined pending=false results=undefined query=&quot;&quot; held=false');
  expect(timers).not.toHaveBeenCalled();
  expect(fetch).not.toHaveBeenCalled();
  expect(liveObjects()).toBe(0);
});
