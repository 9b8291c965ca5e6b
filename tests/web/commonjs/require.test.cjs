// require() of every entry of the built package (installed in node_modules/lull-web
// by the suite), run by Node 20 and Node 22 with `--no-experimental-require-module`:
// the package's `require` condition must be real CommonJS, not an ES module
// that only a newer Node could require. And one instance: `import` of the
// same entry in Node gives the very same functions and classes.
const assert = require('node:assert/strict');
const { test } = require('node:test');

const ENTRIES = {
  'lull-web': ['bindSearch', 'debounce', 'debounceAsync', 'debounceKeyed', 'default', 'init', 'liveObjects', 'throttle'],
  'lull-web/edge': ['EdgeError', 'edge'],
  'lull-web/react': ['useDebouncedAsync', 'useDebouncedCallback', 'useDebouncedValue', 'useEdge', 'useSearch', 'useThrottledCallback'],
  'lull-web/vue': ['useDebouncedAsync', 'useDebouncedFn', 'useDebouncedRef', 'useEdge', 'useSearch', 'useThrottledFn'],
};

for (const [entry, names] of Object.entries(ENTRIES)) {
  test(`require('${entry}'): the CommonJS build, with every export`, () => {
    assert.match(require.resolve(entry), /node_modules\/lull-web\/cjs\/[a-z]+\.js$/);
    const loaded = require(entry);
    assert.deepEqual(Object.keys(loaded).sort(), names);
    for (const name of names) assert.ok(loaded[name] !== undefined, `${entry}: ${name}`);
  });

  test(`import('${entry}') in Node is the same instance as require('${entry}')`, async () => {
    const imported = await import(entry);
    const required = require(entry);
    assert.deepEqual(Object.keys(imported).sort(), names);
    for (const name of names) assert.equal(imported[name], required[name], `${entry}: ${name}`);
  });
}

test('lull-web/edge shares lull-web\'s engine: one debounce module, one live count', () => {
  const { liveObjects, debounce } = require('lull-web');
  const { edge } = require('lull-web/edge');
  const before = liveObjects();
  const client = edge({ url: 'http://127.0.0.1:9', token: 'a-token-of-sixteen+', fetch: () => new Promise(() => {}) });
  void client.send('t', 'k', 1, { debounce: 60_000 }).catch(() => {});
  // The client's debouncer holds an engine of the same instance that liveObjects() counts.
  assert.equal(liveObjects(), before + 1);
  void client.cancel('t', 'k').catch(() => {});
  assert.equal(typeof debounce, 'function');
});

test('lull-web/react renders with the React that requires it: a hook on the server', () => {
  const { createElement } = require('react');
  const { renderToString } = require('react-dom/server');
  const { useDebouncedValue } = require('lull-web/react');
  const Echo = () => createElement('p', null, useDebouncedValue('hello', 100)[0]);
  assert.equal(renderToString(createElement(Echo)), '<p>hello</p>');
});

test('lull-web/vue renders with the Vue that requires it: a composable on the server', async () => {
  const { createSSRApp, h, ref } = require('vue');
  const { renderToString } = require('vue/server-renderer');
  const { useDebouncedRef } = require('lull-web/vue');
  const Echo = { setup: () => { const text = useDebouncedRef(ref('hello'), 100); return () => h('p', text.value); } };
  assert.equal(await renderToString(createSSRApp(Echo)), '<p>hello</p>');
});

test('lull-web/vue runs on the required engine: a debounced function in an effect scope, cancelled when it stops', async () => {
  const { effectScope } = require('vue');
  const { liveObjects } = require('lull-web');
  const { useDebouncedFn } = require('lull-web/vue');
  const runs = [];
  const scope = effectScope();
  const [first, second] = scope.run(() => [useDebouncedFn((x) => runs.push(x), 5), useDebouncedFn((x) => runs.push(x), 5)]);
  const before = liveObjects();
  first(1);
  second(2);
  assert.equal(liveObjects(), before + 2);
  await new Promise((resolve) => setTimeout(resolve, 50));
  first(3); // pending when the scope stops: dropped
  scope.stop();
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(runs.sort(), [1, 2]); // two timers of the same wait: either may go first
});

test('a required debounce runs, with the last call\'s argument, once', async () => {
  const { debounce } = require('lull-web');
  const runs = [];
  const save = debounce((x) => runs.push(x), 5);
  save(1);
  save(2);
  assert.equal(save.pending(), true);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(runs, [2]);
});

test('an EdgeError thrown by the required client is one for the imported class too', async () => {
  const { edge, EdgeError } = require('lull-web/edge');
  const imported = await import('lull-web/edge');
  const refused = () => Promise.resolve(new Response('{"error":{"code":"forbidden","message":"no"}}', { status: 403 }));
  const client = edge({ url: 'http://127.0.0.1:9', token: 'a-token-of-sixteen+', fetch: refused });
  const error = await client.send('t', 'k', 1).catch((e) => e);
  assert.ok(error instanceof EdgeError);
  assert.ok(error instanceof imported.EdgeError);
});
