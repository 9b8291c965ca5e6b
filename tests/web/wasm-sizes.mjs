// Where a wasm module's bytes go: each function's body size, by name (read
// from a build that keeps the name section), largest first, and the sizes of
// the module's sections. No tool beyond Node: the binary format is read here.

import { readFileSync } from 'node:fs';

const SECTIONS = { 0: 'custom', 1: 'type', 2: 'import', 3: 'function', 4: 'table', 5: 'memory', 6: 'global', 7: 'export', 9: 'element', 10: 'code', 11: 'data', 12: 'data count' };

/** `{ sections: { name: bytes }, functions: [{ name, bytes }] }` of the module at `path`, largest function first. */
export function wasmSizes(path) {
  const b = readFileSync(path);
  let p = 8;
  const uleb = () => {
    let result = 0;
    let shift = 0;
    let byte;
    do {
      byte = b[p++];
      result += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80);
    return result;
  };
  const name = () => {
    const length = uleb();
    const text = b.subarray(p, p + length).toString();
    p += length;
    return text;
  };
  let imported = 0;
  const bodies = [];
  const names = new Map();
  const sections = {};
  while (p < b.length) {
    const id = b[p++];
    const size = uleb();
    const end = p + size; // (p is read after uleb() moved it)
    const kind = SECTIONS[id] ?? `section ${id}`;
    if (id === 2) {
      for (let n = uleb(); n > 0; n--) {
        name();
        name();
        const type = b[p++];
        if (type !== 0) throw new Error('wasm-sizes: only function imports are read');
        uleb();
        imported++;
      }
    } else if (id === 10) {
      for (let n = uleb(); n > 0; n--) {
        const length = uleb();
        bodies.push(length);
        p += length;
      }
    } else if (id === 0 && name() === 'name') {
      while (p < end) {
        const sub = b[p++];
        const length = uleb();
        const subEnd = p + length;
        if (sub === 1) {
          for (let n = uleb(); n > 0; n--) {
            const index = uleb();
            names.set(index, name());
          }
        }
        p = subEnd;
      }
    }
    sections[kind] = (sections[kind] ?? 0) + size;
    p = end;
  }
  const functions = bodies
    .map((bytes, i) => ({ name: names.get(i + imported) ?? `#${i + imported}`, bytes }))
    .sort((x, y) => y.bytes - x.bytes);
  return { sections, functions };
}

/** A Rust symbol made readable: `lull_core::lane::Lane::event` from its mangled form. */
export function demangle(symbol) {
  const legacy = symbol.match(/^_ZN(.*)17h[0-9a-f]{16}E$/);
  if (!legacy) return symbol;
  const parts = [];
  let rest = legacy[1];
  while (rest.length > 0) {
    const m = rest.match(/^(\d+)/);
    if (!m) break;
    const length = Number(m[1]);
    parts.push(rest.slice(m[1].length, m[1].length + length));
    rest = rest.slice(m[1].length + length);
  }
  return parts
    .join('::')
    .replace(/\$LT\$/g, '<')
    .replace(/\$GT\$/g, '>')
    .replace(/\$u20\$/g, ' ')
    .replace(/\$C\$/g, ',')
    .replace(/\$u7b\$/g, '{')
    .replace(/\$u7d\$/g, '}')
    .replace(/\.\./g, '::');
}
