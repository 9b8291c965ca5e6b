//! `KeyWindow`: the Durable Object of one `(topic, key)`.
//!
//! Producers' requests accept events, flush, cancel and replay; they never
//! wait for a delivery. Every delivery runs in `alarm()`: the alarm goes off
//! at the core's deadline (or at once when a fire waits), delivers, reports
//! the outcome to the core and re-arms. `alarm()` never returns an error
//! without an alarm armed, and no `RefCell` borrow is held across an `await`
//! (state is touched only inside [`KeyWindow::with`], whose closure cannot await).

use std::cell::RefCell;

use lull_core::{Fire, WindowId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;
use worker::{DurableObject, Env, Request, Response, ScheduledTime, State, console_error, console_log, durable_object};

use super::config::{self, Config};
use super::http::{self, internal, now_ms};
use super::outbound::{self, Outgoing};
use super::router::{KEY_HEADER, TOPIC_HEADER};
use super::store::Store;
use crate::api_error::ApiError;
use crate::delivery::{Delivery, Payload, idempotency_key};
use crate::key::Key;
use crate::key_state::{Effect, KeyState, LastDelivery, Logger};
use crate::topic::{PayloadMode, Topic};

/// A failed `alarm()` tries again this much later.
const ALARM_RETRY_MS: u64 = 1_000;

/// One `(topic, key)`: its engine, payload rows and alarm.
#[durable_object]
pub struct KeyWindow {
    state: State,
    env: Env,
    loaded: RefCell<Option<Loaded>>,
}

/// The key's state in memory, as loaded from (and written to) storage.
struct Loaded {
    topic: String,
    key: Key,
    ks: KeyState,
    /// Version of the newest state written.
    ver: u64,
    /// When the alarm is armed (unix ms).
    armed: Option<u64>,
    store: Store,
}

/// What is stored: the key's state with the names `alarm()` needs.
#[derive(Serialize)]
struct Snapshot<'a> {
    topic: &'a str,
    /// Percent-encoded, as in paths.
    key: &'a str,
    state: &'a KeyState,
}

/// [`Snapshot`], read back.
#[derive(Deserialize)]
struct Stored {
    topic: String,
    key: String,
    state: KeyState,
}

/// A fire taken from the outbox: its delivery, or why it cannot be sent.
struct Job {
    fire: Fire,
    delivery: Result<Prepared, &'static str>,
}

/// A delivery ready to send.
struct Prepared {
    target: String,
    body: String,
    idempotency_key: String,
    timeout_ms: u64,
}

fn json_error(e: serde_json::Error) -> ApiError {
    ApiError::Internal(e.to_string())
}

fn seed() -> u64 {
    let random = worker::js_sys::Math::random() * 9_007_199_254_740_992.0;
    (random as u64) ^ now_ms().rotate_left(32)
}

impl Loaded {
    fn apply(&mut self, effects: Vec<Effect>) -> Result<(), ApiError> {
        for effect in effects {
            match effect {
                Effect::Delete(span) => self.ks.io.rows_written += self.store.delete(span).map_err(internal)?,
                Effect::Log(line) => console_log!("{line}"),
            }
        }
        Ok(())
    }

    /// Arm the alarm earlier if the key's next deadline moved earlier. Returns the time to set.
    fn arm_earlier(&mut self, now: u64) -> Option<u64> {
        let want = self.ks.alarm_at(now)?;
        if self.armed.is_some_and(|armed| armed <= want) { None } else { self.arm_at(want) }
    }

    /// Arm the alarm at the key's next deadline unless it is already there.
    fn rearm(&mut self, now: u64) -> Option<u64> {
        let want = self.ks.alarm_at(now)?;
        if self.armed == Some(want) { None } else { self.arm_at(want) }
    }

    fn arm_at(&mut self, at: u64) -> Option<u64> {
        self.armed = Some(at);
        self.ks.io.alarms_set += 1;
        Some(at)
    }

    /// The state as stored, counting the one row about to be written.
    fn snapshot(&mut self, accepting: bool) -> Result<String, ApiError> {
        self.ver += 1;
        self.ks.io.rows_written += 1;
        self.ks.io.accept_rows_written += u64::from(accepting);
        let key = self.key.encoded();
        serde_json::to_string(&Snapshot { topic: &self.topic, key: &key, state: &self.ks }).map_err(json_error)
    }

    fn save_state(&mut self) -> Result<(), ApiError> {
        let state = self.snapshot(false)?;
        let written = self.store.write_state(self.ver, &state).map_err(internal)?;
        self.ks.io.rows_written += written.saturating_sub(1);
        Ok(())
    }

    fn save_event(&mut self, seq: lull_core::Seq, at: u64, body: &str) -> Result<(), ApiError> {
        let state = self.snapshot(true)?;
        let written = self.store.insert_event(seq, at, body, self.ver, &state).map_err(internal)?;
        self.ks.io.rows_written += written.saturating_sub(1);
        Ok(())
    }

    /// Take the next fire out of the outbox and build its delivery.
    fn next_job(&mut self, config: &Config) -> Result<Option<Job>, ApiError> {
        let Some(fire) = self.ks.take_fire() else { return Ok(None) };
        let Some(topic) = config.topics.get(&self.topic) else {
            return Ok(Some(Job { fire, delivery: Err("topic is no longer configured") }));
        };
        let prepared = Prepared {
            target: topic.target.clone(),
            body: self.delivery_body(&fire, topic)?,
            idempotency_key: idempotency_key(&self.topic, &self.key, fire.window),
            timeout_ms: topic.delivery_timeout_ms,
        };
        Ok(Some(Job { fire, delivery: Ok(prepared) }))
    }

    fn delivery_body(&self, fire: &Fire, topic: &Topic) -> Result<String, ApiError> {
        let rows = self.store.payloads(fire.span, topic.payload).map_err(internal)?;
        let raws = rows
            .into_iter()
            .map(|row| RawValue::from_string(row).map_err(json_error))
            .collect::<Result<Vec<_>, _>>()?;
        let null = RawValue::from_string("null".into()).map_err(json_error)?;
        let payload = match topic.payload {
            PayloadMode::All => Payload::Events(raws.iter().map(|r| r.as_ref()).collect()),
            _ => Payload::Event(raws.first().unwrap_or(&null)),
        };
        let delivery = Delivery {
            topic: &self.topic,
            key: self.key.as_str(),
            window: fire.window,
            reason: fire.reason,
            count: fire.span.count(),
            first_at: fire.span.first_at,
            last_at: fire.span.last_at,
            payload,
        };
        delivery.to_json().map_err(json_error)
    }

    fn status(&self) -> Result<serde_json::Value, ApiError> {
        let mut status = serde_json::to_value(self.ks.status(&self.topic, self.key.as_str())).map_err(json_error)?;
        status["stored_events"] = json!(self.store.stored_events().map_err(internal)?);
        Ok(status)
    }
}

impl KeyWindow {
    /// Run `f` on the loaded state. The closure cannot await, so no borrow outlives it.
    fn with<R>(&self, f: impl FnOnce(&mut Loaded) -> Result<R, ApiError>) -> Result<R, ApiError> {
        let mut guard = self.loaded.try_borrow_mut().map_err(|_| ApiError::Internal("state is busy".into()))?;
        let loaded = guard.as_mut().ok_or_else(|| ApiError::Internal("state is not loaded".into()))?;
        f(loaded)
    }

    /// Load the key's state once per object lifetime. A key never written to
    /// starts fresh from `new` (its topic and key); without it, there is nothing
    /// to load and `false` is returned.
    async fn load(&self, new: Option<(&Topic, &Key)>) -> Result<bool, ApiError> {
        if self.loaded.borrow().is_some() {
            return Ok(true);
        }
        let storage = self.state.storage();
        let armed = storage.get_alarm().await.map_err(internal)?.and_then(|t| u64::try_from(t).ok());
        if self.loaded.borrow().is_some() {
            return Ok(true);
        }
        let store = Store::open(storage.sql()).map_err(internal)?;
        let loaded = match (store.load().map_err(internal)?, new) {
            (Some(row), _) => {
                let stored: Stored = serde_json::from_str(&row.state).map_err(json_error)?;
                let key = Key::from_path_segment(&stored.key)?;
                Loaded { topic: stored.topic, key, ks: stored.state, ver: row.ver, armed, store }
            }
            (None, Some((topic, key))) => Loaded {
                topic: topic.name.clone(),
                key: key.clone(),
                ks: KeyState::new(topic.policy.clone(), seed()),
                ver: 0,
                armed,
                store,
            },
            (None, None) => return Ok(false),
        };
        *self.loaded.borrow_mut() = Some(loaded);
        Ok(true)
    }

    async fn set_alarm(&self, at: Option<u64>) -> Result<(), ApiError> {
        let Some(at) = at else { return Ok(()) };
        let when = ScheduledTime::new(worker::js_sys::Date::new(&(at as f64).into()));
        self.state.storage().set_alarm(when).await.map_err(internal)
    }

    async fn serve(&self, mut req: Request) -> Result<Response, ApiError> {
        let header = |name: &str| req.headers().get(name).ok().flatten().unwrap_or_default();
        let (topic_name, key) = (header(TOPIC_HEADER), Key::from_path_segment(&header(KEY_HEADER))?);
        let body = req.text().await.map_err(internal)?;
        let config = config::load(&self.env)?;
        let topic = config.topics.get(&topic_name).ok_or(ApiError::UnknownTopic(topic_name))?;
        self.load(Some((topic, &key))).await?;
        let now = now_ms();
        let path = req.path();
        let op = path.trim_start_matches('/');
        if op == "status" {
            return self.with(|l| l.status()).and_then(|s| http::json(200, &s).map_err(internal));
        }
        if op == "dead-letters" {
            let dead = self.with(|l| Ok(l.ks.status(&l.topic, l.key.as_str()).engine.dead_letters))?;
            return http::json(200, &json!({"dead_letters": dead})).map_err(internal);
        }
        let (status, reply, alarm) = self.with(|l| {
            let log = Logger { topic: &l.topic, key: l.key.as_str() };
            if op == "event" {
                let (accepted, effects) = l.ks.accept(now, &log);
                l.apply(effects)?;
                let alarm = l.arm_earlier(now);
                l.save_event(accepted.seq, now, &body)?;
                return Ok((202, json!({"window": accepted.window, "seq": accepted.seq}), alarm));
            }
            let effects = match op {
                "flush" => l.ks.flush(now, &log),
                "cancel" => l.ks.cancel(now, &log),
                _ => {
                    let window = op.strip_prefix("replay/").and_then(|w| w.parse::<u64>().ok()).map(WindowId);
                    let window = window.ok_or_else(|| ApiError::NotFound(format!("route {path:?}")))?;
                    l.ks.replay(window, now, &log)
                        .map_err(|_| ApiError::NotFound(format!("dead letter {window} of this key")))?
                }
            };
            l.apply(effects)?;
            let alarm = l.arm_earlier(now);
            l.save_state()?;
            Ok((200, l.status()?, alarm))
        })?;
        self.set_alarm(alarm).await?;
        http::json(status, &reply).map_err(internal)
    }

    async fn run_alarm(&self) -> Result<(), ApiError> {
        if !self.load(None).await? {
            return Ok(());
        }
        let config = config::load(&self.env)?;
        self.with(|l| {
            l.armed = None;
            let log = Logger { topic: &l.topic, key: l.key.as_str() };
            let effects = l.ks.timeout(now_ms(), &log);
            // A fire is saved after its delivery; until then the alarm armed
            // below for the run brings it back if the object dies.
            let changed = !effects.is_empty();
            l.apply(effects)?;
            if changed && !l.ks.fire_waiting() {
                l.save_state()?;
            }
            Ok(())
        })?;
        while let Some(job) = self.with(|l| l.next_job(&config))? {
            // If the object dies mid-delivery, the run's timeout brings it back.
            let guard = self.with(|l| Ok(l.rearm(now_ms())))?;
            self.set_alarm(guard).await?;
            let (ok, detail) = match job.delivery {
                Err(why) => (false, why.to_string()),
                Ok(prepared) => {
                    let out = Outgoing {
                        target: &prepared.target,
                        body: prepared.body,
                        idempotency_key: prepared.idempotency_key,
                        attempt: job.fire.attempt,
                        secret: &config.signing_secret,
                        timeout_ms: prepared.timeout_ms,
                    };
                    let outcome = outbound::send(out).await;
                    (outcome.ok, outcome.detail)
                }
            };
            self.with(|l| {
                let fire = job.fire;
                let outcome =
                    LastDelivery { window: fire.window, attempt: fire.attempt, at: now_ms(), ok, outcome: detail };
                let log = Logger { topic: &l.topic, key: l.key.as_str() };
                match l.ks.delivered(&fire, outcome, &log) {
                    Ok(effects) => l.apply(effects)?,
                    Err(e) => console_log!("{}", log.line("stale_outcome", json!({"error": e.to_string()}))),
                }
                l.save_state()
            })?;
        }
        let next = self.with(|l| Ok(l.rearm(now_ms())))?;
        self.set_alarm(next).await
    }
}

impl DurableObject for KeyWindow {
    fn new(state: State, env: Env) -> Self {
        KeyWindow { state, env, loaded: RefCell::new(None) }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        http::respond(self.serve(req).await)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        if let Err(error) = self.run_alarm().await {
            console_error!("{}", json!({"lull": "alarm_error", "error": error.message()}));
            let again = now_ms() + ALARM_RETRY_MS;
            let _ = self.with(|l| {
                l.armed = Some(again);
                Ok(())
            });
            if let Err(error) = self.set_alarm(Some(again)).await {
                console_error!("{}", json!({"lull": "alarm_error", "error": error.message()}));
            }
        }
        Response::ok("")
    }
}
