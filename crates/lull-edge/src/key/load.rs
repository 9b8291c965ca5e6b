//! Loading a key: the newest snapshot restored, newer event rows replayed
//! through the (deterministic) engine, the backlog rebuilt from its rows,
//! schema-1 storage migrated, and a delivery cut short by a crash counted as
//! a failed attempt (see `STORAGE.md`).

use std::collections::{BTreeSet, HashMap};

use lull_core::{Backlog, DeadLetter, QueuedWindow, Reason};
use serde_json::json;

use super::memory::{Batch, Loaded, incarnation, unneeded_rows};
use super::rows::EventRows;
use super::state::{KeyState, SCHEMA, WindowTerms};
use super::{DEDUPE_SLOTS, KeyObject, json_error};
use crate::error::ApiError;
use crate::log::Fact;
use crate::names::{Key, key_label};
use crate::ports::{DedupeRow, Host, Outbound, Store};
use crate::queue::gate::Gates;
use crate::topic::{DEFAULT_RETENTION_MS, Topic};

impl<S: Store, H: Host, O: Outbound, G: Gates> KeyObject<S, H, O, G> {
    /// Load the key once per object lifetime. A key never written starts fresh
    /// from `new`; without it, there is nothing to load and `false` is returned.
    pub(super) async fn load(&self, new: Option<(&Topic, &Key)>) -> Result<bool, ApiError> {
        if self.loaded.borrow().is_some() {
            return Ok(true);
        }
        let stored = self.store.load()?;
        let Some(snapshot) = stored.snapshot else {
            let Some((topic, key)) = new else { return Ok(false) };
            if !stored.is_empty() {
                return Err(ApiError::Internal("rows without a snapshot".into()));
            }
            let random = self.host.random();
            let terms = WindowTerms::of(topic);
            let ks = KeyState::new(topic.policy.clone(), terms, random, incarnation(random.rotate_left(17)));
            *self.loaded.borrow_mut() = Some(Loaded {
                topic: topic.name.clone(),
                key: key.clone(),
                ks,
                persisted: false,
                armed: None,
                dead_told: 0,
                event_rows: EventRows::default(),
                superseded: Vec::new(),
                last_accepted: None,
                rows: BTreeSet::new(),
                next_ord: 1,
                dedupe: HashMap::new(),
                next_slot: 0,
                touched: self.host.now(),
                retention_ms: topic.retention_ms,
                log_keys: topic.log_keys,
                label: key_label(key.as_str(), topic.log_keys),
            });
            return Ok(true);
        };
        let restored = KeyState::restore(&snapshot).map_err(json_error)?;
        let mut ks = restored.state;
        let restored_touched = ks.touched_at;
        let through = ks.engine().last_seq();
        let open = ks.engine().open_window().map(|o| o.window);
        let mut rows = BTreeSet::new();
        let mut backlog = Backlog::default();
        let mut next_ord = 1;
        for row in &stored.windows {
            rows.insert(row.window);
            next_ord = next_ord.max(row.ord + 1);
            if row.dead {
                backlog.dead.push(serde_json::from_str::<DeadLetter>(&row.json).map_err(json_error)?);
                continue;
            }
            let queued: QueuedWindow = serde_json::from_str(&row.json).map_err(json_error)?;
            // A window queued by an event newer than the snapshot comes back
            // when that event replays: it filled up at its last event, or the
            // next event would have taken it past its bytes (the snapshot
            // still has it open).
            let requeued_by_replay = queued.span.last > through || open == Some(queued.window);
            if queued.reason == Reason::Replay || !requeued_by_replay {
                backlog.queued.push_back(queued);
            }
        }
        let migrating = restored.schema < SCHEMA;
        let inline = restored.inline_backlog;
        let mut batch = Batch::default();
        // Schema 1 kept the backlog inside the state: it becomes rows (below).
        let migrated = if migrating { inline.clone() } else { Backlog::default() };
        let mut full = inline;
        full.queued.extend(backlog.queued);
        full.dead.extend(backlog.dead);
        ks.restore_backlog(full);
        let mut last_accepted = None;
        for row in stored.events.iter().filter(|row| row.seq > through) {
            let accepted = ks.replay_event(row.at, row.bytes);
            if accepted.seq != row.seq {
                return Err(ApiError::Internal(format!("event row {} replayed as {}", row.seq.0, accepted.seq.0)));
            }
            last_accepted = Some(accepted);
        }
        // The next event may supersede the open window's last one, replayed or not.
        let last_accepted = ks
            .engine()
            .open_window()
            .map(|o| lull_core::Accepted { seq: o.span.last, window: o.window })
            .or(last_accepted);
        let (event_rows, superseded) = unneeded_rows(&stored.events, through, ks.live_spans());
        let key = Key::from_path_segment(&restored.key)?;
        let (dedupe, next_slot) =
            remembered(stored.dedupe, new.map(|(topic, _)| topic.dedupe_window_ms), self.host.now());
        let log_keys = new.is_some_and(|(topic, _)| topic.log_keys);
        let mut loaded = Loaded {
            topic: restored.topic,
            ks,
            persisted: true,
            armed: None,
            dead_told: 0,
            event_rows,
            superseded,
            last_accepted,
            rows,
            next_ord,
            dedupe,
            next_slot,
            touched: stored.events.iter().map(|row| row.at).fold(restored_touched, u64::max),
            retention_ms: new.map_or(DEFAULT_RETENTION_MS, |(topic, _)| topic.retention_ms),
            log_keys,
            label: key_label(key.as_str(), log_keys),
            key,
        };
        for q in &migrated.queued {
            loaded.backlog_row(q.window.0, false, serde_json::to_string(q).map_err(json_error)?, &mut batch);
        }
        for d in &migrated.dead {
            loaded.backlog_row(d.window.0, true, serde_json::to_string(d).map_err(json_error)?, &mut batch);
        }
        let now = self.host.now();
        let recovered = loaded.ks.recover(now);
        let changed = migrating || !recovered.is_empty();
        loaded.apply(recovered, &mut batch)?;
        // A loaded key always has its alarm (a recovered delivery's retry included).
        if let Some(at) = loaded.arm_earlier(now) {
            self.host.set_alarm(at).await?;
        }
        if changed {
            loaded.snapshot(&mut batch)?;
            let rows = self.store.commit(batch.writes)?;
            loaded.ks.io.rows_written += rows;
            if migrating {
                batch.logs.push(Fact::new("migrated", json!({"from_schema": restored.schema})));
            }
            self.committed(loaded.lines(&batch.logs));
        }
        *self.loaded.borrow_mut() = Some(loaded);
        Ok(true)
    }
}

/// The remembered producer keys, and the ring slot the next one takes. The
/// rows come in no fixed order and a key reused after its dedupe window has
/// two (the older one stale): they are read oldest first by the seq of the
/// event they answered (seqs only grow in a key's life; times can tie), so
/// the newest entry of a key wins and the slot after the newest is next.
/// Entries older than `window_ms` (when the topic is known) are dropped.
fn remembered(
    mut rows: Vec<DedupeRow>,
    window_ms: Option<u64>,
    now: u64,
) -> (HashMap<String, (u32, u64, String)>, u32) {
    let seq = |row: &DedupeRow| {
        serde_json::from_str::<serde_json::Value>(&row.reply).ok().and_then(|r| r["seq"].as_u64()).unwrap_or(0)
    };
    rows.sort_by_cached_key(|row| (seq(row), row.at, row.slot));
    let next_slot = rows.last().map_or(0, |row| (row.slot + 1) % DEDUPE_SLOTS);
    let fresh = |row: &DedupeRow| window_ms.is_none_or(|window| now.saturating_sub(row.at) < window);
    let dedupe = rows.into_iter().filter(fresh).map(|d| (d.key, (d.slot, d.at, d.reply))).collect();
    (dedupe, next_slot)
}
