// lull-web/vue in an app built by Vite, webpack 5 and esbuild with no
// configuration: each composable runs in a real Vue app (render functions:
// no compiler, no plugin).
import { createApp, h, nextTick, ref, watch } from 'vue';
import { useDebouncedAsync, useDebouncedFn, useDebouncedRef, useEdge, useSearch, useThrottledFn } from 'lull-web/vue';
import { fetch, seen, typeAndReport } from './adapter-app.js';

const text = ref('a');

const App = {
  setup() {
    const save = useDebouncedFn((x) => seen.saved.push(x), 20);
    const tick = useThrottledFn((x) => seen.ticks.push(x), 50);
    const value = useDebouncedRef(text, 10);
    const shout = useDebouncedAsync(async (s) => s.toUpperCase(), 10);
    const { ref: input, query, results } = useSearch({ wait: 10, search: async (q) => q.length });
    const client = useEdge({ url: 'https://edge.example', token: 'ingest-token-0123456789', fetch });
    save(1);
    save(2);
    tick(1);
    shout.run('ab').then((s) => seen.shouted.push(s));
    client.send('docs', 'd1', { text: 'hi' }, { debounce: 10 });
    watch(value, (v) => seen.values.push(v), { immediate: true });
    watch(results, (r) => r !== undefined && seen.found.push([query.value, r]));
    return () => h('input', { ref: input, id: 'q' });
  },
};

createApp(App).mount(document.body.appendChild(document.createElement('div')));
await nextTick();
text.value = 'ab';
await typeAndReport();
