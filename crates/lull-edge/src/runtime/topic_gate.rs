//! `TopicGate`: the Durable Object holding one queue topic's [`Gate`] (named
//! by the topic), so the bound holds across consumer batches, invocations and
//! isolates. Internal routes, called by the queue consumer only:
//! `POST /acquire` → `{"go": lease, "expires_at"}` or `{"wait_until": ms}`;
//! `POST /release/{lease}`; `POST /count/{what}` (`acked`, `retried`,
//! `requeued`); `POST /dead-letter` (the message's JSON: kept, at most
//! [`MAX_DEAD_LETTERS`], `507` past it); `GET /status` → in flight, bound,
//! counters and the oldest dead letters.
//! The gate is stored after each change: a restarted object keeps its leases.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde_json::json;
use worker::{DurableObject, Env, Method, Request, RequestInit, Response, State, durable_object};

use super::config;
use super::headers::TOPIC_HEADER;
use super::http::{self, internal, now_ms};
use crate::http::ApiError;
use crate::queue::gate::{Gate, Grant};
use crate::topic::Topic;

/// The binding's name in `wrangler.toml`.
pub const TOPIC_GATE_BINDING: &str = "TOPIC_GATE";
/// A lease outlives its forward's timeout by this much before it expires.
const LEASE_MARGIN_MS: u64 = 5_000;
const STORAGE_KEY: &str = "gate";
const DEAD_KEY: &str = "dead";
/// Dead letters a topic keeps at most; past it the dead-letter queue keeps retrying them.
pub const MAX_DEAD_LETTERS: usize = 1_000;

/// Ask `topic`'s gate object for `op` (one of its routes above), with `body` if any.
pub async fn ask(env: &Env, topic: &str, op: &str, body: Option<&str>) -> worker::Result<Response> {
    let stub = env.durable_object(TOPIC_GATE_BINDING)?.id_from_name(topic)?.get_stub()?;
    let headers = worker::Headers::new();
    headers.set(TOPIC_HEADER, topic)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(body.map(Into::into));
    stub.fetch_with_request(Request::new_with_init(&format!("https://gate/{op}"), &init)?).await
}

/// One queue topic's bound on forwards.
#[durable_object]
pub struct TopicGate {
    state: State,
    env: Env,
    gate: RefCell<Option<(Gate, BTreeMap<String, u64>)>>,
}

impl TopicGate {
    /// Keep a dead-lettered message (whatever the topic's configuration is now).
    async fn dead_letter(&self, mut req: Request) -> Result<Response, ApiError> {
        let text = req.text().await.map_err(internal)?;
        let mut dead: Vec<String> = self.state.storage().get(DEAD_KEY).await.map_err(internal)?.unwrap_or_default();
        if dead.len() >= MAX_DEAD_LETTERS {
            let why = format!("this topic keeps {MAX_DEAD_LETTERS} dead letters; the queue keeps retrying this one");
            return http::json(507, &json!({"error": {"code": "dead_letters_full", "message": why}})).map_err(internal);
        }
        dead.push(text);
        let count = dead.len();
        self.state.storage().put(DEAD_KEY, dead).await.map_err(internal)?;
        http::json(200, &json!({"kept": count})).map_err(internal)
    }
}

impl TopicGate {
    async fn serve(&self, req: Request) -> Result<Response, ApiError> {
        let path = req.path();
        if path == "/dead-letter" {
            return self.dead_letter(req).await;
        }
        let topic_name = req.headers().get(TOPIC_HEADER).ok().flatten().unwrap_or_default();
        let config = config::load(&self.env)?;
        let topic: &Topic = config.topics.get(&topic_name).ok_or(ApiError::UnknownTopic(topic_name.clone()))?;
        let queue = topic.queue.as_ref().ok_or_else(|| ApiError::NotFound(format!("queue of topic {topic_name:?}")))?;
        let lease_ms = topic.delivery_timeout_ms + LEASE_MARGIN_MS;
        self.load(queue.forward_concurrency, queue.forward_rate_per_s, lease_ms).await?;
        let now = now_ms();
        let (answer, changed) = {
            let mut guard = self.gate.borrow_mut();
            let Some((gate, counters)) = guard.as_mut() else {
                return Err(ApiError::Internal("gate not loaded".into()));
            };
            match path.trim_start_matches('/').split_once('/').unwrap_or((path.trim_start_matches('/'), "")) {
                ("acquire", _) => match gate.acquire(now) {
                    Grant::Go { lease, expires_at } => (json!({"go": lease, "expires_at": expires_at}), true),
                    Grant::Wait { retry_at } => (json!({"wait_until": retry_at}), false),
                },
                ("release", lease) => {
                    let released = lease.parse::<u64>().is_ok_and(|l| gate.release(l));
                    (json!({"released": released}), true)
                }
                ("count", what @ ("acked" | "retried" | "requeued")) => {
                    *counters.entry(what.to_string()).or_default() += 1;
                    (json!({"ok": true}), true)
                }
                ("status", _) => (
                    json!({"topic": topic_name, "in_flight": gate.in_flight(now),
                           "forward_concurrency": queue.forward_concurrency,
                           "forward_rate_per_s": queue.forward_rate_per_s, "counters": counters}),
                    false,
                ),
                _ => return Err(ApiError::NotFound(format!("route {path:?}"))),
            }
        };
        if changed {
            self.store().await?;
        }
        let mut answer = answer;
        if path == "/status" {
            let dead: Vec<String> = self.state.storage().get(DEAD_KEY).await.map_err(internal)?.unwrap_or_default();
            let oldest: Vec<serde_json::Value> = dead
                .iter()
                .take(10)
                .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                .map(|m| json!({"idempotency_key": m["idempotency_key"], "attempt": m["attempt"]}))
                .collect();
            answer["dead_letter_count"] = json!(dead.len());
            answer["dead_letters"] = json!(oldest);
        }
        http::json(200, &answer).map_err(internal)
    }

    /// The stored gate (or a fresh one), brought to the topic's current bound.
    async fn load(&self, limit: u32, rate: Option<f64>, lease_ms: u64) -> Result<(), ApiError> {
        if self.gate.borrow().is_none() {
            let stored: Option<(Gate, BTreeMap<String, u64>)> =
                self.state.storage().get(STORAGE_KEY).await.map_err(internal)?;
            let loaded = stored.unwrap_or_else(|| (Gate::new(limit, rate, lease_ms), BTreeMap::new()));
            *self.gate.borrow_mut() = Some(loaded);
        }
        if let Some((gate, _)) = self.gate.borrow_mut().as_mut() {
            gate.configure(limit, rate, lease_ms);
        }
        Ok(())
    }

    async fn store(&self) -> Result<(), ApiError> {
        let snapshot = self.gate.borrow().clone();
        if let Some(snapshot) = snapshot {
            self.state.storage().put(STORAGE_KEY, snapshot).await.map_err(|e| {
                // Memory may be ahead of storage now: reload on the next call.
                *self.gate.borrow_mut() = None;
                ApiError::Unavailable { why: e.to_string(), retry_after_secs: 1 }
            })?;
        }
        Ok(())
    }
}

impl DurableObject for TopicGate {
    fn new(state: State, env: Env) -> Self {
        TopicGate { state, env, gate: RefCell::new(None) }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        http::respond(self.serve(req).await)
    }
}
