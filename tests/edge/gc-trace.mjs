// V8's garbage collections in workerd, counted from its own `--trace-gc` lines.
// Miniflare keeps only workerd's structured log lines, so V8's trace cannot
// reach it: `traceGc` starts workerd (through MINIFLARE_WORKERD_PATH) under a
// wrapper that sends its stdout, line-buffered, to a file of ours, and V8's
// flags (MINIFLARE_WORKERD_V8_FLAGS) turn the trace on and bound each isolate's
// heap as production's isolates are. A load's collections are the lines written
// between a `mark` before it and `since` after it.
import { chmodSync, closeSync, openSync, readSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createRequire } from "node:module";

/** Each isolate's old-space bound while traced, in MB (production's isolates have 128 MB). */
export const TRACED_HEAP_MB = 128;

/**
 * Set the environment so the next Miniflare's workerd traces its collections
 * into `dir`/workerd-stdout.log (workerd's other stdout lines go there too, not
 * to Miniflare). Returns the trace: `mark()` and `since(mark)`.
 */
export function traceGc(dir) {
  const log = join(dir, "workerd-stdout.log");
  const wrapper = join(dir, "workerd-traced");
  const workerd = createRequire(import.meta.url)("workerd").default;
  writeFileSync(log, "");
  // exec keeps workerd's PID (the bench reads its CPU by PID); stdbuf makes its stdout line-buffered, so a mark is exact.
  writeFileSync(wrapper, `#!/bin/sh\nexec stdbuf -oL ${JSON.stringify(workerd)} "$@" >> ${JSON.stringify(log)}\n`);
  chmodSync(wrapper, 0o755);
  process.env.MINIFLARE_WORKERD_PATH = wrapper;
  process.env.MINIFLARE_WORKERD_V8_FLAGS = `--trace-gc --max-old-space-size=${TRACED_HEAP_MB}`;
  return {
    log,
    /** Where the trace is now (its length in bytes). */
    mark: () => statSync(log).size,
    /** The collections traced since `mark`: see `collections`. */
    since(mark) {
      const end = statSync(log).size;
      const buf = Buffer.alloc(end - mark);
      const fd = openSync(log, "r");
      try {
        readSync(fd, buf, 0, buf.length, mark);
      } finally {
        closeSync(fd);
      }
      return collections(buf.toString("utf8"));
    },
  };
}

// `[pid:0xisolate]   1234 ms: Scavenge 3.1 (4.2) -> 2.0 (5.2) MB, pooled: 0.0 MB, 0.81 / 0.00 ms  (average mu = …) allocation failure;`
// The first figure after "MB, " (after the pool's size, where V8 prints it) is the pause.
const LINE = /^\[\d+:(0x[0-9a-f]+)\]\s+[\d.]+ ms: (Scavenge|Minor Mark-Sweep|Mark-Compact|Mark-Sweep)\b.*?MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \/ [\d.]+ ms/;

/**
 * The collections in `text` (trace lines): young-generation ones (`minor`:
 * Scavenge, Minor Mark-Sweep), full ones (`full`: Mark-Compact, Mark-Sweep),
 * the pauses' sum and the longest pause (ms), and how many isolates collected.
 */
export function collections(text) {
  const out = { minor: 0, full: 0, pause_ms: 0, longest_ms: 0, isolates: 0 };
  const isolates = new Set();
  for (const line of text.split("\n")) {
    const m = LINE.exec(line);
    if (!m) continue;
    isolates.add(m[1]);
    if (m[2] === "Scavenge" || m[2] === "Minor Mark-Sweep") out.minor++;
    else out.full++;
    const pause = Number(m[3]);
    out.pause_ms += pause;
    out.longest_ms = Math.max(out.longest_ms, pause);
  }
  out.isolates = isolates.size;
  return out;
}
