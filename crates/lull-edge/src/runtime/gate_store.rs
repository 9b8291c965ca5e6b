//! [`GateStore`] over a `TopicGate`'s storage, as [`super::store`] is the
//! key's: the gate and its counters as one key-value entry, dead letters,
//! their totals and failing forwards as SQLite rows. Each write is one
//! statement or one `transactionSync`, so it applies all or nothing. The
//! first releases' list of dead letters is read once and deleted after the
//! object migrated it. The tables, what writes them and the migration:
//! `STORAGE.md` §6.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use worker::{SqlStorage, State};

use super::statements::{self, GateStatements, answered, int, lookup, store_error, unsigned};
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

/// [`GateStore`] over the object's storage: key-value for the gate, SQLite
/// for rows; what runs on every forward and for dead letters through
/// [`GateStatements`] (fixed texts, values as plain arguments).
pub(super) struct SqlGateStore {
    state: State,
    /// The gate's statements, bound once.
    statements: GateStatements,
}

impl SqlGateStore {
    /// The store of the object whose state is `state`.
    pub(super) fn new(state: State) -> Self {
        SqlGateStore { statements: GateStatements::new(&state.raw_storage()), state }
    }

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

#[derive(Deserialize)]
struct TotalsSql {
    count: f64,
    bytes: f64,
}

#[derive(Deserialize)]
struct DeadSql {
    id: f64,
    idempotency_key: String,
    attempts: f64,
    first_failed_at: f64,
    kept_at: f64,
    outcome: String,
    message: String,
    legacy: Option<f64>,
}

#[derive(Deserialize)]
struct FailingSql {
    first_failed_at: f64,
    attempt: f64,
    outcome: String,
}

impl DeadSql {
    fn row(self) -> DeadLetterRow {
        DeadLetterRow {
            id: unsigned(self.id),
            letter: NewDeadLetter {
                idempotency_key: self.idempotency_key,
                attempts: u32::try_from(unsigned(self.attempts)).unwrap_or(0),
                first_failed_at: unsigned(self.first_failed_at),
                kept_at: unsigned(self.kept_at),
                outcome: self.outcome,
                message: self.message,
                legacy: self.legacy.and_then(|l| u32::try_from(unsigned(l)).ok()),
            },
        }
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
        let totals: Option<TotalsSql> = answered(self.statements.totals())?;
        Ok(totals
            .map_or_else(DeadTotals::default, |t| DeadTotals { count: unsigned(t.count), bytes: unsigned(t.bytes) }))
    }

    fn keep_dead(&self, letters: &[NewDeadLetter]) -> Result<u64, StoreError> {
        let mut rows = Vec::with_capacity(letters.len());
        for l in letters {
            let legacy = l.legacy.map(|p| int(u64::from(p))).transpose()?;
            rows.push(serde_json::json!([
                l.idempotency_key,
                int(u64::from(l.attempts))?,
                int(l.first_failed_at)?,
                int(l.kept_at)?,
                l.outcome,
                int(l.message.len() as u64)?,
                l.message,
                legacy,
            ]));
        }
        let last = self.statements.keep_dead(&serde_json::Value::Array(rows).to_string()).map_err(statements::error)?;
        Ok(unsigned(last))
    }

    fn dead_page(&self, after: Option<u64>, limit: usize) -> Result<Vec<DeadLetterRow>, StoreError> {
        let rows: Vec<DeadSql> = answered(self.statements.dead_page(lookup(after.unwrap_or(0)), lookup(limit as u64)))?;
        Ok(rows.into_iter().map(DeadSql::row).collect())
    }

    fn dead_letter(&self, id: u64) -> Result<Option<DeadLetterRow>, StoreError> {
        let row: Option<DeadSql> = answered(self.statements.dead_letter(lookup(id)))?;
        Ok(row.map(DeadSql::row))
    }

    fn forget_dead(&self, ids: &[u64]) -> Result<u64, StoreError> {
        let ids: Vec<f64> = ids.iter().map(|&id| lookup(id)).collect();
        self.statements.forget_dead(&ids).map(unsigned).map_err(statements::error)
    }

    fn dead_letter_of(&self, idempotency_key: &str) -> Result<Option<u64>, StoreError> {
        let id = self.statements.dead_letter_of(idempotency_key).map_err(statements::error)?;
        Ok(id.map(unsigned))
    }

    fn failing(&self, idempotency_key: &str) -> Result<Option<Failing>, StoreError> {
        let row: Option<FailingSql> = answered(self.statements.failing(idempotency_key))?;
        Ok(row.map(|f| Failing {
            first_failed_at: unsigned(f.first_failed_at),
            attempt: u32::try_from(unsigned(f.attempt)).unwrap_or(0),
            outcome: f.outcome,
        }))
    }

    fn record_dead_key(&self, key: &str, at: u64) -> Result<(), StoreError> {
        self.statements.record_dead_key(key, int(at)?).map_err(statements::error)
    }

    fn dead_keys(&self, since: u64, after: Option<&str>, limit: usize) -> Result<(Vec<String>, u64), StoreError> {
        let (keys, more): (Vec<String>, f64) =
            answered(self.statements.dead_keys(lookup(since), after.unwrap_or(""), lookup(limit as u64)))?;
        Ok((keys, unsigned(more)))
    }

    fn forget_dead_keys(&self, keys: &[String]) -> Result<(), StoreError> {
        let keys = serde_json::to_string(keys).map_err(store_error)?;
        self.statements.forget_dead_keys(&keys).map_err(statements::error)
    }

    fn record_forward(&self, idempotency_key: &str, failed: Option<&Failing>, stale: u64) -> Result<(), StoreError> {
        let done = match failed {
            None => self.statements.forwarded(idempotency_key),
            Some(f) => self.statements.failed(
                idempotency_key,
                int(f.first_failed_at)?,
                f64::from(f.attempt),
                &f.outcome,
                int(stale)?,
            ),
        };
        done.map_err(statements::error)
    }
}
