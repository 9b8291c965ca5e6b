// lull-web/bundler (wasm-bindgen's output for bundlers with WebAssembly ES
// module integration) through webpack 5: a debounce and a throttle that must run.
import { debounce, throttle } from 'lull-web/bundler';

const runs = [];
const save = debounce((x) => runs.push(x), 20);
save(1);
save(2);
throttle((x) => runs.push(`t${x}`), 50)(1);
const settled = () => (save.pending() ? setTimeout(settled, 5) : (window.lull = { runs, done: true }));
settled();
