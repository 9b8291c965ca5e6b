// The key object's statements (runtime/store.rs), bound once, and its alarm: each text a JS
// string constant, so the runtime's prepared-statement cache finds it by a
// string it has seen (a text decoded from wasm memory per call is a new
// string, hashed and looked up every time, then garbage). The wasm passes
// each statement's values as plain arguments (integers checked in Rust), not
// an array built value by value; every cursor is consumed here.
//
// Writes are staged (`events`, `snapshot`, …: one flat array, reused) and
// applied by `commit`: one statement alone, several inside
// `storage.transactionSync` (all or nothing) with a function made once per
// object, not per call. The tables are described in STORAGE.md.

const INSERT_EVENTS = "INSERT INTO events (seq, at, body, bytes, n, sizes) VALUES (?, ?, ?, ?, ?, ?)";
const REUSE_EVENTS = "UPDATE events SET seq = ?, at = ?, body = ?, bytes = ?, n = ?, sizes = ? WHERE seq = ?";
const SNAPSHOT = `INSERT INTO events (seq, at, body, bytes, n) VALUES (0, 0, ?, 0, 0)
             ON CONFLICT (seq) DO UPDATE SET body = excluded.body`;
const WINDOW = `INSERT INTO windows (win, ord, dead, json) VALUES (?, ?, ?, ?)
             ON CONFLICT (win) DO UPDATE SET ord = excluded.ord, dead = excluded.dead, json = excluded.json`;
const FORGET_WINDOW = "DELETE FROM windows WHERE win = ?";
const DEDUPE = `INSERT INTO dedupe (slot, key, at, reply) VALUES (?, ?, ?, ?)
             ON CONFLICT (slot) DO UPDATE SET key = excluded.key, at = excluded.at, reply = excluded.reply`;

const SNAPSHOT_ROW = "SELECT body AS json FROM events WHERE seq = 0";
const EVENT_ROWS = "SELECT seq, at, coalesce(bytes, 0) AS bytes, n, sizes FROM events WHERE seq > 0 ORDER BY seq";
const WINDOWS = "SELECT win, ord, dead, json FROM windows ORDER BY ord";
const DEDUPES = "SELECT slot, key, at, reply FROM dedupe";
const SPAN = `SELECT seq, n, coalesce(bytes, 0) AS bytes, sizes,
               CASE WHEN (SELECT coalesce(sum(bytes), 0) FROM events
                          WHERE seq BETWEEN ? AND ? AND seq + n > ?) <= ? THEN body END AS body
             FROM events WHERE seq BETWEEN ? AND ? AND seq + n > ? ORDER BY seq`;
const COUNT_EVENT_ROWS = "SELECT count(*) AS n FROM events WHERE seq > 0";

/** The statements over one key object's storage. */
export class KeyStatements {
  constructor(storage) {
    this.storage = storage;
    this.sql = storage.sql;
    // The staged writes: a statement's text, then its values (as many as its `?`s); how many statements.
    this.staged = [];
    this.statements = 0;
    this.apply = () => this.run();
  }

  /** Stage an event row: new (`reuse` undefined), or in the place of row `reuse` (freed). */
  events(seq, at, body, bytes, n, sizes, reuse) {
    if (reuse === undefined) this.staged.push(INSERT_EVENTS, seq, at, body, bytes, n, sizes ?? null);
    else this.staged.push(REUSE_EVENTS, seq, at, body, bytes, n, sizes ?? null, reuse);
    this.statements++;
  }

  /** Stage the snapshot (row 0). */
  snapshot(json) {
    this.staged.push(SNAPSHOT, json);
    this.statements++;
  }

  /** Stage a backlog window. */
  window(win, ord, dead, json) {
    this.staged.push(WINDOW, win, ord, dead, json);
    this.statements++;
  }

  /** Stage a window's removal. */
  forgetWindow(win) {
    this.staged.push(FORGET_WINDOW, win);
    this.statements++;
  }

  /** Stage a remembered producer key. */
  dedupe(slot, key, at, reply) {
    this.staged.push(DEDUPE, slot, key, at, reply);
    this.statements++;
  }

  /** Apply the staged writes, all or nothing: the rows SQLite wrote. Nothing stays staged. */
  commit() {
    try {
      // One statement is atomic by itself: no transaction to open.
      return this.statements <= 1 ? this.run() : this.storage.transactionSync(this.apply);
    } finally {
      this.discard();
    }
  }

  /** Apply the staged writes inside a transaction already open (a migration's): the rows written. */
  commitWithin() {
    try {
      return this.run();
    } finally {
      this.discard();
    }
  }

  /** Drop the staged writes (a write that could not be staged whole stages nothing). */
  discard() {
    this.staged.length = 0;
    this.statements = 0;
  }

  /** Run the staged statements in order: the rows written. */
  run() {
    const s = this.staged;
    let rows = 0;
    for (let i = 0; i < s.length; ) {
      const text = s[i];
      let cursor;
      switch (arity(text)) {
        case 1:
          cursor = this.sql.exec(text, s[i + 1]);
          break;
        case 4:
          cursor = this.sql.exec(text, s[i + 1], s[i + 2], s[i + 3], s[i + 4]);
          break;
        case 6:
          cursor = this.sql.exec(text, s[i + 1], s[i + 2], s[i + 3], s[i + 4], s[i + 5], s[i + 6]);
          break;
        default:
          cursor = this.sql.exec(text, s[i + 1], s[i + 2], s[i + 3], s[i + 4], s[i + 5], s[i + 6], s[i + 7]);
      }
      const written = cursor.rowsWritten;
      // A freed row reused twice across a payload change is not there to update: the events get a row of their own.
      rows += written === 0 && text === REUSE_EVENTS ? this.sql.exec(INSERT_EVENTS, s[i + 1], s[i + 2], s[i + 3], s[i + 4], s[i + 5], s[i + 6]).rowsWritten : written;
      i += 1 + arity(text);
    }
    return rows;
  }

  /** The snapshot's JSON, or undefined. */
  snapshotRow() {
    return this.sql.exec(SNAPSHOT_ROW).toArray()[0]?.json;
  }

  /** The event rows (their texts left out), in seq order. */
  eventRows() {
    return this.sql.exec(EVENT_ROWS).toArray();
  }

  /** The backlog windows, in order. */
  windows() {
    return this.sql.exec(WINDOWS).toArray();
  }

  /** The remembered producer keys. */
  dedupes() {
    return this.sql.exec(DEDUPES).toArray();
  }

  /** The rows holding events `first..=last` (from row `lowest`), their texts only if their bytes are at most `guard`. */
  span(lowest, last, first, guard) {
    return this.sql.exec(SPAN, lowest, last, first, guard, lowest, last, first).toArray();
  }

  /** How many event rows there are. */
  eventRowCount() {
    return this.sql.exec(COUNT_EVENT_ROWS).one().n;
  }
}

/** A rejection nobody awaits: a failed write breaks the output gate (the object is reset) whether or not it is seen here. */
const ignore = () => {};

/**
 * `storage.setAlarm(at)`, not awaited: the write rides the output gate (the
 * event's answer goes out only once it is stored; if it fails, the object is
 * reset and the answer is an error, as for a failed statement). What it
 * throws at once (an argument it refuses) goes to the caller.
 */
export function setAlarm(storage, at) {
  storage.setAlarm(at).catch(ignore);
}

/** How many values a staged statement takes. */
function arity(text) {
  switch (text) {
    case INSERT_EVENTS:
      return 6;
    case REUSE_EVENTS:
      return 7;
    case WINDOW:
    case DEDUPE:
      return 4;
    default:
      return 1;
  }
}
