//! The fetch handler: route, authorise, validate, then hand the request to the
//! key's Durable Object (a single event of a topic that coalesces through
//! [`super::coalesce`]). Nothing is stored here; a rejected request reaches no object.

use std::cell::RefCell;

use serde_json::value::RawValue;
use worker::worker_sys::web_sys;
use worker::{Context, Env, event};

use super::coalesce;
use super::config;
use super::http::{self, Incoming, Reply};
use super::key_client::KeyClient;
use super::topic_gate::GateClient;
#[cfg(feature = "demo")]
use crate::demo::{panel, search as demo, sink};
use crate::http::ApiError;
use crate::http::auth::{Access, Target};
use crate::http::batch;
use crate::http::client_token::MintRequest;
use crate::http::route::{Route, producer_key, with_page, with_queue_page};
use crate::key::{KeyCall, KeyRequest};
use crate::ports::{GateAnswer, GateOp, Gates};
use crate::queue::gate_object::FULL_RETRY_SECS;
use crate::queue::room::RoomCache;
use crate::topic::Topic;

thread_local! {
    /// Which queue topics' dead letters are full, as this isolate last heard (`queue::room`).
    static ROOM: RefCell<RoomCache> = RefCell::new(RoomCache::default());
}

/// `429 dead_letters_full` if `topic`'s dead letters are at their bound:
/// asked of its gate object at most once per `ROOM_CHECK_MS` in this isolate.
async fn refuse_when_full(env: &Env, topic: &Topic) -> Result<(), ApiError> {
    let now = http::now_ms();
    let full = match ROOM.with_borrow(|room| room.fresh(&topic.name, now)) {
        Some(full) => full,
        None => {
            // A gate that cannot answer refuses nothing.
            let answer = GateClient { env }.ask(&topic.name, GateOp::Room).await;
            let full = matches!(answer, Ok(GateAnswer::Room(true)));
            ROOM.with_borrow_mut(|room| room.record(&topic.name, full, now));
            full
        }
    };
    if full { Err(ApiError::DeadLettersFull { retry_after_secs: FULL_RETRY_SECS }) } else { Ok(()) }
}

#[event(fetch)]
async fn fetch(req: web_sys::Request, env: Env, ctx: Context) -> Result<Reply, worker::Error> {
    let req = Incoming::new(req);
    let origin = req.header("origin");
    let auth = req.header("authorization");
    // Asked only where it matters (health, a private error): not on every event.
    let admin = || config::is_admin(&env, auth.as_deref());
    let result = handle(req, &env, &ctx, origin.as_deref(), &admin).await;
    // An admin sees a private error's detail (a broken configuration, say); anyone else a request id.
    let reveal = matches!(&result, Err(e) if e.is_private()) && admin();
    let response = http::respond_as(result, reveal).map_err(worker::Error::from)?;
    // Every answer (errors too) tells an allowed origin's page that it may read it.
    let cors = match origin {
        Some(origin) => config::load(&env).map(|c| c.cors.headers(Some(origin.as_str()))).unwrap_or_default(),
        None => Vec::new(),
    };
    if cors.is_empty() {
        return Ok(response);
    }
    let headers = response.headers();
    for (name, value) in cors {
        headers.set(name, &value).map_err(worker::Error::from)?;
    }
    Ok(response)
}

async fn handle(
    req: Incoming,
    env: &Env,
    ctx: &Context,
    origin: Option<&str>,
    admin: &dyn Fn() -> bool,
) -> Result<Reply, ApiError> {
    let route = Route::parse(&req.method(), &req.path())?;
    if route == Route::Health {
        // Anyone learns whether the worker is up; an admin, its topics (or what is wrong).
        let config = config::load(env).map_err(|e| ApiError::Unhealthy(e.message()))?;
        let topics: Vec<&str> = config.topics.iter().map(|t| t.name.as_str()).collect();
        let body =
            if admin() { serde_json::json!({"ok": true, "topics": topics}) } else { serde_json::json!({"ok": true}) };
        return http::json(200, &body);
    }
    let config = config::load(env)?;
    #[cfg(feature = "demo")]
    if route.demo_only() && !config.demo_sink {
        return Err(ApiError::NotFound(format!("route {:?}", req.path())));
    }
    let auth = req.header("authorization");
    let tokens = &config.tokens;
    match route {
        Route::Preflight => {
            let headers = config.cors.preflight(origin)?;
            let headers: Vec<(&str, &str)> = headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
            http::reply(204, None, &headers)
        }
        Route::Health => Err(ApiError::Internal("health is answered above".into())),
        #[cfg(feature = "demo")]
        Route::Sink { post } => sink::handle(req.into_request(), &config, post, tokens, auth.as_deref()).await,
        #[cfg(feature = "demo")]
        Route::SinkFailing { key, on } => sink::failing(&key, on, tokens, auth.as_deref()),
        Route::QueueStatus { topic } => {
            tokens.authorize(auth.as_deref(), Access::Admin, Target { topic: Some(&topic), ..Target::default() })?;
            let topic = config.topics.get(&topic).ok_or(ApiError::UnknownTopic(topic))?;
            if topic.queue.is_none() {
                return Err(ApiError::NotFound(format!("queue of topic {:?} (it delivers by webhook)", topic.name)));
            }
            http::pass_on(&GateClient { env }.call(&topic.name, GateOp::Status).await?)
        }
        Route::QueueDeadLetters { topic, op } => {
            tokens.authorize(auth.as_deref(), Access::Admin, Target { topic: Some(&topic), ..Target::default() })?;
            let topic = config.topics.get(&topic).ok_or(ApiError::UnknownTopic(topic))?;
            if topic.queue.is_none() {
                return Err(ApiError::NotFound(format!("queue of topic {:?} (it delivers by webhook)", topic.name)));
            }
            let query = req.query();
            let op = with_queue_page(op, query.as_deref())?;
            if !matches!(op, GateOp::DeadLetters { .. }) {
                // Room may come back: this isolate asks again at the next event.
                ROOM.with_borrow_mut(|room| room.forget(&topic.name));
            }
            // The gate object's text, unparsed: bodies reach the caller byte for byte.
            http::pass_on(&GateClient { env }.call(&topic.name, op).await?)
        }
        #[cfg(feature = "demo")]
        Route::Demo(page) => demo::handle(req.into_request(), env, page).await,
        #[cfg(feature = "demo")]
        Route::Panel(route) => panel::handle(req.into_request(), env, &config, route).await,
        Route::MintClientToken { topic } => {
            let now_s = http::now_ms() / 1000;
            tokens.authorize(auth.as_deref(), Access::Admin, Target { topic: Some(&topic), key: None, now_s })?;
            let topic = config.topics.get(&topic).ok_or(ApiError::UnknownTopic(topic))?;
            let asked = MintRequest::parse(&body_within(&req, SMALL_BODY_BYTES).await?)?;
            let claims = asked.claims(&topic.name, now_s)?;
            let token = tokens.client_secrets().mint(&claims)?;
            http::json(201, &serde_json::json!({"token": token, "expires_at": claims.exp}))
        }
        Route::Batch { topic } => {
            let now_s = http::now_ms() / 1000;
            let target = |key| Target { topic: Some(&topic), key, now_s };
            // Who is asking, before the body is read (a client token is checked per key below).
            match tokens.authorize(auth.as_deref(), Access::Ingest, target(None)) {
                Ok(_) | Err(ApiError::Forbidden) => {}
                Err(e) => return Err(e),
            }
            let config_topic = config.topics.get(&topic).ok_or_else(|| ApiError::UnknownTopic(topic.clone()))?;
            if config_topic.queue.is_some() {
                refuse_when_full(env, config_topic).await?;
            }
            let events = batch::parse(&body_within(&req, batch::MAX_BATCH_BYTES).await?, config_topic.max_body_bytes)?;
            let groups = batch::by_key(&events);
            // Every key is checked before any is stored.
            let mut calls = Vec::with_capacity(groups.len());
            for (key, places) in &groups {
                let first = places.first().copied().unwrap_or_default();
                let caller = tokens
                    .authorize(auth.as_deref(), Access::Ingest, target(Some(key.as_str())))
                    .map_err(|error| ApiError::BatchItem { index: first, error: Box::new(error) })?;
                let events_per_minute = caller.events_per_minute();
                let batch_events =
                    places.iter().map(|&i| (events[i].event.clone(), events[i].idempotency_key.clone())).collect();
                calls.push((key.clone(), batch_events, events_per_minute));
            }
            let answers =
                futures::future::join_all(calls.into_iter().map(|(key, events, events_per_minute)| async move {
                    // As for single events: a client token's shares are not coalesced.
                    if config_topic.coalesce && events_per_minute.is_none() {
                        return coalesce::batch_share(env, ctx, config_topic, key, events).await;
                    }
                    let request = KeyRequest::Events { events, events_per_minute };
                    key_answer(env, KeyCall { topic: config_topic.name.clone(), key, request }).await
                }))
                .await;
            let places = groups.into_iter().map(|(_, places)| places);
            let body = batch::results(events.len(), places.zip(answers).collect());
            http::json(207, &body)
        }
        Route::Key { topic, key, request } => {
            let now_s = http::now_ms() / 1000;
            let target = Target { topic: Some(&topic), key: Some(key.as_str()), now_s };
            let caller = tokens.authorize(auth.as_deref(), request.access(), target)?;
            let events_per_minute = caller.events_per_minute();
            let topic = config.topics.get(&topic).ok_or(ApiError::UnknownTopic(topic))?;
            let producer = producer_key(req.header("idempotency-key").as_deref())?;
            let request = match request {
                KeyRequest::Event { .. } => {
                    if topic.queue.is_some() {
                        refuse_when_full(env, topic).await?;
                    }
                    let body = event_body(&req, topic).await?;
                    // A client token's events are not coalesced: its per-minute budget
                    // is spent event by event, not refused a whole batch at a time.
                    if topic.coalesce && events_per_minute.is_none() {
                        return coalesce::event(env, ctx, topic, key, body, producer).await;
                    }
                    KeyRequest::Event { body, idempotency_key: producer, events_per_minute }
                }
                other => other,
            };
            let query = req.query();
            let request = with_page(request, query.as_deref())?;
            forward(env, KeyCall { topic: topic.name.clone(), key, request }).await
        }
    }
}

/// Bodies of admin routes (a client token's request) are at most this long.
const SMALL_BODY_BYTES: usize = 4 * 1024;

/// The request's body, `413` past `limit` bytes (refused by its declared
/// `Content-Length` before it is read, where it has one).
async fn body_within(req: &Incoming, limit: usize) -> Result<Vec<u8>, ApiError> {
    let declared = req.header("content-length");
    if declared.and_then(|n| n.trim().parse::<usize>().ok()).is_some_and(|n| n > limit) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    let bytes = req.bytes().await?;
    if bytes.len() > limit {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    Ok(bytes)
}

/// The event's JSON, checked for size and syntax.
async fn event_body(req: &Incoming, topic: &Topic) -> Result<String, ApiError> {
    let bytes = body_within(req, topic.max_body_bytes).await?;
    let raw: &RawValue = serde_json::from_slice(&bytes).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    Ok(raw.get().to_string())
}

/// One key's share of a batch, answered: its events' `{"window", "seq"}`, or
/// the status and error all of them got.
async fn key_answer(env: &Env, call: KeyCall) -> batch::KeyAnswer {
    let answer = KeyClient { env }.call(call).await.map_err(|e| batch::key_failed(&e))?;
    batch::read_key_answer(&answer)
}

/// Hand `call` to its key's object and pass its answer on.
async fn forward(env: &Env, call: KeyCall) -> Result<Reply, ApiError> {
    http::pass_on(&KeyClient { env }.call(call).await?)
}
