// The same package through other bundlers (webpack 5, esbuild), with no
// configuration and no `init()`: a debounce and a throttle that must run.
import { debounce, throttle } from 'lull-web';

const runs = [];
const save = debounce((x) => runs.push(x), 20);
save(1);
save(2);
throttle((x) => runs.push(`t${x}`), 50)(1);
const settled = () => (save.pending() ? setTimeout(settled, 5) : (window.lull = { runs, done: true }));
settled();
