// lull-web: debounce, throttle, promise debounce, keyed debounce and a
// search-box binding, driven by lull's Rust engine compiled to WebAssembly.
//
// Import what you use: each export pulls in only its own driver and engine
// (`debounce`/`throttle` share a small one; the rest share the full one),
// and nothing runs at import. The engines are embedded and compile on first
// use: no `init()`, no bundler configuration.

export { debounce, throttle } from './debounce.js';
export { debounceAsync } from './async.js';
export { debounceKeyed } from './keyed.js';
export { bindSearch } from './search.js';
export { init, liveObjects } from './live.js';
// Earlier releases' `import init from 'lull-web'`.
export { init as default } from './live.js';
