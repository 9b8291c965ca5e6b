// What the React and Vue apps (react.js, vue.js) share: what their hooks or
// composables were seen to do, a fake edge, and the last step of the page,
// which types into the search box and reports once everything came.

/** Resolve once `done()` holds (checked every 5 ms). */
export const until = (done) => new Promise((resolve) => (function poll() { done() ? resolve() : setTimeout(poll, 5); })());

/** What each hook or composable did. */
export const seen = { saved: [], ticks: [], values: [], shouted: [], found: [], sent: [] };

/** A fake edge: the client's requests, answered 202 at once. */
export const fetch = async (url, init) => (seen.sent.push(init.body), new Response('{"window":1,"seq":1}', { status: 202 }));

/** Type into the search box (`#q`), wait for every hook's work, then report it in `window.lull`. */
export async function typeAndReport() {
  const input = document.getElementById('q');
  input.value = 'abc';
  input.dispatchEvent(new Event('input', { bubbles: true }));
  await until(() => seen.saved.length && seen.shouted.length && seen.found.length && seen.sent.length && seen.values.includes('ab'));
  await new Promise((resolve) => setTimeout(resolve, 100)); // anything more would come by now
  window.lull = { ...seen, done: true };
}
