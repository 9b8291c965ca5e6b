// The search panel: a box bound with lull-web's `bindSearch`, counters, a live
// timeline, and the controls for `wait` and `maxWait`. Everything it shows is
// also kept in `state` (exposed to the page's tests as `window.lullDemo.search`).

import { bindSearch } from 'lull-web';
import { liveTimeline } from './timeline.js';

const $ = (id) => document.getElementById(id);
const ROWS = ['keystrokes', 'requests', 'shown'];
// What the page keeps of its history (the timeline shows the last seconds; the counters count all).
const KEEP = 1000;
const keep = (list, item) => {
  list.push(item);
  if (list.length > KEEP) list.shift();
};

export function searchPanel() {
  const input = $('q');
  const state = {
    keystrokes: [], // performance.now() of each input event
    requests: [], // { query, at, until, outcome: 'pending' | 'done' | 'aborted' | 'failed' }
    shown: [], // { query, at, total }
    counts: { keys: 0, sent: 0, aborted: 0, shown: 0 },
    binding: undefined,
  };

  const count = () => {
    const { keys, sent, aborted, shown } = state.counts;
    $('c-keys').textContent = keys;
    $('c-sent').textContent = sent;
    $('c-aborted').textContent = aborted;
    $('c-shown').textContent = shown;
    $('c-saved').textContent = keys ? `${keys - sent} (${Math.round((100 * (keys - sent)) / keys)}%)` : '–';
    const wait = state.binding?.wait();
    const auto = document.querySelector('input[name="wait-mode"]:checked').value === 'auto';
    $('c-wait').textContent = wait === undefined ? '–' : `${Math.round(wait)} ms${auto ? ' (learned)' : ''}`;
  };

  async function search(query, signal) {
    const request = { query, at: performance.now(), until: undefined, outcome: 'pending' };
    keep(state.requests, request);
    state.counts.sent += 1;
    count();
    const latency = $('latency').value;
    const url = `/demo/search?q=${encodeURIComponent(query)}${latency ? `&latency_ms=${latency}` : ''}`;
    try {
      const res = await fetch(url, { signal });
      const body = await res.json();
      if (!res.ok) throw new Error(body?.error?.message ?? res.statusText);
      request.outcome = 'done';
      return body;
    } catch (error) {
      request.outcome = error?.name === 'AbortError' ? 'aborted' : 'failed';
      if (request.outcome === 'aborted') state.counts.aborted += 1;
      throw error;
    } finally {
      request.until = performance.now();
      count();
    }
  }

  function show(body, query) {
    keep(state.shown, { query, at: performance.now(), total: body.total });
    state.counts.shown += 1;
    const noun = body.total === 1 ? 'place starts' : 'places start';
    $('results-summary').textContent = `${body.total.toLocaleString('en')} ${noun} with “${query}”`;
    $('results').replaceChildren(
      ...body.results.map((p) => {
        const li = document.createElement('li');
        li.append(p.name, ' ');
        const where = document.createElement('span');
        where.textContent = [p.region, p.country].filter(Boolean).join(', ');
        li.append(where);
        return li;
      }),
    );
    count();
  }

  function bind() {
    state.binding?.destroy();
    const auto = document.querySelector('input[name="wait-mode"]:checked').value === 'auto';
    const maxWait = $('max-wait').value;
    state.binding = bindSearch(input, {
      search,
      wait: auto ? 'auto' : Number($('wait-ms').value),
      ...(maxWait === '' ? {} : { maxWait: Number(maxWait) }),
      onResults: show,
      onError: (error, query) => {
        $('results-summary').textContent = `The search for “${query}” failed: ${error.message}`;
      },
    });
    count();
  }

  input.addEventListener('input', () => {
    keep(state.keystrokes, performance.now());
    state.counts.keys += 1;
    count();
  });
  input.addEventListener('compositionstart', () => ($('composing').textContent = 'Composing: no search until you commit.'));
  input.addEventListener('compositionend', () => ($('composing').textContent = ''));
  for (const control of document.querySelectorAll('input[name="wait-mode"], #wait-ms, #max-wait')) {
    control.addEventListener('change', bind);
  }
  bind();

  liveTimeline($('search-timeline'), {
    rows: ROWS,
    span: 10_000,
    now: () => performance.now(),
    marks: () => [
      ...state.keystrokes.slice(-200).map((at) => ({ row: 0, at, kind: 'key' })),
      ...state.requests.slice(-100).map((r) => ({
        row: 1,
        at: r.at,
        until: r.until,
        bar: true,
        kind: r.outcome === 'aborted' || r.outcome === 'failed' ? 'abort' : 'req',
        label: r.query,
      })),
      ...state.shown.slice(-100).map((s) => ({ row: 2, at: s.at, kind: 'shown', label: s.query })),
    ],
  });

  // Load the places now (the first search would wait for it) and say how many.
  fetch('/demo/places')
    .then((res) => (res.ok ? res.json() : undefined))
    .then((body) => {
      if (body) $('places-count').textContent = `the ${body.count.toLocaleString('en')}`;
    })
    .catch(() => {});
  return state;
}
