//! The object's SQLite storage: one row per event (its payload, and the key's
//! state as of that event), and one state row written when anything other than
//! an event changes the key. Loading takes whichever state is newest, so an
//! event costs one row written.
//!
//! Calls are synchronous (SQLite runs in the object's thread); writes made
//! with no `await` between them commit together, and the runtime's output gate
//! holds the response until they are durable.

use lull_core::{Seq, Span};
use serde::Deserialize;
use worker::{SqlStorage, SqlStorageValue};

use crate::topic::PayloadMode;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS events (
  seq   INTEGER PRIMARY KEY,
  at    INTEGER NOT NULL,
  body  TEXT    NOT NULL,
  ver   INTEGER NOT NULL,
  state TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS key_state (
  id    INTEGER PRIMARY KEY CHECK (id = 0),
  ver   INTEGER NOT NULL,
  state TEXT    NOT NULL
);";

/// The newest state found in storage.
pub struct Stored {
    /// Its version (every write increments it).
    pub ver: u64,
    /// Its JSON.
    pub state: String,
}

#[derive(Deserialize)]
struct StateRow {
    ver: i64,
    state: String,
}

#[derive(Deserialize)]
struct Body {
    body: String,
}

fn int(n: u64) -> SqlStorageValue {
    SqlStorageValue::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// A count or version read back from SQLite (never negative).
fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The SQL side of one object.
pub struct Store(SqlStorage);

impl Store {
    /// The store, with its tables created if new.
    pub fn open(sql: SqlStorage) -> worker::Result<Store> {
        sql.exec(SCHEMA, None)?;
        Ok(Store(sql))
    }

    /// The newest state: the state row's, or the latest event row's if newer. `None` for a new key.
    pub fn load(&self) -> worker::Result<Option<Stored>> {
        let mut rows: Vec<StateRow> = self.0.exec("SELECT ver, state FROM key_state WHERE id = 0", None)?.to_array()?;
        let latest = self.0.exec("SELECT ver, state FROM events ORDER BY seq DESC LIMIT 1", None)?;
        rows.extend(latest.to_array::<StateRow>()?);
        Ok(rows.into_iter().max_by_key(|r| r.ver).map(|r| Stored { ver: unsigned(r.ver), state: r.state }))
    }

    /// Append one event's payload with the key's state after it. Returns rows written.
    pub fn insert_event(&self, seq: Seq, at: u64, body: &str, ver: u64, state: &str) -> worker::Result<u64> {
        let cursor = self.0.exec(
            "INSERT INTO events (seq, at, body, ver, state) VALUES (?, ?, ?, ?, ?)",
            vec![int(seq.0), int(at), body.into(), int(ver), state.into()],
        )?;
        Ok(cursor.rows_written() as u64)
    }

    /// Write the state row. Returns rows written.
    pub fn write_state(&self, ver: u64, state: &str) -> worker::Result<u64> {
        let cursor = self.0.exec(
            "INSERT INTO key_state (id, ver, state) VALUES (0, ?, ?)
             ON CONFLICT (id) DO UPDATE SET ver = excluded.ver, state = excluded.state",
            vec![int(ver), state.into()],
        )?;
        Ok(cursor.rows_written() as u64)
    }

    /// Delete a window's payload rows. Returns rows written.
    pub fn delete(&self, span: Span) -> worker::Result<u64> {
        let cursor =
            self.0.exec("DELETE FROM events WHERE seq BETWEEN ? AND ?", vec![int(span.first.0), int(span.last.0)])?;
        Ok(cursor.rows_written() as u64)
    }

    /// The payloads a delivery of `span` carries, in order.
    pub fn payloads(&self, span: Span, mode: PayloadMode) -> worker::Result<Vec<String>> {
        let (first, last) = match mode {
            PayloadMode::All => (span.first, span.last),
            PayloadMode::First => (span.first, span.first),
            PayloadMode::Last => (span.last, span.last),
        };
        let rows: Vec<Body> = self
            .0
            .exec("SELECT body FROM events WHERE seq BETWEEN ? AND ? ORDER BY seq", vec![int(first.0), int(last.0)])?
            .to_array()?;
        Ok(rows.into_iter().map(|r| r.body).collect())
    }

    /// Payload rows kept (open windows, runs, dead letters).
    pub fn stored_events(&self) -> worker::Result<u64> {
        #[derive(Deserialize)]
        struct Count {
            n: i64,
        }
        let count: Count = self.0.exec("SELECT count(*) AS n FROM events", None)?.one()?;
        Ok(unsigned(count.n))
    }
}
