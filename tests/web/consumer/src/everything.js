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
// Each call's window depends on when the calls really ran (a busy machine can
// hold the page past a wait between two of them): what must hold either way.
const ok = {
  debounceAsync: shouted[1] === 'AB' && ['A', 'AB'].includes(shouted[0]),
  debounceKeyed: keyed.includes('x3') && keyed.includes('y2') && keyed.every((k) => ['x1', 'x3', 'y2'].includes(k)),
  bindSearch: JSON.stringify(found) === '[["abc",3]]',
  // five drivers, each holding an engine until it is collected (destroy() unbinds; collection frees)
  liveObjects: liveObjects() === 5,
};
window.lull = { runs, ok, done: true };
