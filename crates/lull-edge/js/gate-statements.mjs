// A topic gate's statements (runtime/gate_store.rs), as statements.mjs holds
// the key object's: each text a JS string constant the runtime's statement
// cache finds by a string it has seen, values passed as plain arguments
// (integers checked in Rust), every cursor consumed here, a write of several
// statements inside one `storage.transactionSync`. The tables, and the
// migration that makes them (once per object, through workers-rs), are in
// STORAGE.md §6.

const TOTALS = "SELECT count, bytes FROM dead_totals WHERE id = 0";
const KEEP = `INSERT INTO dead_letters
  (idempotency_key, attempts, first_failed_at, kept_at, outcome, bytes, message, legacy)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id`;
/** Add what one kept row holds to the totals. */
const ADD_TOTALS = "UPDATE dead_totals SET count = count + 1, bytes = bytes + ? WHERE id = 0";
/** Take rows that went off the totals. */
const SUBTRACT_TOTALS = "UPDATE dead_totals SET count = count - ?, bytes = bytes - ? WHERE id = 0";
/** The row keeping a key (through its unique index: the index's condition is repeated so SQLite uses it). */
const KEPT_BY_KEY = "SELECT id FROM dead_letters WHERE idempotency_key = ? AND idempotency_key <> ''";
const COLUMNS = "id, idempotency_key, attempts, first_failed_at, kept_at, outcome, message, legacy";
const PAGE = `SELECT ${COLUMNS} FROM dead_letters WHERE id > ? ORDER BY id LIMIT ?`;
const ONE = `SELECT ${COLUMNS} FROM dead_letters WHERE id = ?`;
const FORGET = "DELETE FROM dead_letters WHERE id = ? RETURNING bytes";
const FAILING = "SELECT first_failed_at, attempt, outcome FROM failing WHERE key = ?";
const FAILED = `INSERT INTO failing (key, first_failed_at, last_at, attempt, outcome) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (key) DO UPDATE SET last_at = excluded.last_at, attempt = excluded.attempt, outcome = excluded.outcome`;
const NOT_FAILING = "DELETE FROM failing WHERE key = ?";
const STALE = "DELETE FROM failing WHERE last_at < ?";
const DEAD_KEY = "INSERT INTO dead_keys (key, at) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET at = MAX(at, excluded.at)";
const DEAD_KEYS = "SELECT key FROM dead_keys WHERE at >= ? AND key > ? ORDER BY key LIMIT ?";
const MORE_DEAD_KEYS = "SELECT COUNT(*) AS n FROM dead_keys WHERE at >= ? AND key > ?";
const FORGET_DEAD_KEY = "DELETE FROM dead_keys WHERE key = ?";

/** The statements over one topic gate's storage. */
export class GateStatements {
  constructor(storage) {
    this.storage = storage;
    this.sql = storage.sql;
  }

  /** The dead letters' totals: `{count, bytes}`, or undefined before the table has its row. */
  totals() {
    return this.sql.exec(TOTALS).toArray()[0];
  }

  /**
   * Keep dead letters, all or nothing: `letters` is a JSON array of
   * `[idempotency_key, attempts, first_failed_at, kept_at, outcome, bytes,
   * message, legacy or null]` (`bytes`: the message's, as the totals count them). Each key is kept once (a letter kept already answers
   * its row); each letter's key stops failing. The last letter's row id.
   */
  keepDead(letters) {
    const rows = JSON.parse(letters);
    return this.storage.transactionSync(() => {
      let last = 0;
      for (const [key, attempts, first, kept, outcome, bytes, message, legacy] of rows) {
        const inserted = this.sql.exec(KEEP, key, attempts, first, kept, outcome, bytes, message, legacy).toArray()[0];
        if (inserted) {
          last = inserted.id;
          this.sql.exec(ADD_TOTALS, bytes).toArray();
        } else {
          last = this.sql.exec(KEPT_BY_KEY, key).toArray()[0]?.id ?? last;
        }
        this.sql.exec(NOT_FAILING, key).toArray();
      }
      return last;
    });
  }

  /** Up to `limit` dead letters after row `after`, in id order. */
  deadPage(after, limit) {
    return this.sql.exec(PAGE, after, limit).toArray();
  }

  /** Dead letter `id`, or undefined. */
  deadLetter(id) {
    return this.sql.exec(ONE, id).toArray()[0];
  }

  /** Forget the dead letters `ids` (a Float64Array), all or nothing: how many there were. */
  forgetDead(ids) {
    return this.storage.transactionSync(() => {
      let gone = 0;
      let bytes = 0;
      for (const id of ids) {
        for (const row of this.sql.exec(FORGET, id)) {
          gone++;
          bytes += row.bytes;
        }
      }
      if (gone > 0) this.sql.exec(SUBTRACT_TOTALS, gone, bytes).toArray();
      return gone;
    });
  }

  /** The row id of the dead letter that keeps `key`, or undefined. */
  deadLetterOf(key) {
    return this.sql.exec(KEPT_BY_KEY, key).toArray()[0]?.id;
  }

  /** `key`'s failing forward: `{first_failed_at, attempt, outcome}`, or undefined. */
  failing(key) {
    return this.sql.exec(FAILING, key).toArray()[0];
  }

  /** `key` forwarded: it fails no more. */
  forwarded(key) {
    this.sql.exec(NOT_FAILING, key).toArray();
  }

  /** `key`'s forward failed (`attempt`, `outcome`), failing since `first`; rows last failed before `stale` go. */
  failed(key, first, attempt, outcome, stale) {
    this.storage.transactionSync(() => {
      this.sql.exec(FAILED, key, first, first, attempt, outcome).toArray();
      this.sql.exec(STALE, stale).toArray();
    });
  }

  /** A key that dead-lettered a window at `at` (its latest time kept). */
  recordDeadKey(key, at) {
    this.sql.exec(DEAD_KEY, key, at).toArray();
  }

  /** Up to `limit` keys that dead-lettered since `since`, after `after` in key order, and how many more there are: `[keys, more]`. */
  deadKeys(since, after, limit) {
    const keys = this.sql.exec(DEAD_KEYS, since, after, limit).toArray().map((row) => row.key);
    const more = this.sql.exec(MORE_DEAD_KEYS, since, keys.length ? keys[keys.length - 1] : after).one().n;
    return [keys, more];
  }

  /** Forget `keys` (a JSON array of strings) as dead-lettering keys, all or nothing. */
  forgetDeadKeys(keys) {
    const all = JSON.parse(keys);
    this.storage.transactionSync(() => {
      for (const key of all) this.sql.exec(FORGET_DEAD_KEY, key).toArray();
    });
  }
}
