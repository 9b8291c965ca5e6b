// lull-web/vue in an app built by Vite, webpack 5 and esbuild with no
// configuration: each composable runs in a real Vue app (render functions:
// no compiler, no plugin).
import { createApp, h, nextTick, ref, watch } from 'vue';
import { useDebouncedAsync, useDebouncedFn, useDebouncedRef, useEdge, useSearch, useThrottledFn } from 'lull-web/vue';

const until = (done) => new Promise((resolve) => (function poll() { done() ? resolve() : setTimeout(poll, 5); })());
const seen = { saved: [], ticks: [], values: [], shouted: [], found: [], sent: [] };
// A fake edge: the client's requests, answered 202 at once.
const fetch = async (url, init) => (seen.sent.push(init.body), new Response('{"window":1,"seq":1}', { status: 202 }));
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
const input = document.getElementById('q');
input.value = 'abc';
input.dispatchEvent(new Event('input', { bubbles: true }));
await until(() => seen.saved.length && seen.shouted.length && seen.found.length && seen.sent.length && seen.values.includes('ab'));
await new Promise((resolve) => setTimeout(resolve, 100)); // anything more would come by now
window.lull = { ...seen, done: true };
