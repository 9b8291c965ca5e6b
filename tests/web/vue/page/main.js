// A search box with lull-web/vue's useSearch, built by Vite (production, no
// configuration) and typed into in Chromium by page.mjs. What the page
// showed, and when each key went down, is kept in `window.page` for the test.
import { createApp, h, watch } from 'vue';
import { useSearch } from 'lull-web/vue';

const WAIT_MS = 150; // ../../search-page.mjs judges by it
const page = (window.page = { keys: [], shown: [], errors: [] });
addEventListener('keydown', (event) => page.keys.push([event.key, performance.now()]), true);

const App = {
  setup() {
    const { ref: input, query, results, pending, error } = useSearch({
      wait: WAIT_MS,
      minLength: 2,
      cache: 10,
      search: (q, signal) => fetch(`/search?q=${encodeURIComponent(q)}`, { signal }).then((r) => r.json()),
    });
    watch([query, results, error], () => {
      if (results.value !== undefined) page.shown.push({ query: query.value, results: results.value });
      if (error.value) page.errors.push(String(error.value));
    });
    return () =>
      h('main', [
        h('input', { ref: input, id: 'q', 'aria-label': 'search', autocomplete: 'off' }),
        h('p', { id: 'state' }, pending.value ? 'searching' : 'idle'),
        h('ul', (results.value ?? []).map((r) => h('li', { key: r }, r))),
      ]);
  },
};

createApp(App).mount('#app');
page.ready = true;
