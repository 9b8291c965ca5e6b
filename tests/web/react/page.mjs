// lull-web/react's useSearch in a real page (page/: React, StrictMode),
// typed into in Chromium by the adapters' shared harness (../search-page.mjs).
// usage: node page.mjs <scratch dir>
import { searchPage } from '../search-page.mjs';

await searchPage('react', new URL('.', import.meta.url).pathname, process.argv[2]);
