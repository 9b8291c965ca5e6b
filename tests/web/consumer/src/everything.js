// Every export of lull-web through webpack 5 and esbuild, with no
// configuration: each driver must run (its engine compiles on first use).
import { bindSearch, debounce, debounceAsync, debounceKeyed, init, liveObjects, throttle } from 'lull-web';

const until = (done) => new Promise((resolve) => (function poll() { done() ? resolve() : setTimeout(poll, 5); })());

await init(); // kept for earlier code: resolves at once
const runs = [];
const save = debounce((x) => runs.push(x), 20);
save(1);
save(2);
throttle((x) => runs.push(`t${x}`), 50)(1);
const shout = debounceAsync(async (s) => s.toUpperCase(), 10);
const shouted = await Promise.all([shout('a'), shout('ab')]);
const keyed = [];
const field = debounceKeyed((key, value) => keyed.push(`${key}${value}`), 10);
field('x', 1);
field('y', 2);
field('x', 3);
const found = [];
const input = document.createElement('input');
document.body.append(input);
const binding = bindSearch(input, { wait: 10, search: async (q) => q.length, onResults: (n, q) => found.push([q, n]) });
input.value = 'abc';
input.dispatchEvent(new Event('input'));
await until(() => !save.pending() && !field.pending() && !binding.pending());
binding.destroy();
window.lull = { runs, shouted, keyed: keyed.sort(), found, live: liveObjects(), done: true };
