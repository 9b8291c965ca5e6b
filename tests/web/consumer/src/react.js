// lull-web/react in an app built by Vite, webpack 5 and esbuild with no
// configuration: each hook runs in a real React root (StrictMode).
import { StrictMode, createElement as h, useEffect } from 'react';
import { createRoot } from 'react-dom/client';
import { useDebouncedAsync, useDebouncedCallback, useDebouncedValue, useEdge, useSearch, useThrottledCallback } from 'lull-web/react';
import { fetch, seen, typeAndReport, until } from './adapter-app.js';


function App({ text }) {
  const save = useDebouncedCallback((x) => seen.saved.push(x), 20);
  const tick = useThrottledCallback((x) => seen.ticks.push(x), 50);
  const [value] = useDebouncedValue(text, 10);
  const shout = useDebouncedAsync(async (s) => s.toUpperCase(), 10);
  const search = useSearch({ wait: 10, search: async (q) => q.length });
  const client = useEdge({ url: 'https://edge.example', token: 'ingest-token-0123456789', fetch });
  useEffect(() => {
    save(1);
    save(2);
    tick(1);
    shout.run('ab').then((s) => seen.shouted.push(s));
    client.send('docs', 'd1', { text: 'hi' }, { debounce: 10 });
  }, [save, tick, shout.run, client]);
  useEffect(() => void seen.values.push(value), [value]);
  useEffect(() => void (search.results !== undefined && seen.found.push([search.query, search.results])), [search.query, search.results]);
  return h('input', { ref: search.ref, id: 'q' });
}

const root = createRoot(document.body.appendChild(document.createElement('div')));
root.render(h(StrictMode, null, h(App, { text: 'a' })));
await until(() => document.getElementById('q'));
root.render(h(StrictMode, null, h(App, { text: 'ab' })));
await typeAndReport();
