// A search box with lull-web/react's useSearch, built by Vite (production,
// no configuration) and typed into in Chromium by page.mjs. What the page
// showed, and when each key went down, is kept in `window.page` for the test.
import { StrictMode, createElement as h, useEffect } from 'react';
import { createRoot } from 'react-dom/client';
import { useSearch } from 'lull-web/react';

const WAIT_MS = 150; // ../../search-page.mjs judges by it
const page = (window.page = { keys: [], shown: [], errors: [] });
addEventListener('keydown', (event) => page.keys.push([event.key, performance.now()]), true);

function App() {
  const { ref, query, results, pending, error } = useSearch({
    wait: WAIT_MS,
    minLength: 2,
    cache: 10,
    search: (q, signal) => fetch(`/search?q=${encodeURIComponent(q)}`, { signal }).then((r) => r.json()),
  });
  useEffect(() => {
    if (results !== undefined) page.shown.push({ query, results });
    if (error) page.errors.push(String(error));
  }, [query, results, error]);
  return h(
    'main',
    null,
    h('input', { ref, id: 'q', 'aria-label': 'search', autoComplete: 'off' }),
    h('p', { id: 'state' }, pending ? 'searching' : 'idle'),
    h('ul', null, (results ?? []).map((r) => h('li', { key: r }, r))),
  );
}

createRoot(document.getElementById('root')).render(h(StrictMode, null, h(App)));
page.ready = true;
