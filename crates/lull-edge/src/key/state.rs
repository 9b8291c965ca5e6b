//! What one key keeps and decides, without I/O: the core [`Debouncer`], the
//! fires waiting for the object's alarm (the *outbox*: every delivery runs in
//! `alarm()`, never inside a producer's request), the delivery in progress,
//! and counters. Each operation returns the [`Effect`]s storage must reflect.
//!
//! Its serialised form (with the engine's backlog taken out, see
//! [`KeyState::snapshot`]) is the key's fixed-size snapshot. Its fields and schema
//! versions: `STORAGE.md`.

use std::collections::{BTreeMap, VecDeque};

use lull_core::{
    Accepted, Action, Backlog, DeadLetter, DeadLetterError, Debouncer, DropCause, Fire, Policy, QueuedWindow, Reason,
    RunError, Span, WindowId,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::log::Fact;
use crate::metrics::{Point, What};
use crate::topic::{PayloadMode, Topic};

/// What a key's windows keep beyond the engine's policy, from its topic:
/// which events' rows a delivery needs, and a window's bound in bytes. Set
/// with the policy ([`KeyState::set_policy`]), kept in the snapshot, so a
/// load replays events under the terms they were accepted with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WindowTerms {
    /// Which events of a window its delivery carries (and so keeps the rows of).
    pub keep: PayloadMode,
    /// Most bytes of events a window holds: the event that would pass it opens the next.
    pub max_bytes: u64,
}

impl WindowTerms {
    /// The terms `topic` sets.
    pub(crate) fn of(topic: &Topic) -> WindowTerms {
        WindowTerms { keep: topic.payload, max_bytes: topic.max_window_bytes }
    }
}

/// Storage work counted for the status and the benchmark, as SQLite reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Io {
    /// Rows written (events, snapshots, backlog rows), as storage counted them.
    pub rows_written: u64,
    /// Of those, rows written while accepting events.
    pub accept_rows_written: u64,
    /// `setAlarm` calls (billed like a row written).
    pub alarms_set: u64,
    /// Requests and alarms the object served (each billed as a request), the one asking included.
    #[serde(default)]
    pub requests: u64,
}

/// The outcome of the last delivery attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LastDelivery {
    /// The window delivered.
    pub window: WindowId,
    /// The attempt number.
    pub attempt: u32,
    /// When it ended (unix ms).
    pub at: u64,
    /// Whether the target answered 2xx.
    pub ok: bool,
    /// The HTTP status, or what went wrong (`timeout`, `interrupted`, a network error).
    pub outcome: String,
}

/// What storage must reflect after an operation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Effect {
    /// A window waits for the run slot: it gets a backlog row.
    Queued(QueuedWindow),
    /// A window was dead-lettered: its backlog row says so.
    DeadLettered(DeadLetter),
    /// A window left the backlog (it fired, was dropped or discarded).
    Left(WindowId),
    /// These events are finished (delivered, dropped, discarded): their rows may be reused.
    Finished(Span),
    /// Log one fact (the key's object adds its topic and key).
    Log(Fact),
    /// Count one thing (a data point, and the isolate's sums), once committed.
    Count(Counted),
    /// The state changed in a way replaying event rows would not redo (a
    /// deadline was served): the snapshot must be written with the operation.
    Unreplayable,
}

/// Something a key counts: a window fired, a delivery attempt, a dead letter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Counted {
    /// What.
    pub what: What,
    /// How it went (an attempt's class).
    pub outcome: &'static str,
    /// Why (a fire's reason).
    pub reason: &'static str,
    /// How long it took (ms): an attempt's.
    pub latency_ms: u64,
}

impl Counted {
    /// One of `what`, as `topic`'s data point.
    pub(crate) fn point(&self, topic: &str) -> Point {
        Point {
            reason: self.reason.to_string(),
            latency_ms: self.latency_ms as f64,
            ..Point::new(topic, self.what, self.outcome)
        }
    }
}

/// The snapshot's schema version: 2 keeps the backlog in rows of its own
/// (1, the first release, kept it inside the state).
pub(crate) const SCHEMA: u32 = 2;

/// One key's state: the engine, the fires waiting for the alarm, the delivery
/// in progress, counters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct KeyState {
    engine: Debouncer,
    outbox: VecDeque<Fire>,
    /// A delivery begun and not yet ended: (window, attempt). Found at load, it
    /// was cut short by a crash, and counts as a failed attempt.
    #[serde(default)]
    started: Option<(WindowId, u32)>,
    /// Names this life of the key in idempotency keys (absent for keys
    /// created before it existed; they keep their old keys).
    #[serde(default)]
    incarnation: Option<String>,
    /// The last delivery attempt.
    pub last_delivery: Option<LastDelivery>,
    /// Storage counters.
    pub io: Io,
    /// When the last snapshot was written (unix ms): with the newest event's
    /// time, when the key was last active.
    #[serde(default)]
    pub touched_at: u64,
    /// The topic's window terms (absent before they existed: every row kept, no byte bound).
    #[serde(default)]
    terms: Option<WindowTerms>,
    /// The open window and the bytes of its events so far.
    #[serde(default)]
    open_bytes: Option<(WindowId, u64)>,
    /// The run whose tries the target has throttled, and since when (unix
    /// ms): past the topic's `max_throttled_ms`, a throttled try counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    throttled_since: Option<(WindowId, u64)>,
    /// The last window counted as fired (a deferred run fires again: not counted twice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    counted_fire: Option<WindowId>,
}

/// The stored snapshot: the key's names and state.
#[derive(Serialize, Deserialize)]
struct Snapshot<S> {
    /// [`SCHEMA`]; absent in schema 1.
    #[serde(default = "schema_one")]
    schema: u32,
    topic: String,
    /// Percent-encoded, as in paths.
    key: String,
    state: S,
}

fn schema_one() -> u32 {
    1
}

/// A snapshot read back: names, state, backlog, schema.
pub(crate) struct Restored {
    /// The topic.
    pub topic: String,
    /// The key, percent-encoded.
    pub key: String,
    /// The state, its backlog taken out.
    pub state: KeyState,
    /// A schema-1 snapshot's backlog, which lived inside it (empty for schema 2:
    /// its backlog is in rows).
    pub inline_backlog: Backlog,
    /// The schema it was written with.
    pub schema: u32,
}

impl KeyState {
    /// A fresh key running `policy`; `seed` feeds the retry jitter; `incarnation` names this life of the key.
    pub(crate) fn new(policy: Policy, terms: WindowTerms, seed: u64, incarnation: String) -> Self {
        KeyState {
            terms: Some(terms),
            open_bytes: None,
            engine: Debouncer::new(policy, seed),
            outbox: VecDeque::new(),
            started: None,
            incarnation: Some(incarnation),
            last_delivery: None,
            io: Io::default(),
            touched_at: 0,
            throttled_since: None,
            counted_fire: None,
        }
    }

    /// The snapshot JSON: names and state, without the backlog (which lives in rows).
    pub(crate) fn snapshot(&mut self, topic: &str, key: &str) -> Result<String, serde_json::Error> {
        let backlog = self.engine.take_backlog();
        let json =
            serde_json::to_string(&Snapshot { schema: SCHEMA, topic: topic.into(), key: key.into(), state: &*self });
        self.engine.restore_backlog(backlog);
        json
    }

    /// Read a snapshot of either schema.
    pub(crate) fn restore(json: &str) -> Result<Restored, serde_json::Error> {
        let Snapshot { schema, topic, key, state } = serde_json::from_str::<Snapshot<KeyState>>(json)?;
        let mut state = state;
        let inline_backlog = state.engine.take_backlog();
        Ok(Restored { topic, key, state, inline_backlog, schema })
    }

    /// Put the backlog (read from rows) back under the engine.
    pub(crate) fn restore_backlog(&mut self, backlog: Backlog) {
        self.engine.restore_backlog(backlog);
    }

    /// The engine (read-only).
    pub(crate) fn engine(&self) -> &Debouncer {
        &self.engine
    }

    /// The name of this life of the key, if it has one.
    pub(crate) fn incarnation(&self) -> Option<&str> {
        self.incarnation.as_deref()
    }

    /// Accept one event of `bytes` at `now`.
    pub(crate) fn accept(&mut self, now: u64, bytes: u64) -> (Accepted, Vec<Effect>) {
        let accepted = self.take(now, bytes);
        let mut effects =
            vec![Effect::Log(Fact::new("accept", json!({"window": accepted.window, "seq": accepted.seq})))];
        self.drain(&mut effects);
        (accepted, effects)
    }

    /// Replay a stored event through the engine while loading: no effects
    /// but the engine's (fires go to the outbox again).
    pub(crate) fn replay_event(&mut self, at: u64, bytes: u64) -> Accepted {
        let accepted = self.take(at, bytes);
        let mut ignored = Vec::new();
        self.drain(&mut ignored);
        accepted
    }

    /// The alarm went off at `now`. Serving a deadline changes the state even
    /// when nothing fires (a spent timer lets a pending policy in, and an event
    /// at that same instant then behaves differently), and a load replays
    /// events only: such a change asks for the snapshot ([`Effect::Unreplayable`]).
    pub(crate) fn timeout(&mut self, now: u64) -> Vec<Effect> {
        let due = self.engine.next_deadline().is_some_and(|at| at <= now);
        self.engine.handle_timeout(now);
        let mut effects = self.effects();
        if due {
            effects.push(Effect::Unreplayable);
        }
        effects
    }

    /// One event into the engine: if it would take the open window past its
    /// byte bound, that window fires first (`full`) and the event opens the
    /// next. The bound is on what a delivery carries: every event under `all`;
    /// under `last` and `first` one event, which always fits.
    fn take(&mut self, now: u64, bytes: u64) -> Accepted {
        let bytes = if self.keeps() == PayloadMode::All { bytes } else { 0 };
        let max_bytes = self.terms.map_or(u64::MAX, |t| t.max_bytes);
        if let (Some(open), Some((window, held))) = (self.engine.open_window(), self.open_bytes)
            && open.window == window
            && held.saturating_add(bytes) > max_bytes
        {
            self.engine.seal(now);
        }
        let accepted = self.engine.event(now);
        self.open_bytes = match self.open_bytes {
            Some((window, held)) if window == accepted.window => Some((window, held.saturating_add(bytes))),
            _ => Some((accepted.window, bytes)),
        };
        accepted
    }

    /// Whether this key runs `topic`'s policy (or is about to: a pending change) and window terms.
    pub(crate) fn follows(&self, topic: &Topic) -> bool {
        self.target_policy() == &topic.policy && self.terms == Some(WindowTerms::of(topic))
    }

    /// Which events of a window its delivery carries (every one for keys from before window terms).
    pub(crate) fn keeps(&self) -> PayloadMode {
        self.terms.map_or(PayloadMode::All, |t| t.keep)
    }

    /// The policy this key runs, or the one it is about to run.
    fn target_policy(&self) -> &Policy {
        self.engine.pending_policy().unwrap_or(self.engine.policy())
    }

    /// The topic's policy changed: it runs from the key's next burst (see
    /// [`Debouncer::set_policy`]); a delivery in flight keeps its retry.
    /// The window terms apply at once: the byte bound from the next event, the
    /// rows kept from the next event (a window formed under `last` or `first`
    /// that is delivered under `all` carries the events it kept).
    pub(crate) fn set_policy(&mut self, topic: &Topic, now: u64) -> Vec<Effect> {
        self.terms = Some(WindowTerms::of(topic));
        self.engine.set_policy(topic.policy.clone(), now);
        let pending = self.engine.pending_policy().is_some();
        let line = Fact::new("policy_changed", json!({"pending": pending, "policy": self.target_policy()}));
        let mut effects = vec![Effect::Log(line)];
        self.drain(&mut effects);
        effects
    }

    /// Fire the open window as soon as possible.
    pub(crate) fn flush(&mut self, now: u64) -> Vec<Effect> {
        self.engine.flush(now);
        self.effects()
    }

    /// Drop the open window (and queued, never-fired windows); their rows go.
    pub(crate) fn cancel(&mut self, now: u64) -> Vec<Effect> {
        self.engine.cancel(now);
        self.effects()
    }

    /// Deliver a dead-lettered window again.
    pub(crate) fn replay(&mut self, window: WindowId, now: u64) -> Result<Vec<Effect>, DeadLetterError> {
        self.engine.replay(window, now)?;
        Ok(self.effects())
    }

    /// Forget a dead letter for good; its rows go.
    pub(crate) fn discard(&mut self, window: WindowId) -> Result<Vec<Effect>, DeadLetterError> {
        let letter = self.engine.discard(window)?;
        Ok(vec![
            Effect::Log(Fact::new("discard", json!({"window": window, "count": letter.span.count()}))),
            Effect::Left(window),
            Effect::Finished(letter.span),
        ])
    }

    /// The next fire to deliver, taken out of the outbox and marked as begun.
    /// A fire the engine no longer has in flight is dropped, never sent.
    pub(crate) fn begin_delivery(&mut self) -> (Option<Fire>, Vec<Effect>) {
        let mut effects = Vec::new();
        while let Some(fire) = self.outbox.pop_front() {
            if self.is_current(&fire) {
                self.started = Some((fire.window, fire.attempt));
                return (Some(fire), effects);
            }
            emit(&mut effects, "stale_fire", json!({"window": fire.window, "attempt": fire.attempt}));
        }
        (None, effects)
    }

    /// Whether the engine still has `fire` in flight (else it is stale, never sent).
    fn is_current(&self, fire: &Fire) -> bool {
        let run = self.engine.run();
        run.is_some_and(|r| r.window == fire.window && r.attempt == fire.attempt && r.retry_at.is_none())
    }

    /// The next fire the alarm would deliver, if one is due (not taken); the
    /// stale ones before it are dropped, never sent (as [`KeyState::begin_delivery`] does).
    pub(crate) fn due(&mut self) -> (Option<Fire>, Vec<Effect>) {
        let mut effects = Vec::new();
        while let Some(fire) = self.outbox.front().copied() {
            if self.is_current(&fire) {
                return (Some(fire), effects);
            }
            self.outbox.pop_front();
            emit(&mut effects, "stale_fire", json!({"window": fire.window, "attempt": fire.attempt}));
        }
        (None, effects)
    }

    /// The target holds deliveries until `until`: `fire` (the next due, not
    /// begun) goes then, as the same attempt.
    pub(crate) fn hold(&mut self, fire: &Fire, now: u64, until: u64) -> Result<Vec<Effect>, RunError> {
        self.engine.run_deferred(fire.window, now, until)?;
        self.outbox.retain(|f| !(f.window == fire.window && f.attempt == fire.attempt));
        let mut effects = Vec::new();
        emit(&mut effects, "held", json!({"window": fire.window, "attempt": fire.attempt, "until": until}));
        self.drain(&mut effects);
        Ok(effects)
    }

    /// The target throttled the delivery of `fire` (`outcome`): it goes again
    /// at `until` as the same attempt, unless its tries have been throttled
    /// for `max_throttled_ms` already: then this one counts as failed.
    pub(crate) fn throttled(
        &mut self,
        fire: &Fire,
        outcome: LastDelivery,
        until: u64,
        max_throttled_ms: u64,
    ) -> Result<Vec<Effect>, RunError> {
        let now = outcome.at;
        let since = match self.throttled_since {
            Some((window, since)) if window == fire.window => since,
            _ => now,
        };
        if now.saturating_sub(since) >= max_throttled_ms {
            // Counted as failed; later throttled tries of the window count too.
            let effects = self.delivered(fire, outcome)?;
            if self.engine.run().is_some_and(|r| r.window == fire.window) {
                self.throttled_since = Some((fire.window, since));
            }
            return Ok(effects);
        }
        self.engine.run_deferred(fire.window, now, until)?;
        self.started = None;
        self.throttled_since = Some((fire.window, since));
        let mut fact = fired("deliver", fire);
        fact.fields.extend([
            ("ok".into(), false.into()),
            ("outcome".into(), outcome.outcome.as_str().into()),
            ("at".into(), now.into()),
            ("ms".into(), now.saturating_sub(fire.at).into()),
            ("throttled_until".into(), until.into()),
        ]);
        let mut effects = vec![Effect::Log(fact)];
        self.last_delivery = Some(outcome);
        self.drain(&mut effects);
        Ok(effects)
    }

    /// The delivery of `fire` ended at `outcome.at`.
    pub(crate) fn delivered(&mut self, fire: &Fire, outcome: LastDelivery) -> Result<Vec<Effect>, RunError> {
        let now = outcome.at;
        self.started = None;
        self.throttled_since = None;
        let mut fact = fired("deliver", fire);
        fact.fields.extend([
            ("ok".into(), outcome.ok.into()),
            ("outcome".into(), outcome.outcome.as_str().into()),
            ("at".into(), now.into()),
            ("ms".into(), now.saturating_sub(fire.at).into()),
        ]);
        if outcome.ok {
            self.engine.run_succeeded(fire.window, now)?;
        } else {
            self.engine.run_failed(fire.window, now)?;
        }
        let mut effects = vec![Effect::Log(fact)];
        if outcome.ok {
            effects.push(Effect::Finished(fire.span));
        }
        self.last_delivery = Some(outcome);
        self.drain(&mut effects);
        Ok(effects)
    }

    /// A delivery found begun at load was cut short (the object stopped
    /// mid-delivery): it counts as a failed attempt. Nothing if none was.
    pub(crate) fn recover(&mut self, now: u64) -> Vec<Effect> {
        let Some((window, attempt)) = self.started.take() else { return Vec::new() };
        let Some(run) = self.engine.run().copied().filter(|r| r.window == window && r.attempt == attempt) else {
            return Vec::new();
        };
        let fire = Fire { window, reason: run.reason, attempt, at: run.fired_at, span: run.span, supersedes: None };
        let outcome = LastDelivery { window, attempt, at: now, ok: false, outcome: "interrupted".into() };
        self.delivered(&fire, outcome).unwrap_or_default()
    }

    /// When the alarm should go off next: now if a fire waits, else the engine's deadline.
    pub(crate) fn alarm_at(&self, now: u64) -> Option<u64> {
        if self.outbox.is_empty() { self.engine.next_deadline() } else { Some(now) }
    }

    /// Nothing open, queued, due, running or dead-lettered: the key holds no event.
    pub(crate) fn is_idle(&self) -> bool {
        let e = &self.engine;
        self.outbox.is_empty()
            && e.open_window().is_none()
            && e.run().is_none()
            && e.queued().is_empty()
            && e.dead_letters().is_empty()
    }

    /// Windows waiting (queued or due) plus dead letters: what the topic's bound counts.
    pub(crate) fn pending_windows(&self) -> usize {
        self.engine.queued().len() + self.engine.dead_letters().len() + self.outbox.len()
    }

    /// The events whose rows are still needed, as spans: of every window
    /// open, due, running, queued or dead, the events its delivery carries
    /// (all of them, or only the last or the first).
    pub(crate) fn live_spans(&self) -> Vec<Span> {
        let e = &self.engine;
        let mut spans: Vec<Span> = e.open_window().map(|o| o.span).into_iter().collect();
        spans.extend(e.run().map(|r| r.span));
        spans.extend(self.outbox.iter().map(|f| f.span));
        spans.extend(e.queued().iter().map(|q| q.span));
        spans.extend(e.dead_letters().iter().map(|d| d.span));
        spans.into_iter().map(|s| self.needed(s)).collect()
    }

    /// The events of a window's `span` whose rows its delivery needs: all of
    /// them, or (`last`, `first`) one; the others were freed as superseded.
    pub(crate) fn needed(&self, span: Span) -> Span {
        match self.keeps() {
            PayloadMode::All => span,
            PayloadMode::Last => Span { first: span.last, first_at: span.last_at, ..span },
            PayloadMode::First => Span { last: span.first, last_at: span.first_at, ..span },
        }
    }

    /// The key's status: counts and the oldest `few` of the backlog, never all of it.
    pub(crate) fn status(&self, topic: &str, key: &str, few: usize) -> serde_json::Value {
        let e = &self.engine;
        let state = match (e.run(), e.open_window()) {
            _ if !self.outbox.is_empty() || !e.queued().is_empty() => "due",
            (Some(run), _) if run.retry_at.is_some() => "retrying",
            (Some(_), _) => "delivering",
            (None, Some(_)) => "open",
            (None, None) => "idle",
        };
        let stats = e.stats();
        let fires_by_reason: BTreeMap<&str, u64> =
            Reason::ALL.iter().map(|r| (r.as_str(), stats.fires_for(*r))).collect();
        json!({
            "topic": topic,
            "key": key,
            "incarnation": self.incarnation,
            "state": state,
            "wait_ms": e.wait_ms(),
            "policy_pending": e.pending_policy().is_some(),
            "learned_gap_ms": e.learned_gap_ms(),
            "next_deadline": e.next_deadline(),
            "open": e.open_window(),
            "run": e.run(),
            "due": self.outbox,
            "queued_count": e.queued().len(),
            "queued": e.queued().iter().take(few).collect::<Vec<_>>(),
            "dead_letter_count": e.dead_letters().len(),
            "dead_letters": e.dead_letters().iter().take(few).collect::<Vec<_>>(),
            "stats": stats,
            "fires_by_reason": fires_by_reason,
            "last_delivery": self.last_delivery,
            "io": self.io,
        })
    }

    fn effects(&mut self) -> Vec<Effect> {
        let mut effects = Vec::new();
        self.drain(&mut effects);
        effects
    }

    fn drain(&mut self, effects: &mut Vec<Effect>) {
        while let Some(action) = self.engine.poll_action() {
            match action {
                Action::Fire(fire) => {
                    if fire.reason != Reason::Retry && self.counted_fire != Some(fire.window) {
                        self.counted_fire = Some(fire.window);
                        let reason = fire.reason.as_str();
                        effects.push(Effect::Count(Counted { what: What::Fire, outcome: "", reason, latency_ms: 0 }));
                    }
                    effects.push(Effect::Log(fired("fire", &fire)));
                    effects.push(Effect::Left(fire.window));
                    self.outbox.push_back(fire);
                }
                Action::Queued(queued) => {
                    emit(
                        effects,
                        "queued",
                        json!({"window": queued.window, "count": queued.span.count(), "reason": queued.reason}),
                    );
                    effects.push(Effect::Queued(queued));
                }
                Action::Dropped(dropped) => {
                    let cause = match dropped.cause {
                        DropCause::Cancelled => "cancelled",
                        DropCause::NoTrailingEdge => "no_trailing_edge",
                    };
                    emit(
                        effects,
                        "cancel",
                        json!({"window": dropped.window, "count": dropped.span.count(), "cause": cause,
                               "seqs": [dropped.span.first, dropped.span.last]}),
                    );
                    effects.push(Effect::Left(dropped.window));
                    effects.push(Effect::Finished(dropped.span));
                }
                Action::TimedOut { window, attempt } => {
                    emit(effects, "timeout", json!({"window": window, "attempt": attempt}));
                }
                Action::RetryScheduled { window, attempt, at } => {
                    emit(effects, "retry", json!({"window": window, "attempt": attempt, "at": at}));
                }
                Action::DeadLettered(dead) => {
                    emit(
                        effects,
                        "dead_letter",
                        json!({"window": dead.window, "attempts": dead.attempts, "count": dead.span.count(),
                               "reason": dead.reason}),
                    );
                    effects.push(Effect::DeadLettered(dead));
                    effects.push(Effect::Count(Counted {
                        what: What::DeadLetter,
                        outcome: "",
                        reason: "",
                        latency_ms: 0,
                    }));
                }
            }
        }
    }
}

/// Add the fact `event` with `fields` to `effects`.
/// A fact of `event` about `fire`: the window, why and when it fired, its
/// count; all of its `fire` fact, and the start of each `deliver` fact.
fn fired(event: &'static str, fire: &Fire) -> Fact {
    Fact::new(
        event,
        json!({"window": fire.window, "reason": fire.reason, "attempt": fire.attempt,
               "count": fire.span.count(), "delay_ms": fire.at.saturating_sub(fire.span.first_at)}),
    )
}

fn emit(effects: &mut Vec<Effect>, event: &'static str, fields: serde_json::Value) {
    effects.push(Effect::Log(Fact::new(event, fields)));
}
