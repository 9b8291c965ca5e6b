// The edge panel: an autosave editor whose edits are debounced in the page,
// then sent to lull-edge's `demo` topic under the document's key; the key's
// status, its timeline (GET …/timeline) and what the demo sink received,
// polled. Kept in `state` too (`window.lullDemo.edge`) for the page's tests.
//
// The page holds no ingest or admin token: only a client token for its
// document's key (a short-lived JWT: send, flush, cancel), which the demo's
// server side mints (`GET /demo/token?key=`), as your backend would. What
// only an admin may read or do (the key's status, timeline, replay; the
// demo sink) goes through that server side too (`/demo/keys/…`, `/demo/sink…`, `/demo/target`).
//
// The sink's answer switch makes it answer every delivery `429` with
// `Retry-After` (the topic pauses: every key holds, then one probe goes) or
// `410` (the target is disabled until resumed); the topic's target state is
// polled with the rest.

import { edge } from 'lull-web/edge';
import { liveTimeline } from './timeline.js';

const $ = (id) => document.getElementById(id);
const TOPIC = 'demo';
const POLL_MS = 500;
const PAGE_DEBOUNCE_MS = 500;
const PAGE_MAX_WAIT_MS = 3000;

// What the page keeps of the key's history (the list and the chart show the recent part).
const KEEP = 500;
const keep = (list, item) => {
  list.push(item);
  if (list.length > KEEP) list.shift();
};

const clock = (t) => new Date(t).toLocaleTimeString('en-GB', { hour12: false }) + `.${String(t % 1000).padStart(3, '0')}`;

/** One timeline entry in words. */
function describe(e) {
  const w = e.window !== undefined ? `window ${e.window}` : '';
  switch (e.lull) {
    case 'accept': return `event seq ${e.seq} joined ${w}`;
    case 'fire': return `fire ${w}: ${e.count} event(s), reason ${e.reason}, attempt ${e.attempt}`;
    case 'deliver': return `delivery of ${w}, attempt ${e.attempt}: ${e.ok ? 'ok' : 'failed'} (${e.outcome}) in ${e.ms} ms`;
    case 'retry': return `retry ${w} as attempt ${e.attempt} at ${clock(e.at)}`;
    case 'dead_letter': return `dead letter: ${w} after ${e.attempts} attempts`;
    case 'held': return `${w} held by the target until ${clock(e.until)} (attempt ${e.attempt} kept)`;
    case 'queued': return `${w} queued behind a delivery (${e.count} event(s))`;
    case 'cancel': return `${w} dropped (${e.cause}, ${e.count} event(s))`;
    default: return `${e.lull} ${w}`.trim();
  }
}

/** The demo's server side: JSON, or an error with its message (changes carry `lull-demo: 1`). */
const demo = (method, path) =>
  fetch(path, { method, headers: method === 'GET' ? {} : { 'lull-demo': '1' } }).then(async (res) => {
    const body = await res.json().catch(() => null);
    if (!res.ok) throw new Error(body?.error?.message ?? res.statusText);
    return body;
  });

/**
 * A client whose token is `key`'s client token, fetched from the demo's
 * server side at once (so a page going away need not ask for one) and again
 * whenever `lull-web/edge` asks (before it expires, after a `401`); `ready`
 * settles when the first one has arrived (or failed: the first send says why).
 */
function clientFor(key) {
  const fetchToken = () => demo('GET', `/demo/token?key=${encodeURIComponent(key)}`).then((j) => j.token);
  let first = fetchToken();
  const ready = first.then(() => undefined, () => undefined);
  const client = edge({
    url: location.origin,
    token: () => {
      const token = first ?? fetchToken();
      first = undefined;
      return token;
    },
  });
  return { client, ready };
}

export function edgePanel() {
  const producer = `tab-${Math.random().toString(36).slice(2, 6)}`;
  let client;
  const state = {
    producer,
    key: '',
    pending: () => client.pending(),
    tokenReady: undefined,
    sends: 0,
    handedOver: [],
    timeline: [],
    since: undefined,
    after: undefined,
    sink: [],
    status: undefined,
    lastError: undefined,
    switches: 0,
    target: undefined,
    answer: 'ok',
  };
  $('producer').textContent = producer;
  const fromHash = new URLSearchParams(location.hash.slice(1)).get('doc');
  if (fromHash) $('doc').value = fromHash;

  const keyPath = (key = state.key) => `/demo/keys/${encodeURIComponent(key)}`;
  const message = (text) => ($('edge-message').textContent = text);
  // A failure is announced once, not at every poll that repeats it.
  const failed = (what) => (error) => {
    const text = `${what} failed: ${error.message}`;
    if (text !== state.lastError) message(text);
    state.lastError = text;
  };

  function useKey() {
    const key = $('doc').value.trim() || 'doc-1';
    if (key !== state.key) {
      // Another document: a client with that key's token (the old one hands over what it held).
      client?.close();
      ({ client, ready: state.tokenReady } = clientFor(key));
    }
    state.key = key;
    Object.assign(state, { timeline: [], since: undefined, after: undefined, status: undefined });
    $('second-tab').href = `${location.pathname}${location.search}#doc=${encodeURIComponent(state.key)}`;
    $('edge-log').replaceChildren();
    $('sink-log').replaceChildren();
    $('fail').setAttribute('aria-pressed', 'false');
  }
  $('doc').addEventListener('change', useKey);
  useKey();

  $('editor').addEventListener('input', () => {
    state.sends += 1;
    $('s-sends').textContent = state.sends;
    const edit = { tab: producer, edit: state.sends, text: $('editor').value.slice(0, 2000) };
    client
      .send(TOPIC, state.key, edit, { debounce: PAGE_DEBOUNCE_MS, maxWait: PAGE_MAX_WAIT_MS })
      .then((sent) => {
        keep(state.handedOver, { ...sent, at: Date.now() });
        message(`Handed over ${sent.count} edit(s) as one event: window ${sent.window}, seq ${sent.seq}.`);
      }, failed('send'));
  });
  $('flush').addEventListener('click', () => client.flush(TOPIC, state.key).then(() => message('Flushed: the open window fires now.'), failed('flush')));
  $('cancel').addEventListener('click', () => client.cancel(TOPIC, state.key).then(() => message('Cancelled the open window.'), failed('cancel')));
  $('fail').addEventListener('click', () => {
    const on = $('fail').getAttribute('aria-pressed') !== 'true';
    state.switches += 1; // a poll begun before this no longer tells the switch's state
    demo(on ? 'PUT' : 'DELETE', `/demo/sink/failing/${encodeURIComponent(state.key)}`).then(() => {
      $('fail').setAttribute('aria-pressed', String(on));
      message(on ? 'The sink now refuses this document (500): watch the retries.' : 'The sink accepts this document again.');
    }, failed('sink switch'));
  });
  const answers = {
    ok: ['DELETE', '/demo/sink/answer', 'The sink answers as usual again (a paused target goes on after its pause; a disabled one needs a resume).'],
    throttle: ['PUT', '/demo/sink/answer/throttle', 'The sink answers 429 with Retry-After 5 s: the whole topic pauses, then one probe goes.'],
    gone: ['PUT', '/demo/sink/answer/gone', 'The sink answers 410 Gone: the target is disabled; events are still accepted.'],
  };
  for (const [name, [method, path, said]] of Object.entries(answers)) {
    $(`answer-${name}`).addEventListener('click', () => demo(method, path).then(() => {
      state.answer = name;
      for (const other of Object.keys(answers)) $(`answer-${other}`).setAttribute('aria-pressed', String(other === name));
      message(said);
    }, failed('sink answer')));
  }
  $('resume').addEventListener('click', () => demo('POST', '/demo/target/resume').then(() => message('The target is active again: held windows go out within a minute.'), failed('resume')));
  $('replay').addEventListener('click', () => demo('POST', `${keyPath()}/dead-letters/retry`).then(() => message('Dead letters replayed.'), failed('replay')));

  function renderStatus(s) {
    state.status = s;
    $('s-state').textContent = s.state;
    $('edge-wait').textContent = `${s.wait_ms.toLocaleString('en')} ms`;
    const open = s.open && s.open.span.last - s.open.span.first + 1;
    $('s-window').textContent = s.open ? `${s.open.window} (${open} event${open === 1 ? '' : 's'})` : 'none';
    $('s-events').textContent = s.stats.events;
    $('s-succeeded').textContent = s.stats.succeeded;
    $('s-failures').textContent = s.stats.failures;
    $('s-dead').textContent = s.dead_letter_count;
  }

  function renderTimeline(page) {
    const log = $('edge-log');
    if (state.since !== page.since) {
      // The key's object started afresh, its numbering too: read it again from its start.
      const restarted = state.since !== undefined;
      state.since = page.since;
      state.timeline = [];
      log.replaceChildren();
      if (restarted) {
        state.after = undefined;
        return;
      }
    }
    state.after = page.next_after ?? state.after;
    for (const e of page.timeline) {
      keep(state.timeline, e);
      const li = document.createElement('li');
      li.textContent = `${clock(e.t)} ${describe(e)}`;
      if (e.lull === 'dead_letter' || (e.lull === 'deliver' && !e.ok)) li.className = 'bad';
      if (e.lull === 'deliver' && e.ok) li.className = 'good';
      log.prepend(li);
    }
    while (log.children.length > 200) log.lastChild.remove();
  }

  function renderSink({ received, failing }, switches) {
    if (switches === state.switches) $('fail').setAttribute('aria-pressed', String(failing.includes(state.key)));
    state.sink = received.filter((r) => r.delivery?.key === state.key);
    $('sink-log').replaceChildren(
      ...state.sink
        .slice()
        .reverse()
        .map((r) => {
          const d = r.delivery;
          const tabs = [...new Set((d.events ?? [d.event]).map((e) => e?.tab).filter(Boolean))];
          const li = document.createElement('li');
          li.className = r.status === 200 ? 'good' : 'bad';
          li.textContent = `${clock(r.received_at)} window ${d.window}, attempt ${r.attempt}: ${d.count} event(s) from ${tabs.join(' + ') || '?'}, ${d.reason} → ${r.status}`;
          return li;
        }),
    );
  }

  function renderTarget({ target }) {
    state.target = target;
    const text = { active: 'active', disabled: 'disabled', paused: `paused until ${clock(target.until ?? 0)}` }[target.state] ?? target.state;
    const last = target.last_answer ? `, last answer ${target.last_answer.status ?? target.last_answer.detail}` : '';
    $('s-target').textContent = `${text}${last}`;
  }

  async function poll() {
    const [key, switches] = [state.key, state.switches];
    try {
      const after = state.after === undefined ? '' : `?after=${state.after}`;
      const [status, page, sink, target] = await Promise.all([
        demo('GET', keyPath(key)),
        demo('GET', `${keyPath(key)}/timeline${after}`),
        demo('GET', '/demo/sink'),
        demo('GET', '/demo/target'),
      ]);
      if (key === state.key) {
        renderStatus(status);
        renderTimeline(page);
        renderSink(sink, switches);
        renderTarget(target);
        state.lastError = undefined;
      }
    } catch (error) {
      failed('status')(error);
    }
    setTimeout(poll, POLL_MS);
  }
  poll();

  const row = { accept: 0, fire: 1, retry: 1, queued: 1, cancel: 1, held: 1, deliver: 2, dead_letter: 2 };
  liveTimeline($('edge-timeline'), {
    rows: ['events', 'fires', 'deliveries'],
    span: 20_000,
    now: () => Date.now(),
    marks: () =>
      state.timeline
        .filter((e) => e.lull in row)
        .slice(-300)
        .map((e) => ({
          row: row[e.lull],
          at: e.t,
          kind: e.lull === 'accept' ? 'key' : e.lull === 'fire' || e.lull === 'queued' ? 'req' : e.lull === 'deliver' && e.ok ? 'shown' : 'abort',
          label: e.lull === 'fire' ? `#${e.window} ${e.reason}` : e.lull === 'dead_letter' ? 'dead letter' : undefined,
        })),
  });
  return state;
}
