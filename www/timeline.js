// A live timeline in SVG: rows of marks over the last `span` ms, redrawn on
// each animation frame. A mark is { row, at, until?, kind, label? }: a tick at
// `at`, or a bar from `at` to `until` (to now while `until` is undefined).

const NS = 'http://www.w3.org/2000/svg';
const LABEL = 90;

function el(name, attrs, text) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Draw `marks()` into `svg` over the last `span` ms, each row labelled; the clock is `now()`. */
export function liveTimeline(svg, { rows, span, now, marks, keep = 500 }) {
  const height = Number(svg.viewBox.baseVal.height) || 150;
  const rowHeight = (height - 16) / rows.length;
  const draw = () => {
    // Drawn in the element's own pixels, so text is never stretched.
    const WIDTH = Math.max(320, svg.clientWidth || 800);
    svg.setAttribute('viewBox', `0 0 ${WIDTH} ${height}`);
    const t = now();
    const x = (at) => LABEL + ((WIDTH - LABEL) * (at - (t - span))) / span;
    const all = marks();
    if (all.length > keep) all.splice(0, all.length - keep);
    const children = [];
    rows.forEach((name, i) => {
      const y = 8 + i * rowHeight;
      children.push(el('line', { class: 'grid', x1: LABEL, x2: WIDTH, y1: y + rowHeight / 2, y2: y + rowHeight / 2 }));
      children.push(el('text', { x: 4, y: y + rowHeight / 2 + 4 }, name));
    });
    for (let s = 0; s <= span; s += span / 5) {
      children.push(el('text', { x: x(t - s) - (s === 0 ? 24 : 8), y: height - 2 }, s === 0 ? 'now' : `-${s / 1000}s`));
    }
    const labelled = [];
    for (const m of all) {
      const end = m.until ?? t;
      if (m.bar ? end < t - span : m.at < t - span) continue;
      const y = 8 + m.row * rowHeight;
      if (m.bar) {
        const x1 = Math.max(LABEL, x(m.at));
        children.push(el('rect', { class: m.kind, x: x1, y: y + rowHeight * 0.3, width: Math.max(2, x(end) - x1), height: rowHeight * 0.4, rx: 2 }));
      } else {
        children.push(el('rect', { class: m.kind, x: x(m.at) - 1.5, y: y + rowHeight * 0.2, width: 3, height: rowHeight * 0.6 }));
      }
      if (m.label) labelled.push(m);
    }
    // Labels, newest first: one that would overlap a newer one in its row is left out.
    const room = new Map(); // row -> where the newer labels begin
    for (const m of labelled.sort((a, b) => b.at - a.at)) {
      const at = x(m.at);
      const width = m.label.length * 6.5;
      const right = at + 3 + width > WIDTH; // near the right edge: the label ends at its mark
      const start = right ? at - 3 - width : at + 3;
      if (start + width + 4 > (room.get(m.row) ?? Infinity) || start < LABEL) continue;
      room.set(m.row, start);
      const y = 8 + m.row * rowHeight + rowHeight * 0.2 - 1;
      children.push(el('text', { x: right ? at - 3 : at + 3, y, 'text-anchor': right ? 'end' : 'start' }, m.label));
    }
    svg.replaceChildren(...children);
    requestAnimationFrame(draw);
  };
  requestAnimationFrame(draw);
}
