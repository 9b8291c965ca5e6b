//! What one `KeyWindow` Durable Object keeps and decides, without I/O.
//!
//! [`KeyState`] wraps the core [`Debouncer`] of one `(topic, key)` with the
//! fires waiting for the object's alarm (the *outbox*: every delivery runs in
//! `alarm()`, never inside a producer's request) and a few counters. Each
//! operation returns the [`Effect`]s the object must carry out: delete the rows
//! of a window that is done, and log a line. The whole value is serialisable;
//! the object stores it next to every payload row, so one row is written per
//! event.

use std::collections::{BTreeMap, VecDeque};

use lull_core::{
    Accepted, Action, DeadLetterError, Debouncer, DropCause, Fire, Policy, Reason, RunError, Span, Status, WindowId,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Storage work counted for the status and the benchmark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Io {
    /// SQLite rows written (inserts, deletes, state rows), as SQLite reports them.
    pub rows_written: u64,
    /// Of those, rows written while accepting events.
    pub accept_rows_written: u64,
    /// `setAlarm` calls (billed like a row written).
    pub alarms_set: u64,
}

/// The outcome of the last delivery attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastDelivery {
    /// The window delivered.
    pub window: WindowId,
    /// The attempt number.
    pub attempt: u32,
    /// When it ended (unix ms).
    pub at: u64,
    /// Whether the target answered 2xx.
    pub ok: bool,
    /// The HTTP status, or what went wrong (`timeout`, a network error).
    pub outcome: String,
}

/// Something the object must do after an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Delete the payload rows of `span` (its window was delivered or cancelled).
    Delete(Span),
    /// Write one structured log line (JSON).
    Log(String),
}

/// One key's durable state: the engine, the fires waiting for the alarm, counters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KeyState {
    engine: Debouncer,
    outbox: VecDeque<Fire>,
    /// The last delivery attempt.
    pub last_delivery: Option<LastDelivery>,
    /// Storage counters.
    pub io: Io,
}

/// A key's status as the API returns it.
#[derive(Serialize)]
pub struct KeyStatus<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The key.
    pub key: &'a str,
    /// `idle`, `open` (gathering events), `due` (waiting to be delivered),
    /// `delivering`, or `retrying` (a failed delivery waits for its next attempt).
    pub state: &'static str,
    /// Fires waiting for the alarm.
    pub due: &'a VecDeque<Fire>,
    /// The engine's view: open window, queued windows, run (attempt, next
    /// retry), dead letters, counters.
    #[serde(flatten)]
    pub engine: Status,
    /// Windows fired, by reason (the same counts as `stats.fires`, named).
    pub fires_by_reason: BTreeMap<&'static str, u64>,
    /// The last delivery attempt.
    pub last_delivery: &'a Option<LastDelivery>,
    /// Storage counters.
    pub io: Io,
}

impl KeyState {
    /// A fresh key running `policy`; `seed` feeds the retry jitter.
    pub fn new(policy: Policy, seed: u64) -> Self {
        KeyState {
            engine: Debouncer::new(policy, seed),
            outbox: VecDeque::new(),
            last_delivery: None,
            io: Io::default(),
        }
    }

    /// Accept one event at `now` (unix ms).
    pub fn accept(&mut self, now: u64, log: &Logger<'_>) -> (Accepted, Vec<Effect>) {
        let accepted = self.engine.event(now);
        let mut effects =
            vec![Effect::Log(log.line("accept", json!({"window": accepted.window, "seq": accepted.seq})))];
        self.drain(log, &mut effects);
        (accepted, effects)
    }

    /// The alarm went off at `now`.
    pub fn timeout(&mut self, now: u64, log: &Logger<'_>) -> Vec<Effect> {
        self.engine.handle_timeout(now);
        self.effects(log)
    }

    /// Fire the open window as soon as possible.
    pub fn flush(&mut self, now: u64, log: &Logger<'_>) -> Vec<Effect> {
        self.engine.flush(now);
        self.effects(log)
    }

    /// Drop the open window; its rows go.
    pub fn cancel(&mut self, now: u64, log: &Logger<'_>) -> Vec<Effect> {
        self.engine.cancel(now);
        self.effects(log)
    }

    /// Deliver a dead-lettered window again.
    pub fn replay(&mut self, window: WindowId, now: u64, log: &Logger<'_>) -> Result<Vec<Effect>, DeadLetterError> {
        self.engine.replay(window, now)?;
        Ok(self.effects(log))
    }

    /// The next fire to deliver, taken out of the outbox. The engine counts it
    /// as running from the moment it fired.
    pub fn take_fire(&mut self) -> Option<Fire> {
        self.outbox.pop_front()
    }

    /// The delivery of `fire` ended at `now`.
    pub fn delivered(&mut self, fire: &Fire, outcome: LastDelivery, log: &Logger<'_>) -> Result<Vec<Effect>, RunError> {
        let now = outcome.at;
        let line = json!({"window": fire.window, "attempt": fire.attempt, "ok": outcome.ok,
                          "outcome": outcome.outcome, "at": now, "ms": now.saturating_sub(fire.at)});
        if outcome.ok {
            self.engine.run_succeeded(fire.window, now)?;
        } else {
            self.engine.run_failed(fire.window, now)?;
        }
        let mut effects = vec![Effect::Log(log.line("deliver", line))];
        if outcome.ok {
            effects.push(Effect::Delete(fire.span));
        }
        self.last_delivery = Some(outcome);
        self.drain(log, &mut effects);
        Ok(effects)
    }

    /// Whether a fire waits in the outbox.
    pub fn fire_waiting(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// When the alarm should go off next: now if a fire waits, else the engine's deadline.
    pub fn alarm_at(&self, now: u64) -> Option<u64> {
        if self.outbox.is_empty() { self.engine.next_deadline() } else { Some(now) }
    }

    /// The key's status.
    pub fn status<'a>(&'a self, topic: &'a str, key: &'a str) -> KeyStatus<'a> {
        let engine = self.engine.status();
        let state = match (&engine.run, &engine.open) {
            _ if !self.outbox.is_empty() || !engine.queued.is_empty() => "due",
            (Some(run), _) if run.retry_at.is_some() => "retrying",
            (Some(_), _) => "delivering",
            (None, Some(_)) => "open",
            (None, None) => "idle",
        };
        let fires_by_reason = Reason::ALL.iter().map(|r| (r.as_str(), engine.stats.fires_for(*r))).collect();
        KeyStatus {
            topic,
            key,
            state,
            due: &self.outbox,
            engine,
            fires_by_reason,
            last_delivery: &self.last_delivery,
            io: self.io,
        }
    }

    fn effects(&mut self, log: &Logger<'_>) -> Vec<Effect> {
        let mut effects = Vec::new();
        self.drain(log, &mut effects);
        effects
    }

    fn drain(&mut self, log: &Logger<'_>, effects: &mut Vec<Effect>) {
        while let Some(action) = self.engine.poll_action() {
            match action {
                Action::Fire(fire) => {
                    effects.push(Effect::Log(log.line(
                        "fire",
                        json!({"window": fire.window, "reason": fire.reason, "attempt": fire.attempt,
                               "count": fire.span.count(), "delay_ms": fire.at.saturating_sub(fire.span.first_at)}),
                    )));
                    self.outbox.push_back(fire);
                }
                Action::Dropped(dropped) => {
                    let cause = match dropped.cause {
                        DropCause::Cancelled => "cancelled",
                        DropCause::NoTrailingEdge => "no_trailing_edge",
                    };
                    effects.push(Effect::Log(log.line(
                        "cancel",
                        json!({"window": dropped.window, "count": dropped.span.count(), "cause": cause}),
                    )));
                    effects.push(Effect::Delete(dropped.span));
                }
                Action::TimedOut { window, attempt } => {
                    effects.push(Effect::Log(log.line("timeout", json!({"window": window, "attempt": attempt}))));
                }
                Action::RetryScheduled { window, attempt, at } => {
                    effects
                        .push(Effect::Log(log.line("retry", json!({"window": window, "attempt": attempt, "at": at}))));
                }
                Action::Queued(queued) => {
                    effects.push(Effect::Log(log.line(
                        "queued",
                        json!({"window": queued.window, "count": queued.span.count(), "reason": queued.reason}),
                    )));
                }
                Action::DeadLettered(dead) => {
                    effects.push(Effect::Log(log.line(
                        "dead_letter",
                        json!({"window": dead.window, "attempts": dead.attempts, "count": dead.span.count(),
                               "reason": dead.reason}),
                    )));
                }
            }
        }
    }
}

/// Writes structured log lines for one key: `{"lull": event, "topic", "key", …}`.
pub struct Logger<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The key.
    pub key: &'a str,
}

impl Logger<'_> {
    /// One JSON line: `fields` (an object) plus the event name, topic and key.
    pub fn line(&self, event: &str, fields: serde_json::Value) -> String {
        let mut line = json!({"lull": event, "topic": self.topic, "key": self.key});
        if let (Some(line), serde_json::Value::Object(fields)) = (line.as_object_mut(), fields) {
            line.extend(fields);
        }
        line.to_string()
    }
}

#[cfg(test)]
mod tests {
    use lull_core::{PolicyConfig, Retry};

    use super::*;

    const LOG: Logger<'static> = Logger { topic: "t", key: "k" };

    fn state() -> KeyState {
        let mut config = PolicyConfig::debounce(100);
        config.max_wait = Some(1_000);
        config.retry = Retry::backoff(2, 50, 50);
        KeyState::new(config.build().unwrap(), 7)
    }

    fn outcome(fire: &Fire, ok: bool, at: u64) -> LastDelivery {
        LastDelivery {
            window: fire.window,
            attempt: fire.attempt,
            at,
            ok,
            outcome: if ok { "200" } else { "500" }.into(),
        }
    }

    #[test]
    fn a_window_fires_through_the_outbox_and_its_rows_go_when_delivered() {
        let mut s = state();
        let (first, _) = s.accept(1_000, &LOG);
        s.accept(1_050, &LOG);
        assert_eq!(s.alarm_at(1_050), Some(1_100), "lazy: the first event's deadline");
        assert!(s.timeout(1_100, &LOG).is_empty(), "re-armed for the last event's quiet period");
        assert_eq!(s.alarm_at(1_100), Some(1_150));
        s.timeout(1_150, &LOG);
        assert_eq!(s.alarm_at(1_150), Some(1_150), "a fire waits: the alarm is due now");
        assert_eq!(s.status("t", "k").state, "due");
        let fire = s.take_fire().unwrap();
        assert_eq!((fire.window, fire.reason, fire.span.count()), (first.window, Reason::Quiet, 2));
        assert_eq!(s.status("t", "k").state, "delivering");
        // An event during the delivery joins the next window.
        let (during, _) = s.accept(1_160, &LOG);
        assert_ne!(during.window, fire.window);
        let effects = s.delivered(&fire, outcome(&fire, true, 1_170), &LOG).unwrap();
        assert!(effects.contains(&Effect::Delete(fire.span)));
        assert_eq!(s.status("t", "k").state, "open");
        assert!(s.delivered(&fire, outcome(&fire, true, 1_180), &LOG).is_err(), "a second end is refused");
    }

    #[test]
    fn failures_retry_then_dead_letter_keeping_the_rows_and_replay_delivers_them() {
        let mut s = state();
        s.accept(0, &LOG);
        s.flush(10, &LOG);
        let fire = s.take_fire().unwrap();
        let effects = s.delivered(&fire, outcome(&fire, false, 20), &LOG).unwrap();
        assert!(effects.iter().all(|e| !matches!(e, Effect::Delete(_))));
        assert_eq!(s.status("t", "k").state, "retrying");
        let retry_at = s.alarm_at(20).unwrap();
        assert!((20..=70).contains(&retry_at));
        s.timeout(retry_at, &LOG);
        let retry = s.take_fire().unwrap();
        assert_eq!((retry.window, retry.attempt, retry.reason), (fire.window, 2, Reason::Retry));
        let effects = s.delivered(&retry, outcome(&retry, false, retry_at + 5), &LOG).unwrap();
        assert!(effects.iter().any(|e| matches!(e, Effect::Log(l) if l.contains("\"dead_letter\""))));
        assert!(effects.iter().all(|e| !matches!(e, Effect::Delete(_))), "dead letters keep their rows");
        assert_eq!(s.status("t", "k").engine.dead_letters.len(), 1);
        assert_eq!(s.replay(WindowId(99), 200, &LOG).unwrap_err(), DeadLetterError::NotFound(WindowId(99)));
        s.replay(fire.window, 200, &LOG).unwrap();
        let replay = s.take_fire().unwrap();
        assert_eq!((replay.reason, replay.span), (Reason::Replay, fire.span));
        let effects = s.delivered(&replay, outcome(&replay, true, 210), &LOG).unwrap();
        assert!(effects.contains(&Effect::Delete(fire.span)));
        let status = s.status("t", "k");
        assert_eq!(status.state, "idle");
        assert_eq!((status.fires_by_reason["flush"], status.fires_by_reason["replay"]), (1, 1));
    }

    #[test]
    fn cancel_deletes_the_open_window_and_the_state_survives_json() {
        let mut s = state();
        s.accept(0, &LOG);
        s.accept(10, &LOG);
        let restored: KeyState = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        let mut s = restored;
        let effects = s.cancel(20, &LOG);
        let Some(Effect::Delete(span)) = effects.iter().find(|e| matches!(e, Effect::Delete(_))) else { panic!() };
        assert_eq!(span.count(), 2);
        assert_eq!(s.alarm_at(20), None);
        let line: serde_json::Value = serde_json::from_str(&LOG.line("x", json!({"n": 1}))).unwrap();
        assert_eq!(line, json!({"lull": "x", "topic": "t", "key": "k", "n": 1}));
    }
}
