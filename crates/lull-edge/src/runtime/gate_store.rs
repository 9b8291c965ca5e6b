//! [`GateStore`] over a `TopicGate`'s storage, as [`super::store`] is the
//! key's: the gate and its counters as one key-value entry, dead letters,
//! their totals and failing forwards as SQLite rows. Each write is one
//! statement or one `transactionSync`, so it applies all or nothing. The
//! first releases' list of dead letters is read once and deleted after the
//! object migrated it. The tables, what writes them and the migration:
//! `STORAGE.md` §6.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use worker::{SqlStorage, SqlStorageValue, State};

use super::sys::StateExt;
use crate::ports::StoreError;
use crate::queue::gate::{DeadLetterRow, DeadTotals, Failing, Gate, GateState, GateStore, NewDeadLetter};
use crate::target::Target;

/// Where the gate and its counters are stored (see `STORAGE.md`).
const GATE_KEY: &str = "gate";
/// Where the topic's target state is stored, written with the gate.
const TARGET_KEY: &str = "target";
/// Where the topic's counters are stored, written with the gate.
const METRICS_KEY: &str = "metrics";

/// The gate's values as one `put` writes them (the fields named as the keys above).
#[derive(Serialize)]
struct StoredGate<'a> {
    gate: (&'a Gate, &'a BTreeMap<String, u64>),
    target: &'a Target,
    metrics: &'a BTreeMap<String, u64>,
}
/// Where the first releases kept the dead letters (one list; migrated to rows, then deleted).
const LEGACY_DEAD_KEY: &str = "dead";

const TABLES: &str = "
CREATE TABLE IF NOT EXISTS dead_letters (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  idempotency_key TEXT    NOT NULL,
  attempts        INTEGER NOT NULL,
  first_failed_at INTEGER NOT NULL,
  kept_at         INTEGER NOT NULL,
  outcome         TEXT    NOT NULL,
  bytes           INTEGER NOT NULL,
  message         TEXT    NOT NULL,
  legacy          INTEGER UNIQUE
);
CREATE TABLE IF NOT EXISTS dead_totals (
  id    INTEGER PRIMARY KEY CHECK (id = 0),
  count INTEGER NOT NULL,
  bytes INTEGER NOT NULL
);
INSERT OR IGNORE INTO dead_totals (id, count, bytes) VALUES (0, 0, 0);
CREATE TABLE IF NOT EXISTS failing (
  key             TEXT    PRIMARY KEY,
  first_failed_at INTEGER NOT NULL,
  last_at         INTEGER NOT NULL,
  attempt         INTEGER NOT NULL,
  outcome         TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS failing_by_last ON failing (last_at);
CREATE TABLE IF NOT EXISTS dead_keys (
  key TEXT    PRIMARY KEY,
  at  INTEGER NOT NULL
);";

/// One row per idempotency key (an empty key, from an unreadable legacy
/// message, is not one): a dead letter delivered again is not kept twice.
const KEY_INDEX: &str = "CREATE UNIQUE INDEX IF NOT EXISTS dead_letters_by_key
  ON dead_letters (idempotency_key) WHERE idempotency_key <> ''";

/// Tables from before [`KEY_INDEX`] may hold a key twice: the oldest row stays.
const DEDUPE: &str = "DELETE FROM dead_letters WHERE idempotency_key <> '' AND id >
  (SELECT MIN(d.id) FROM dead_letters d WHERE d.idempotency_key = dead_letters.idempotency_key)";

/// Recount `dead_totals` from the rows: only after [`DEDUPE`], once per table
/// (every write changes the totals by what it wrote or deleted).
const RECOUNT: &str = "UPDATE dead_totals SET count = (SELECT COUNT(*) FROM dead_letters),
  bytes = (SELECT COALESCE(SUM(bytes), 0) FROM dead_letters) WHERE id = 0";

/// Add what one kept row holds to the totals.
const ADD_TOTALS: &str = "UPDATE dead_totals SET count = count + 1, bytes = bytes + ? WHERE id = 0";

/// Take rows that went off the totals.
const SUBTRACT_TOTALS: &str = "UPDATE dead_totals SET count = count - ?, bytes = bytes - ? WHERE id = 0";

/// [`GateStore`] over the object's storage: key-value for the gate, SQLite for rows.
pub(super) struct SqlGateStore {
    state: State,
}

impl SqlGateStore {
    /// The store of the object whose state is `state`.
    pub(super) fn new(state: State) -> Self {
        SqlGateStore { state }
    }
}

fn store_error(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

fn int(n: u64) -> SqlStorageValue {
    SqlStorageValue::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

#[derive(Deserialize)]
struct KeySql {
    key: String,
}

#[derive(Deserialize)]
struct CountSql {
    n: i64,
}

#[derive(Deserialize)]
struct TotalsSql {
    count: i64,
    bytes: i64,
}

#[derive(Deserialize)]
struct DeadSql {
    id: i64,
    idempotency_key: String,
    attempts: i64,
    first_failed_at: i64,
    kept_at: i64,
    outcome: String,
    message: String,
    legacy: Option<i64>,
}

#[derive(Deserialize)]
struct FailingSql {
    first_failed_at: i64,
    attempt: i64,
    outcome: String,
}

#[derive(Deserialize)]
struct IdSql {
    id: i64,
}

#[derive(Deserialize)]
struct BytesSql {
    bytes: i64,
}

impl DeadSql {
    fn row(self) -> DeadLetterRow {
        DeadLetterRow {
            id: unsigned(self.id),
            letter: NewDeadLetter {
                idempotency_key: self.idempotency_key,
                attempts: u32::try_from(self.attempts).unwrap_or(0),
                first_failed_at: unsigned(self.first_failed_at),
                kept_at: unsigned(self.kept_at),
                outcome: self.outcome,
                message: self.message,
                legacy: self.legacy.and_then(|l| u32::try_from(l).ok()),
            },
        }
    }
}

/// The row keeping a key (through [`KEY_INDEX`]: its condition is repeated so SQLite uses it).
const KEPT_BY_KEY: &str = "SELECT id FROM dead_letters WHERE idempotency_key = ? AND idempotency_key <> ''";

const DEAD_COLUMNS: &str = "id, idempotency_key, attempts, first_failed_at, kept_at, outcome, message, legacy";

impl SqlGateStore {
    fn sql(&self) -> SqlStorage {
        self.state.storage().sql()
    }

    /// Run `f` inside `storage.transactionSync`: its statements apply all or nothing.
    fn transaction(&self, f: impl FnOnce(&SqlStorage) -> worker::Result<u64> + 'static) -> Result<u64, StoreError> {
        let sql = self.sql();
        let done = self.state.transaction_sync(move || f(&sql).map(|n| n as f64).map_err(|e| e.to_string()));
        done.map(|n| n as u64).map_err(store_error)
    }
}

impl GateStore for SqlGateStore {
    async fn load(&self) -> Result<Option<GateState>, StoreError> {
        let storage = self.state.storage();
        let stored: Option<(Gate, BTreeMap<String, u64>)> = storage.get(GATE_KEY).await.map_err(store_error)?;
        let target: Option<Target> = storage.get(TARGET_KEY).await.map_err(store_error)?;
        let metrics: Option<BTreeMap<String, u64>> = storage.get(METRICS_KEY).await.map_err(store_error)?;
        Ok(stored.map(|(gate, counters)| GateState {
            gate,
            counters,
            target: target.unwrap_or_default(),
            metrics: metrics.unwrap_or_default(),
        }))
    }

    async fn save(&self, state: &GateState) -> Result<(), StoreError> {
        // Both in one put: all or nothing.
        let all = StoredGate { gate: (&state.gate, &state.counters), target: &state.target, metrics: &state.metrics };
        self.state.storage().put_multiple(all).await.map_err(store_error)
    }

    async fn legacy_dead_letters(&self) -> Result<Option<Vec<String>>, StoreError> {
        self.state.storage().get(LEGACY_DEAD_KEY).await.map_err(store_error)
    }

    async fn forget_legacy_dead_letters(&self) -> Result<(), StoreError> {
        self.state.storage().delete(LEGACY_DEAD_KEY).await.map(drop).map_err(store_error)
    }

    fn prepare(&self) -> Result<(), StoreError> {
        let sql = self.sql();
        sql.exec(TABLES, None).map_err(store_error)?;
        // Made at once where no key is kept twice (a no-op once it exists) …
        if sql.exec(KEY_INDEX, None).is_err() {
            // … else the table predates it: drop the later copies, recount, then make it.
            self.transaction(|sql| {
                sql.exec(DEDUPE, None)?;
                sql.exec(RECOUNT, None)?;
                sql.exec(KEY_INDEX, None)?;
                Ok(0)
            })?;
        }
        Ok(())
    }

    fn dead_totals(&self) -> Result<DeadTotals, StoreError> {
        let rows: Vec<TotalsSql> = self
            .sql()
            .exec("SELECT count, bytes FROM dead_totals WHERE id = 0", None)
            .and_then(|c| c.to_array())
            .map_err(store_error)?;
        Ok(rows
            .first()
            .map_or_else(DeadTotals::default, |t| DeadTotals { count: unsigned(t.count), bytes: unsigned(t.bytes) }))
    }

    fn keep_dead(&self, letters: &[NewDeadLetter]) -> Result<u64, StoreError> {
        let letters = letters.to_vec();
        self.transaction(move |sql| {
            let mut last = 0;
            for l in letters {
                let legacy = l.legacy.map_or(SqlStorageValue::Null, |p| int(u64::from(p)));
                let bytes = l.message.len() as u64;
                let inserted: Vec<IdSql> = sql
                    .exec(
                        "INSERT INTO dead_letters
                     (idempotency_key, attempts, first_failed_at, kept_at, outcome, bytes, message, legacy)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
                        vec![
                            l.idempotency_key.clone().into(),
                            int(u64::from(l.attempts)),
                            int(l.first_failed_at),
                            int(l.kept_at),
                            l.outcome.into(),
                            int(bytes),
                            l.message.into(),
                            legacy,
                        ],
                    )?
                    .to_array()?;
                if let Some(row) = inserted.first() {
                    last = unsigned(row.id);
                    sql.exec(ADD_TOTALS, vec![int(bytes)])?;
                } else {
                    // Kept already (its key or its legacy place): that row.
                    let kept: Vec<IdSql> = sql.exec(KEPT_BY_KEY, vec![l.idempotency_key.clone().into()])?.to_array()?;
                    last = kept.first().map_or(last, |r| unsigned(r.id));
                }
                sql.exec("DELETE FROM failing WHERE key = ?", vec![l.idempotency_key.into()])?;
            }
            Ok(last)
        })
    }

    fn dead_page(&self, after: Option<u64>, limit: usize) -> Result<Vec<DeadLetterRow>, StoreError> {
        let query = format!("SELECT {DEAD_COLUMNS} FROM dead_letters WHERE id > ? ORDER BY id LIMIT ?");
        let rows: Vec<DeadSql> = self
            .sql()
            .exec(&query, vec![int(after.unwrap_or(0)), int(limit as u64)])
            .and_then(|c| c.to_array())
            .map_err(store_error)?;
        Ok(rows.into_iter().map(DeadSql::row).collect())
    }

    fn dead_letter(&self, id: u64) -> Result<Option<DeadLetterRow>, StoreError> {
        let query = format!("SELECT {DEAD_COLUMNS} FROM dead_letters WHERE id = ?");
        let rows: Vec<DeadSql> =
            self.sql().exec(&query, vec![int(id)]).and_then(|c| c.to_array()).map_err(store_error)?;
        Ok(rows.into_iter().next().map(DeadSql::row))
    }

    fn forget_dead(&self, ids: &[u64]) -> Result<u64, StoreError> {
        let ids = ids.to_vec();
        self.transaction(move |sql| {
            let (mut gone, mut bytes) = (0, 0);
            for id in ids {
                let rows: Vec<BytesSql> =
                    sql.exec("DELETE FROM dead_letters WHERE id = ? RETURNING bytes", vec![int(id)])?.to_array()?;
                gone += rows.len() as u64;
                bytes += rows.iter().map(|r| unsigned(r.bytes)).sum::<u64>();
            }
            if gone > 0 {
                sql.exec(SUBTRACT_TOTALS, vec![int(gone), int(bytes)])?;
            }
            Ok(gone)
        })
    }

    fn dead_letter_of(&self, idempotency_key: &str) -> Result<Option<u64>, StoreError> {
        let rows: Vec<IdSql> = self
            .sql()
            .exec(KEPT_BY_KEY, vec![idempotency_key.into()])
            .and_then(|c| c.to_array())
            .map_err(store_error)?;
        Ok(rows.first().map(|r| unsigned(r.id)))
    }

    fn failing(&self, idempotency_key: &str) -> Result<Option<Failing>, StoreError> {
        let rows: Vec<FailingSql> = self
            .sql()
            .exec("SELECT first_failed_at, attempt, outcome FROM failing WHERE key = ?", vec![idempotency_key.into()])
            .and_then(|c| c.to_array())
            .map_err(store_error)?;
        Ok(rows.into_iter().next().map(|f| Failing {
            first_failed_at: unsigned(f.first_failed_at),
            attempt: u32::try_from(f.attempt).unwrap_or(0),
            outcome: f.outcome,
        }))
    }

    fn record_dead_key(&self, key: &str, at: u64) -> Result<(), StoreError> {
        self.sql()
            .exec(
                "INSERT INTO dead_keys (key, at) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET at = MAX(at, excluded.at)",
                vec![key.into(), int(at)],
            )
            .map(drop)
            .map_err(store_error)
    }

    fn dead_keys(&self, since: u64, after: Option<&str>, limit: usize) -> Result<(Vec<String>, u64), StoreError> {
        let after = after.unwrap_or("").to_string();
        let rows: Vec<KeySql> = self
            .sql()
            .exec(
                "SELECT key FROM dead_keys WHERE at >= ? AND key > ? ORDER BY key LIMIT ?",
                vec![int(since), after.clone().into(), int(limit as u64)],
            )
            .and_then(|c| c.to_array())
            .map_err(store_error)?;
        let keys: Vec<String> = rows.into_iter().map(|r| r.key).collect();
        let last = keys.last().cloned().unwrap_or(after);
        let more: Vec<CountSql> = self
            .sql()
            .exec("SELECT COUNT(*) AS n FROM dead_keys WHERE at >= ? AND key > ?", vec![int(since), last.into()])
            .and_then(|c| c.to_array())
            .map_err(store_error)?;
        Ok((keys, more.first().map_or(0, |c| unsigned(c.n))))
    }

    fn forget_dead_keys(&self, keys: &[String]) -> Result<(), StoreError> {
        let keys = keys.to_vec();
        self.transaction(move |sql| {
            for key in keys {
                sql.exec("DELETE FROM dead_keys WHERE key = ?", vec![key.into()])?;
            }
            Ok(0)
        })
        .map(drop)
    }

    fn record_forward(&self, idempotency_key: &str, failed: Option<&Failing>, stale: u64) -> Result<(), StoreError> {
        let key = idempotency_key.to_string();
        let failed = failed.cloned();
        self.transaction(move |sql| {
            match failed {
                None => drop(sql.exec("DELETE FROM failing WHERE key = ?", vec![key.into()])?),
                Some(f) => {
                    sql.exec(
                        "INSERT INTO failing (key, first_failed_at, last_at, attempt, outcome) VALUES (?, ?, ?, ?, ?)
                         ON CONFLICT (key) DO UPDATE SET last_at = excluded.last_at, attempt = excluded.attempt,
                           outcome = excluded.outcome",
                        vec![
                            key.into(),
                            int(f.first_failed_at),
                            int(f.first_failed_at),
                            int(u64::from(f.attempt)),
                            f.outcome.into(),
                        ],
                    )?;
                    sql.exec("DELETE FROM failing WHERE last_at < ?", vec![int(stale)])?;
                }
            }
            Ok(0)
        })
        .map(drop)
    }
}
