//! [`Store`] over the object's SQLite: one row per request's events (the
//! events alone, in [`RowFormat`]), the snapshot as row 0 of the same table,
//! one row per backlog window, one per remembered producer key. A batch
//! commits inside `transactionSync`, so it applies all or nothing. What runs
//! per event and per delivery goes through [`KeyStatements`] (fixed texts,
//! values as plain arguments); making and migrating the tables, once per
//! object at most, through workers-rs' `exec`.
//!
//! Storage written by the first release (schema 1: every event row carried the
//! key's whole state, and a `key_state` row) is migrated on first open: the
//! newest state becomes the snapshot and the event rows keep only the event.
//! The tables, the snapshot and the migration are described in `STORAGE.md`.

use std::cell::Cell;

use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{SqlStorage, State};

use super::statements::{self, KeyStatements, answered, int, store_error, unsigned};
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
    /// `storage.sql`, fetched from the runtime once (the same object for the object's life): the tables' making and migration.
    sql: SqlStorage,
    /// The statements of every event and delivery, bound once.
    statements: KeyStatements,
    /// Whether [`LATER_TABLES`] are there (learnt at load, made at their first write).
    later: Cell<bool>,
}

#[derive(Deserialize)]
struct EventSql {
    seq: f64,
    at: f64,
    bytes: f64,
    n: f64,
    sizes: Option<String>,
}

#[derive(Deserialize)]
struct BodySql {
    seq: f64,
    n: f64,
    bytes: f64,
    sizes: Option<String>,
    body: Option<String>,
}

#[derive(Deserialize)]
struct Name {
    name: String,
}

#[derive(Deserialize)]
struct WindowSql {
    win: f64,
    ord: f64,
    dead: f64,
    json: String,
}

#[derive(Deserialize)]
struct DedupeSql {
    slot: f64,
    key: String,
    at: f64,
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
    /// The store of the object with `state` (whose runtime `storage` is
    /// `storage`); tables are made (or migrated) on first load.
    pub(super) fn new(state: State, storage: &JsValue) -> Self {
        let sql = state.storage().sql();
        SqlStore { statements: KeyStatements::new(storage), state, sql, later: Cell::new(false) }
    }

    /// Stage `writes` (all, or none if one cannot be).
    fn stage(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        let staged = writes.into_iter().try_for_each(|write| stage(&self.statements, write));
        if staged.is_err() {
            self.statements.discard();
        }
        staged
    }

    /// Run `f` inside `storage.transactionSync`: its statements apply all or nothing.
    fn transaction(&self, f: impl FnOnce(&SqlStorage) -> worker::Result<u64> + 'static) -> Result<u64, StoreError> {
        let sql = self.sql.clone();
        let rows = self.state.transaction_sync(move || f(&sql).map(|rows| rows as f64).map_err(|e| e.to_string()));
        rows.map(|n| n as u64).map_err(store_error)
    }

    /// The rows holding events `first..=last`, read in one query: SQLite sums
    /// their bytes and leaves out the texts if that passes `guard`, so a window
    /// too large to deliver is never read into memory; then [`RowFormat::read`].
    fn span(&self, first: Seq, last: Seq, limit: u64, guard: u64) -> Result<Option<Bodies>, StoreError> {
        // A guard past what storage takes is no guard: every text is read.
        let guard = int(guard).unwrap_or(f64::MAX);
        let answer = self.statements.span(int(lowest_row(first))?, int(last.0)?, int(first.0)?, guard);
        let rows: Vec<BodySql> = answered(answer)?;
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
            self.sql.exec(TABLES, None).map_err(store_error)?;
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
            .map_err(store_error)?;
        let exists = |table: &str| tables.iter().any(|t| t.name == table);
        self.later.set(exists("windows") && exists("dedupe"));
        let columns: Vec<Column> =
            self.sql.exec("PRAGMA table_info(events)", None).and_then(|c| c.to_array()).map_err(store_error)?;
        let has = |name: &str| columns.iter().any(|c| c.name == name);
        if has("state") {
            return self.migrate_schema_1().map(|()| false);
        }
        if !has(NEWEST_COLUMN) {
            self.sql.exec(TABLES, None).map_err(store_error)?;
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
            self.sql.exec(LATER_TABLES, None).map_err(store_error)?;
            self.later.set(true);
        }
        Ok(())
    }

    /// Schema 1 (every event row carried the key's state): the newest state
    /// becomes the snapshot, the rows keep only their events.
    fn migrate_schema_1(&self) -> Result<(), StoreError> {
        let st = self.statements.clone();
        self.transaction(move |sql| {
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
                st.snapshot(&state.state);
                st.commit_within().map_err(|e| worker::Error::RustError(statements::error(e).0))?;
            }
            Ok(0)
        })
        .map(|_| self.later.set(true))
    }
}

/// The lowest row that can hold event `first`: a row begins at most
/// `MAX_ROW_EVENTS - 1` seqs before the first event it holds (the primary key
/// bounds the scan) and holds `seq..seq + n`.
fn lowest_row(first: Seq) -> u64 {
    // Never row `SNAPSHOT_ROW`: events start at 1.
    first.0.saturating_sub(MAX_ROW_EVENTS as u64 - 1).max(SNAPSHOT_ROW + 1)
}

/// Stage one write (its integers checked first: nothing is staged if one is past what storage takes).
fn stage(statements: &KeyStatements, write: Write) -> Result<(), StoreError> {
    match write {
        Write::Events { first, at, bodies, reuse } => {
            let (body, sizes) = RowFormat::pack(&bodies);
            let (seq, at, bytes, n) = (int(first.0)?, int(at)?, int(body.len() as u64)?, int(bodies.len() as u64)?);
            let reuse = reuse.map(|old| int(old.0)).transpose()?;
            statements.events(seq, at, &body, bytes, n, sizes.as_deref(), reuse);
        }
        Write::Snapshot(json) => statements.snapshot(&json),
        Write::Window(w) => statements.window(int(w.window)?, int(w.ord)?, f64::from(u8::from(w.dead)), &w.json),
        Write::ForgetWindow(window) => statements.forget_window(int(window)?),
        Write::Dedupe(d) => statements.dedupe(f64::from(d.slot), &d.key, int(d.at)?, &d.reply),
    }
    Ok(())
}

impl Store for SqlStore {
    fn load(&self) -> Result<Stored, StoreError> {
        if self.prepare()? {
            return Ok(Stored::default());
        }
        let st = &self.statements;
        let snapshot = st.snapshot_row().map_err(statements::error)?;
        let event_rows: Vec<EventSql> = answered(st.event_rows())?;
        let mut events = Vec::with_capacity(event_rows.len());
        for r in event_rows {
            let (first, n) = (Seq(unsigned(r.seq)), unsigned(r.n));
            events.extend(RowFormat::events(first, unsigned(r.at), n, unsigned(r.bytes), r.sizes.as_deref())?);
        }
        let (windows, dedupe): (Vec<WindowSql>, Vec<DedupeSql>) = if self.later.get() {
            (answered(st.windows())?, answered(st.dedupes())?)
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(Stored {
            snapshot,
            events,
            windows: windows
                .into_iter()
                .map(|w| WindowRow { window: unsigned(w.win), ord: unsigned(w.ord), dead: w.dead != 0.0, json: w.json })
                .collect(),
            dedupe: dedupe
                .into_iter()
                .map(|d| DedupeRow {
                    slot: u32::try_from(unsigned(d.slot)).unwrap_or(u32::MAX),
                    key: d.key,
                    at: unsigned(d.at),
                    reply: d.reply,
                })
                .collect(),
        })
    }

    fn commit(&self, writes: Vec<Write>) -> Result<u64, StoreError> {
        if writes.iter().any(|w| matches!(w, Write::Window(_) | Write::ForgetWindow(_) | Write::Dedupe(_))) {
            self.make_later_tables()?;
        }
        self.stage(writes)?;
        self.statements.commit().map(unsigned).map_err(statements::error)
    }

    fn bodies(&self, first: Seq, last: Seq, limit: u64) -> Result<Bodies, StoreError> {
        // Rows at either end may hold events outside the span, each less than
        // MAX_ROW_BYTES of them; rows written before any bound held one event.
        match self.span(first, last, limit, limit.saturating_add(2 * MAX_ROW_BYTES as u64))? {
            Some(bodies) => Ok(bodies),
            // Not reached while that holds; if it did not, the rows are read whole.
            None => {
                self.span(first, last, limit, u64::MAX)?.ok_or_else(|| store_error("event rows without their text"))
            }
        }
    }

    fn event_rows(&self) -> Result<u64, StoreError> {
        self.statements.event_row_count().map(unsigned).map_err(statements::error)
    }

    fn size(&self) -> u64 {
        self.sql.database_size() as u64
    }

    async fn erase(&self) -> Result<(), StoreError> {
        let storage = self.state.storage();
        storage.delete_alarm().await.map_err(store_error)?;
        storage.delete_all().await.map_err(store_error)?;
        self.later.set(false);
        Ok(())
    }
}
