//! The objects' statements, bound once per object: fixed texts the runtime's
//! statement cache knows by their string, values passed as plain arguments
//! (integers checked here, not value by value in JavaScript), every cursor
//! consumed on the JavaScript side. The key object's (`js/statements.mjs`):
//! what [`super::store::SqlStore`] runs on every event and every delivery,
//! writes staged and committed in one call, and the key's alarm, set without
//! awaiting its write (it rides the output gate). A topic gate's
//! (`js/gate-statements.mjs`): what [`super::gate_store::SqlGateStore`] runs
//! on every forward and for its dead letters.

use wasm_bindgen::prelude::*;

use crate::ports::StoreError;

#[wasm_bindgen(module = "/js/statements.mjs")]
extern "C" {
    /// `KeyStatements` over one object's `storage`.
    #[derive(Clone)]
    pub(super) type KeyStatements;

    /// The statements over `storage` (a `DurableObjectStorage`).
    #[wasm_bindgen(constructor)]
    pub(super) fn new(storage: &JsValue) -> KeyStatements;

    /// Stage an event row: new (`reuse` none), or in the place of the freed row `reuse`.
    #[wasm_bindgen(method)]
    pub(super) fn events(
        this: &KeyStatements,
        seq: f64,
        at: f64,
        body: &str,
        bytes: f64,
        n: f64,
        sizes: Option<&str>,
        reuse: Option<f64>,
    );

    /// Stage the snapshot (row 0).
    #[wasm_bindgen(method)]
    pub(super) fn snapshot(this: &KeyStatements, json: &str);

    /// Stage a backlog window.
    #[wasm_bindgen(method)]
    pub(super) fn window(this: &KeyStatements, win: f64, ord: f64, dead: f64, json: &str);

    /// Stage a window's removal.
    #[wasm_bindgen(method, js_name = forgetWindow)]
    pub(super) fn forget_window(this: &KeyStatements, win: f64);

    /// Stage a remembered producer key.
    #[wasm_bindgen(method)]
    pub(super) fn dedupe(this: &KeyStatements, slot: f64, key: &str, at: f64, reply: &str);

    /// Apply the staged writes, all or nothing (inside `transactionSync` if more than one): the rows written.
    #[wasm_bindgen(method, catch)]
    pub(super) fn commit(this: &KeyStatements) -> Result<f64, JsValue>;

    /// Drop the staged writes (a write that could not be staged whole stages nothing).
    #[wasm_bindgen(method)]
    pub(super) fn discard(this: &KeyStatements);

    /// Apply the staged writes inside a transaction already open: the rows written.
    #[wasm_bindgen(method, catch, js_name = commitWithin)]
    pub(super) fn commit_within(this: &KeyStatements) -> Result<f64, JsValue>;

    /// The snapshot's JSON, if there is one.
    #[wasm_bindgen(method, catch, js_name = snapshotRow)]
    pub(super) fn snapshot_row(this: &KeyStatements) -> Result<Option<String>, JsValue>;

    /// The event rows (texts left out), in seq order: `{seq, at, bytes, n, sizes}` each.
    #[wasm_bindgen(method, catch, js_name = eventRows)]
    pub(super) fn event_rows(this: &KeyStatements) -> Result<JsValue, JsValue>;

    /// The backlog windows, in order: `{win, ord, dead, json}` each.
    #[wasm_bindgen(method, catch)]
    pub(super) fn windows(this: &KeyStatements) -> Result<JsValue, JsValue>;

    /// The remembered producer keys: `{slot, key, at, reply}` each.
    #[wasm_bindgen(method, catch)]
    pub(super) fn dedupes(this: &KeyStatements) -> Result<JsValue, JsValue>;

    /// The rows holding events `first..=last` from row `lowest`, texts only if their bytes are at most `guard`.
    #[wasm_bindgen(method, catch)]
    pub(super) fn span(
        this: &KeyStatements,
        lowest: f64,
        last: f64,
        first: f64,
        guard: f64,
    ) -> Result<JsValue, JsValue>;

    /// How many event rows there are.
    #[wasm_bindgen(method, catch, js_name = eventRowCount)]
    pub(super) fn event_row_count(this: &KeyStatements) -> Result<f64, JsValue>;

    /// `storage.setAlarm(at)`, not awaited: the write rides the output gate.
    /// What it throws at once (an argument it refuses) is returned.
    #[wasm_bindgen(catch, js_name = setAlarm)]
    pub(super) fn set_alarm(storage: &JsValue, at: f64) -> Result<(), JsValue>;
}

#[wasm_bindgen(module = "/js/gate-statements.mjs")]
extern "C" {
    /// `GateStatements` over one topic gate's storage.
    pub(super) type GateStatements;

    /// The statements over `storage` (a `DurableObjectStorage`).
    #[wasm_bindgen(constructor)]
    pub(super) fn new(storage: &JsValue) -> GateStatements;

    /// The dead letters' totals: `{count, bytes}`, or undefined.
    #[wasm_bindgen(method, catch)]
    pub(super) fn totals(this: &GateStatements) -> Result<JsValue, JsValue>;

    /// Keep dead letters (a JSON array of `[key, attempts, first_failed_at,
    /// kept_at, outcome, bytes, message, legacy]`), all or nothing: the last one's row id.
    #[wasm_bindgen(method, catch, js_name = keepDead)]
    pub(super) fn keep_dead(this: &GateStatements, letters: &str) -> Result<f64, JsValue>;

    /// Up to `limit` dead letters after row `after`, in id order.
    #[wasm_bindgen(method, catch, js_name = deadPage)]
    pub(super) fn dead_page(this: &GateStatements, after: f64, limit: f64) -> Result<JsValue, JsValue>;

    /// Dead letter `id`, or undefined.
    #[wasm_bindgen(method, catch, js_name = deadLetter)]
    pub(super) fn dead_letter(this: &GateStatements, id: f64) -> Result<JsValue, JsValue>;

    /// Forget the dead letters `ids`, all or nothing: how many there were.
    #[wasm_bindgen(method, catch, js_name = forgetDead)]
    pub(super) fn forget_dead(this: &GateStatements, ids: &[f64]) -> Result<f64, JsValue>;

    /// The row id of the dead letter that keeps `key`, if one does.
    #[wasm_bindgen(method, catch, js_name = deadLetterOf)]
    pub(super) fn dead_letter_of(this: &GateStatements, key: &str) -> Result<Option<f64>, JsValue>;

    /// `key`'s failing forward: `{first_failed_at, attempt, outcome}`, or undefined.
    #[wasm_bindgen(method, catch)]
    pub(super) fn failing(this: &GateStatements, key: &str) -> Result<JsValue, JsValue>;

    /// `key` forwarded: it fails no more.
    #[wasm_bindgen(method, catch)]
    pub(super) fn forwarded(this: &GateStatements, key: &str) -> Result<(), JsValue>;

    /// `key`'s forward failed, failing since `first`; rows last failed before `stale` go.
    #[wasm_bindgen(method, catch)]
    pub(super) fn failed(
        this: &GateStatements,
        key: &str,
        first: f64,
        attempt: f64,
        outcome: &str,
        stale: f64,
    ) -> Result<(), JsValue>;

    /// A key that dead-lettered a window at `at`.
    #[wasm_bindgen(method, catch, js_name = recordDeadKey)]
    pub(super) fn record_dead_key(this: &GateStatements, key: &str, at: f64) -> Result<(), JsValue>;

    /// Up to `limit` keys that dead-lettered since `since`, after `after`: `[keys, how many more]`.
    #[wasm_bindgen(method, catch, js_name = deadKeys)]
    pub(super) fn dead_keys(this: &GateStatements, since: f64, after: &str, limit: f64) -> Result<JsValue, JsValue>;

    /// Forget `keys` (a JSON array of strings) as dead-lettering keys, all or nothing.
    #[wasm_bindgen(method, catch, js_name = forgetDeadKeys)]
    pub(super) fn forget_dead_keys(this: &GateStatements, keys: &str) -> Result<(), JsValue>;
}

/// The largest integer a JS number holds exactly (2^53 − 1): past it, SQLite would get another number.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// `n` as the JS number SQLite binds as an integer, or an error past 2^53 − 1.
pub(super) fn int(n: u64) -> Result<f64, StoreError> {
    if n <= MAX_SAFE_INTEGER {
        Ok(n as f64)
    } else {
        Err(StoreError(format!("{n} is past the integers storage takes (2^53 - 1)")))
    }
}

/// `n` as a value to look a row up by (an id, a time, a cursor from a
/// caller): past 2^53 − 1, where nothing is stored, the largest one storage
/// takes, so the lookup finds nothing rather than failing.
pub(super) fn lookup(n: u64) -> f64 {
    n.min(MAX_SAFE_INTEGER) as f64
}

/// The latest time the runtime's alarm takes (its clock counts nanoseconds
/// in 64 bits: unix ms 9,223,372,036,854, in the year 2262).
const LATEST_ALARM_MS: u64 = (i64::MAX / 1_000_000) as u64;

/// The key's alarm at `at` (unix ms), not awaited ([`set_alarm`]); a time past
/// [`LATEST_ALARM_MS`] (a retention of centuries) is set there.
pub(super) fn arm(storage: &JsValue, at: u64) -> Result<(), StoreError> {
    set_alarm(storage, at.min(LATEST_ALARM_MS) as f64).map_err(error)
}

/// A number SQLite answered, as a count or time (0 if it is not one).
pub(super) fn unsigned(n: f64) -> u64 {
    if n.is_finite() && n >= 0.0 { n as u64 } else { 0 }
}

/// What a statement answered (rows, a row or undefined), as a `T`.
pub(super) fn answered<T: serde::de::DeserializeOwned>(answer: Result<JsValue, JsValue>) -> Result<T, StoreError> {
    serde_wasm_bindgen::from_value(answer.map_err(error)?).map_err(store_error)
}

/// A Rust-side failure of storage (workers-rs' error, a row that would not
/// read) as a [`StoreError`]; a JS error is [`error`]'s.
pub(super) fn store_error(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

/// A JS error as a [`StoreError`].
pub(super) fn error(e: JsValue) -> StoreError {
    use wasm_bindgen::JsCast;
    let message = e.dyn_ref::<worker::js_sys::Error>().map(|e| String::from(e.message()));
    StoreError(message.or_else(|| e.as_string()).unwrap_or_else(|| format!("{e:?}")))
}
