// lull-web/vue's useSearch in a real page (page/: a Vue app, render
// functions, no compiler or plugin), typed into in Chromium by the adapters'
// shared harness (../search-page.mjs).
// usage: node page.mjs <scratch dir>
import { searchPage } from '../search-page.mjs';

await searchPage('vue', new URL('.', import.meta.url).pathname, process.argv[2]);
