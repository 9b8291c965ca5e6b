//! [`Store`] over the object's SQLite: one row per request's events (the
//! events alone, in [`RowFormat`]), the snapshot as row 0 of the same table,
//! one row per backlog window, one per remembered producer key. A batch
//! commits inside `transactionSync`, so it applies all or nothing.
//!
//! Storage written by the first release (schema 1: every event row carried the
//! key's whole state, and a `key_state` row) is migrated on first open: the
//! newest state becomes the snapshot and the event rows keep only the event.
//! The tables, the snapshot and the migration are described in `STORAGE.md`.

use std::cell::Cell;

use serde::Deserialize;
use worker::{SqlStorage, SqlStorageValue, State};

use super::sys::StateExt;

use crate::key::{MAX_ROW_BYTES, MAX_ROW_EVENTS};
use crate::ports::{Bodies, DedupeRow, RowFormat, RowRead, Store, StoreError, Stored, WindowRow, Write};
use lull_core::Seq;

/// The table every key writes from its first event: its event rows (`seq` 1
/// and up) and, as row [`SNAPSHOT_ROW`], its snapshot. One table, not two: a
/// table made costs a new key's first statement about as much as the rest of
/// its first event, and takes a page of the key's storage.
const TABLES: &str = "
CREATE TABLE IF NOT EXISTS events (
  seq   INTEGER PRIMARY KEY,
  at    INTEGER NOT NULL,
  body  TEXT    NOT NULL,
  bytes INTEGER,
  n     INTEGER NOT NULL DEFAULT 1,
  sizes TEXT
);";

/// The `events` row that holds the key's snapshot (its JSON in `body`; `n`,
/// `bytes` and `at` 0: it holds no event). Event seqs start at 1.
const SNAPSHOT_ROW: u64 = 0;

/// The tables a key makes when it first needs them: backlog windows and
/// remembered producer keys (most keys never write either; a table made costs
/// a new key's first statement about as much as its events' table).
const LATER_TABLES: &str = "
CREATE TABLE IF NOT EXISTS windows (
  win  INTEGER PRIMARY KEY,
  ord  INTEGER NOT NULL,
  dead INTEGER NOT NULL,
  json TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS dedupe (
  slot  INTEGER PRIMARY KEY,
  key   TEXT    NOT NULL,
  at    INTEGER NOT NULL,
  reply TEXT    NOT NULL
);";

/// The `events` column added last: a table that has it is current (once a
/// `snapshot` table of an earlier release, if any, is moved into row
/// [`SNAPSHOT_ROW`]). A schema change adds its own column or table here, and
/// a step in [`SqlStore::prepare`].
const NEWEST_COLUMN: &str = "n";

/// The most a database with no table takes: its header page (a table takes a
/// page of its own). A new object's database is that page alone.
const EMPTY_DATABASE_BYTES: usize = 4096;

/// The object's SQLite, and its state for transactions and `deleteAll`.
pub(super) struct SqlStore {
    state: State,
    /// `storage.sql`, fetched from the runtime once (the same object for the object's life).
    sql: SqlStorage,
    /// Whether [`LATER_TABLES`] are there (learnt at load, made at their first write).
    later: Cell<bool>,
}

fn int(n: u64) -> SqlStorageValue {
    SqlStorageValue::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn error(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

#[derive(Deserialize)]
struct EventSql {
    seq: i64,
    at: i64,
    bytes: i64,
    n: i64,
    sizes: Option<String>,
}

#[derive(Deserialize)]
struct Count {
    n: i64,
}

#[derive(Deserialize)]
struct BodySql {
    seq: i64,
    n: i64,
    bytes: i64,
    sizes: Option<String>,
    body: Option<String>,
}

#[derive(Deserialize)]
struct Json {
    json: String,
}

#[derive(Deserialize)]
struct Name {
    name: String,
}

#[derive(Deserialize)]
struct WindowSql {
    win: i64,
    ord: i64,
    dead: i64,
    json: String,
}

#[derive(Deserialize)]
struct DedupeSql {
    slot: i64,
    key: String,
    at: i64,
    reply: String,
}

#[derive(Deserialize)]
struct Column {
    name: String,
}

#[derive(Deserialize)]
struct LegacyState {
    ver: i64,
    state: String,
}

impl SqlStore {
    /// The store of the object with `state`; tables are made (or migrated) on first load.
    pub(super) fn new(state: State) -> Self {
        let sql = state.storage().sql();
        SqlStore { state, sql, later: Cell::new(false) }
    }

    /// The one number a `SELECT … AS n` query answers.
    fn count(&self, query: &str, bindings: Vec<SqlStorageValue>) -> Result<u64, StoreError> {
        let rows: Vec<Count> = self.sql.exec(query, Some(bindings)).and_then(|c| c.to_array()).map_err(error)?;
        Ok(rows.first().map_or(0, |r| unsigned(r.n)))
    }

    /// Run `f` inside `storage.transactionSync`: its statements apply all or nothing.
    fn transaction(&self, f: impl FnOnce(&SqlStorage) -> worker::Result<u64> + 'static) -> Result<u64, StoreError> {
        let sql = self.sql.clone();
        let rows = self.state.transaction_sync(move || f(&sql).map(|rows| rows as f64).map_err(|e| e.to_string()));
        rows.map(|n| n as u64).map_err(error)
    }

    /// The rows holding events `first..=last`, read in one query: SQLite sums
    /// their bytes and leaves out the texts if that passes `guard`, so a window
    /// too large to deliver is never read into memory; then [`RowFormat::read`].
    fn span(&self, first: Seq, last: Seq, limit: u64, guard: u64) -> Result<Option<Bodies>, StoreError> {
        let query = "SELECT seq, n, coalesce(bytes, 0) AS bytes, sizes,
                       CASE WHEN (SELECT coalesce(sum(bytes), 0) FROM events
                                  WHERE seq BETWEEN ? AND ? AND seq + n > ?) <= ? THEN body END AS body
                     FROM events WHERE seq BETWEEN ? AND ? AND seq + n > ? ORDER BY seq";
        let span = overlapping(first, last);
        let bindings = [span.clone(), vec![int(guard)], span].concat();
        let rows: Vec<BodySql> = self.sql.exec(query, Some(bindings)).and_then(|c| c.to_array()).map_err(error)?;
        let rows = rows.iter().map(|r| RowRead {
            first: Seq(unsigned(r.seq)),
            n: unsigned(r.n),
            bytes: unsigned(r.bytes),
            sizes: r.sizes.as_deref(),
            text: r.body.as_deref(),
        });
        RowFormat::read(rows, first, last, limit)
    }

    /// Make the tables; migrate older storage (schema 1: event rows carry a
    /// `state` column; later rows lack `bytes`, or `n` and `sizes`; in earlier
    /// releases the snapshot had a table of its own). A new key's storage
    /// is told by its size alone; otherwise one read of which of
    /// [`LATER_TABLES`] and `snapshot` exist and one of the events table's
    /// columns, so a current key's load changes no schema. Answers whether
    /// the storage was empty (a new key: its table was just made, and there
    /// is nothing to read).
    fn prepare(&self) -> Result<bool, StoreError> {
        // A new object's storage, told without a statement: no table, so no migration to look for.
        if self.sql.database_size() <= EMPTY_DATABASE_BYTES {
            self.sql.exec(TABLES, None).map_err(error)?;
            self.later.set(false);
            return Ok(true);
        }
        let tables: Vec<Name> = self
            .sql
            .exec(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('windows', 'dedupe', 'snapshot')",
                None,
            )
            .and_then(|c| c.to_array())
            .map_err(error)?;
        let exists = |table: &str| tables.iter().any(|t| t.name == table);
        self.later.set(exists("windows") && exists("dedupe"));
        let columns: Vec<Column> =
            self.sql.exec("PRAGMA table_info(events)", None).and_then(|c| c.to_array()).map_err(error)?;
        let has = |name: &str| columns.iter().any(|c| c.name == name);
        if has("state") {
            return self.migrate_schema_1().map(|()| false);
        }
        if !has(NEWEST_COLUMN) {
            self.sql.exec(TABLES, None).map_err(error)?;
            if columns.is_empty() {
                return Ok(true);
            }
            self.add_columns(has("bytes"))?;
        }
        if exists("snapshot") {
            self.move_snapshot()?;
        }
        Ok(false)
    }

    /// Event rows written before `bytes` existed get the column, filled once
    /// (a load never reads a body to learn its length); rows written before
    /// events shared rows hold one event each (`n` = 1). One transaction: all
    /// or none. The later tables are made too (their release came before these columns).
    fn add_columns(&self, has_bytes: bool) -> Result<(), StoreError> {
        self.make_later_tables()?;
        self.transaction(move |sql| {
            if !has_bytes {
                sql.exec(
                    "ALTER TABLE events ADD COLUMN bytes INTEGER;
                     UPDATE events SET bytes = length(CAST(body AS BLOB));",
                    None,
                )?;
            }
            sql.exec(
                "ALTER TABLE events ADD COLUMN n INTEGER NOT NULL DEFAULT 1;
                 ALTER TABLE events ADD COLUMN sizes TEXT;",
                None,
            )?;
            Ok(0)
        })
        .map(|_| ())
    }

    /// Earlier releases kept the snapshot in a table of its own: it becomes
    /// row [`SNAPSHOT_ROW`] and the table goes, in one transaction (a failure
    /// leaves both as they were, and the next load tries again). A row 0
    /// already there was written since, so it is newer and stays.
    fn move_snapshot(&self) -> Result<(), StoreError> {
        self.transaction(|sql| {
            sql.exec(
                &format!(
                    "INSERT INTO events (seq, at, body, bytes, n) SELECT {SNAPSHOT_ROW}, 0, json, 0, 0 FROM snapshot
                       WHERE id = 0 ON CONFLICT (seq) DO NOTHING;
                     DROP TABLE snapshot;"
                ),
                None,
            )?;
            Ok(0)
        })
        .map(|_| ())
    }

    /// Make [`LATER_TABLES`] if they may not be there yet.
    fn make_later_tables(&self) -> Result<(), StoreError> {
        if !self.later.get() {
            self.sql.exec(LATER_TABLES, None).map_err(error)?;
            self.later.set(true);
        }
        Ok(())
    }

    /// Schema 1 (every event row carried the key's state): the newest state
    /// becomes the snapshot, the rows keep only their events.
    fn migrate_schema_1(&self) -> Result<(), StoreError> {
        self.transaction(|sql| {
            let mut newest: Vec<LegacyState> =
                sql.exec("SELECT ver, state FROM events ORDER BY seq DESC LIMIT 1", None)?.to_array()?;
            if sql.exec("SELECT ver FROM key_state LIMIT 0", None).is_ok() {
                newest.extend(
                    sql.exec("SELECT ver, state FROM key_state WHERE id = 0", None)?.to_array::<LegacyState>()?,
                );
            }
            sql.exec(
                "CREATE TABLE events_v2 (seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, body TEXT NOT NULL, bytes INTEGER,
                   n INTEGER NOT NULL DEFAULT 1, sizes TEXT);
                 INSERT INTO events_v2 (seq, at, body, bytes) SELECT seq, at, body, length(CAST(body AS BLOB)) FROM events;
                 DROP TABLE events;
                 ALTER TABLE events_v2 RENAME TO events;
                 DROP TABLE IF EXISTS key_state;",
                None,
            )?;
            sql.exec(LATER_TABLES, None)?;
            if let Some(state) = newest.into_iter().max_by_key(|s| s.ver) {
                apply(sql, Write::Snapshot(state.state))?;
            }
            Ok(0)
        })
        .map(|_| self.later.set(true))
    }
}

/// The bindings that find the rows holding events `first..=last`: a row
/// begins at most `MAX_ROW_EVENTS - 1` seqs before the first event it holds
/// (the primary key bounds the scan) and holds `seq..seq + n`.
fn overlapping(first: Seq, last: Seq) -> Vec<SqlStorageValue> {
    // Never row `SNAPSHOT_ROW`: events start at 1.
    let lowest = first.0.saturating_sub(MAX_ROW_EVENTS as u64 - 1).max(SNAPSHOT_ROW + 1);
    vec![int(lowest), int(last.0), int(first.0)]
}

/// Carry out one write; the rows SQLite wrote for it.
fn apply(sql: &SqlStorage, write: Write) -> worker::Result<u64> {
    let cursor = match write {
        Write::Events { first, at, bodies, reuse } => {
            let insert = "INSERT INTO events (seq, at, body, bytes, n, sizes) VALUES (?, ?, ?, ?, ?, ?)";
            let (body, sizes) = RowFormat::pack(&bodies);
            let sizes = sizes.map_or(SqlStorageValue::Null, SqlStorageValue::from);
            let (bytes, n) = (int(body.len() as u64), int(bodies.len() as u64));
            let values = vec![int(first.0), int(at), body.into(), bytes, n, sizes];
            match reuse {
                Some(old) => {
                    let update =
                        "UPDATE events SET seq = ?, at = ?, body = ?, bytes = ?, n = ?, sizes = ? WHERE seq = ?";
                    let updated = sql.exec(update, [values.clone(), vec![int(old.0)]].concat())?;
                    // A row already reused (freed twice across a payload change) is not
                    // there to update: the events get a row of their own, never none.
                    if updated.rows_written() > 0 { updated } else { sql.exec(insert, values)? }
                }
                None => sql.exec(insert, values)?,
            }
        }
        Write::Snapshot(json) => sql.exec(
            "INSERT INTO events (seq, at, body, bytes, n) VALUES (?, 0, ?, 0, 0)
             ON CONFLICT (seq) DO UPDATE SET body = excluded.body",
            vec![int(SNAPSHOT_ROW), json.into()],
        )?,
        Write::Window(w) => sql.exec(
            "INSERT INTO windows (win, ord, dead, json) VALUES (?, ?, ?, ?)
             ON CONFLICT (win) DO UPDATE SET ord = excluded.ord, dead = excluded.dead, json = excluded.json",
            vec![int(w.window), int(w.ord), int(u64::from(w.dead)), w.json.into()],
        )?,
        Write::ForgetWindow(window) => sql.exec("DELETE FROM windows WHERE win = ?", vec![int(window)])?,
        Write::Dedupe(d) => sql.exec(
            "INSERT INTO dedupe (slot, key, at, reply) VALUES (?, ?, ?, ?)
             ON CONFLICT (slot) DO UPDATE SET key = excluded.key, at = excluded.at, reply = excluded.reply",
            vec![int(u64::from(d.slot)), d.key.into(), int(d.at), d.reply.into()],
        )?,
    };
    Ok(cursor.rows_written() as u64)
}

impl Store for SqlStore {
    fn load(&self) -> Result<Stored, StoreError> {
        if self.prepare()? {
            return Ok(Stored::default());
        }
        let sql = &self.sql;
        let snapshot: Vec<Json> = sql
            .exec("SELECT body AS json FROM events WHERE seq = ?", Some(vec![int(SNAPSHOT_ROW)]))
            .and_then(|c| c.to_array())
            .map_err(error)?;
        let rows: Vec<EventSql> = sql
            .exec(
                "SELECT seq, at, coalesce(bytes, 0) AS bytes, n, sizes FROM events WHERE seq > ? ORDER BY seq",
                Some(vec![int(SNAPSHOT_ROW)]),
            )
            .and_then(|c| c.to_array())
            .map_err(error)?;
        let mut events = Vec::with_capacity(rows.len());
        for r in rows {
            let (first, n) = (Seq(unsigned(r.seq)), unsigned(r.n));
            events.extend(RowFormat::events(first, unsigned(r.at), n, unsigned(r.bytes), r.sizes.as_deref())?);
        }
        let (windows, dedupe): (Vec<WindowSql>, Vec<DedupeSql>) = if self.later.get() {
            let windows = sql
                .exec("SELECT win, ord, dead, json FROM windows ORDER BY ord", None)
                .and_then(|c| c.to_array())
                .map_err(error)?;
            let dedupe =
                sql.exec("SELECT slot, key, at, reply FROM dedupe", None).and_then(|c| c.to_array()).map_err(error)?;
            (windows, dedupe)
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(Stored {
            snapshot: snapshot.into_iter().next().map(|s| s.json),
            events,
            windows: windows
                .into_iter()
                .map(|w| WindowRow { window: unsigned(w.win), ord: unsigned(w.ord), dead: w.dead != 0, json: w.json })
                .collect(),
            dedupe: dedupe
                .into_iter()
                .map(|d| DedupeRow {
                    slot: u32::try_from(d.slot).unwrap_or(u32::MAX),
                    key: d.key,
                    at: unsigned(d.at),
                    reply: d.reply,
                })
                .collect(),
        })
    }

    fn commit(&self, mut writes: Vec<Write>) -> Result<u64, StoreError> {
        if writes.iter().any(|w| matches!(w, Write::Window(_) | Write::ForgetWindow(_) | Write::Dedupe(_))) {
            self.make_later_tables()?;
        }
        // One statement is atomic by itself: no transaction to open.
        if writes.len() == 1
            && let Some(one) = writes.pop()
        {
            return apply(&self.sql, one).map_err(error);
        }
        self.transaction(move |sql| writes.into_iter().try_fold(0, |rows, write| Ok(rows + apply(sql, write)?)))
    }

    fn bodies(&self, first: Seq, last: Seq, limit: u64) -> Result<Bodies, StoreError> {
        // Rows at either end may hold events outside the span, each less than
        // MAX_ROW_BYTES of them; rows written before any bound held one event.
        match self.span(first, last, limit, limit.saturating_add(2 * MAX_ROW_BYTES as u64))? {
            Some(bodies) => Ok(bodies),
            // Not reached while that holds; if it did not, the rows are read whole.
            None => self.span(first, last, limit, u64::MAX)?.ok_or_else(|| error("event rows without their text")),
        }
    }

    fn event_rows(&self) -> Result<u64, StoreError> {
        self.count("SELECT count(*) AS n FROM events WHERE seq > ?", vec![int(SNAPSHOT_ROW)])
    }

    fn size(&self) -> u64 {
        self.sql.database_size() as u64
    }

    async fn erase(&self) -> Result<(), StoreError> {
        let storage = self.state.storage();
        storage.delete_alarm().await.map_err(error)?;
        storage.delete_all().await.map_err(error)?;
        self.later.set(false);
        Ok(())
    }
}
