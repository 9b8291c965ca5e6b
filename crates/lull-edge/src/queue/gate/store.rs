//! [`GateStore`]: what the gate object needs of its storage — the gate with
//! its counters ([`GateState`], one value) and rows, written synchronously as
//! SQLite is: one per kept dead letter ([`NewDeadLetter`], read back as a
//! [`DeadLetterRow`]), one per failing forward ([`Failing`]). The runtime's
//! `SqlGateStore` (`runtime/gate_store.rs`) implements it, as `SqlStore`
//! implements the key's [`crate::ports::Store`]; `tests/queue_faults.rs` with
//! a fake that fails at any call. The formats: `STORAGE.md` §6.

use std::collections::BTreeMap;
use std::future::Future;

use crate::ports::StoreError;
use crate::queue::gate::lease::Gate;
use crate::target::Target;

/// What the gate object stores after each change: the gate, its counters and the target's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateState {
    /// The topic's bound and the leases held.
    pub gate: Gate,
    /// The consumer's counters, by [`Counter::as_str`](crate::queue::gate::Counter::as_str).
    pub counters: BTreeMap<String, u64>,
    /// The topic's target: active, paused or disabled (absent before it existed: active).
    pub target: Target,
    /// The topic's counters for `GET /v1/metrics` (series → total, `crate::metrics`).
    pub metrics: BTreeMap<String, u64>,
}

/// A dead-lettered queue message to keep (one row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewDeadLetter {
    /// Its idempotency key.
    pub idempotency_key: String,
    /// Forwards made (the last attempt number).
    pub attempts: u32,
    /// When its first forward failed (unix ms).
    pub first_failed_at: u64,
    /// When it was kept (unix ms).
    pub kept_at: u64,
    /// The last forward's outcome (status, `timeout`, network error).
    pub outcome: String,
    /// The queue message's text, byte for byte.
    pub message: String,
    /// Its place in the first releases' stored list, when migrated from it:
    /// keeping the same place twice keeps one row.
    pub legacy: Option<u32>,
}

/// A kept dead letter: its id (in keeping order, never reused) and what was kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetterRow {
    /// The row's id.
    pub id: u64,
    /// What was kept.
    pub letter: NewDeadLetter,
}

/// How many dead letters are kept, and the bytes of their messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeadTotals {
    /// Rows.
    pub count: u64,
    /// Bytes of their messages.
    pub bytes: u64,
}

/// A forward that failed and may fail again: when it first failed, its last
/// attempt and outcome (so a dead letter says them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failing {
    /// When its first forward failed (unix ms).
    pub first_failed_at: u64,
    /// Its last attempt number.
    pub attempt: u32,
    /// The last forward's outcome.
    pub outcome: String,
}

/// The topic gate object's storage: the gate with its counters (one value),
/// and rows, written synchronously as SQLite is: one per kept dead letter,
/// one per failing forward (see `STORAGE.md`). Each method is all or nothing.
pub trait GateStore {
    /// The stored gate, if any.
    fn load(&self) -> impl Future<Output = Result<Option<GateState>, StoreError>>;
    /// Replace the stored gate.
    fn save(&self, state: &GateState) -> impl Future<Output = Result<(), StoreError>>;
    /// The first releases' dead letters (one stored list of message texts), if still there.
    fn legacy_dead_letters(&self) -> impl Future<Output = Result<Option<Vec<String>>, StoreError>>;
    /// Delete that list.
    fn forget_legacy_dead_letters(&self) -> impl Future<Output = Result<(), StoreError>>;
    /// Make the tables if missing.
    fn prepare(&self) -> Result<(), StoreError>;
    /// How many dead letters are kept, and their bytes.
    fn dead_totals(&self) -> Result<DeadTotals, StoreError>;
    /// Keep `letters` (a row each, all or none; a letter whose idempotency key
    /// — unless empty — or `legacy` place is already kept is skipped: one row
    /// per key, as a unique index keeps it), count them in the totals, and
    /// forget the failing forwards of their keys; the id of the row holding
    /// the last letter, new or already kept (0 if none).
    fn keep_dead(&self, letters: &[NewDeadLetter]) -> Result<u64, StoreError>;
    /// The id of the row keeping `idempotency_key` (never one for an empty key).
    fn dead_letter_of(&self, idempotency_key: &str) -> Result<Option<u64>, StoreError>;
    /// Kept dead letters with ids after `after`, in id order, at most `limit`.
    fn dead_page(&self, after: Option<u64>, limit: usize) -> Result<Vec<DeadLetterRow>, StoreError>;
    /// The kept dead letter `id`.
    fn dead_letter(&self, id: u64) -> Result<Option<DeadLetterRow>, StoreError>;
    /// Forget the dead letters `ids` (and take them off the totals); how many there were.
    fn forget_dead(&self, ids: &[u64]) -> Result<u64, StoreError>;
    /// The failing forward under `idempotency_key`, if any.
    fn failing(&self, idempotency_key: &str) -> Result<Option<Failing>, StoreError>;
    /// A forward of `idempotency_key` ended: `Some` records it failing (its
    /// first failure kept, the rest replaced; rows whose last failure is
    /// before `stale` are forgotten), `None` (it succeeded) forgets it.
    fn record_forward(&self, idempotency_key: &str, failed: Option<&Failing>, stale: u64) -> Result<(), StoreError>;
    /// Remember that key `key` of the topic holds dead letters, the newest
    /// dead-lettered at `at` (unix ms; a row per key, the later time kept).
    fn record_dead_key(&self, key: &str, at: u64) -> Result<(), StoreError>;
    /// Keys whose newest dead letter is at or after `since`, after `after` in
    /// key order, at most `limit`; and how many such keys come after those.
    fn dead_keys(&self, since: u64, after: Option<&str>, limit: usize) -> Result<(Vec<String>, u64), StoreError>;
    /// Forget `keys` (they hold no dead letter now).
    fn forget_dead_keys(&self, keys: &[String]) -> Result<(), StoreError>;
}
