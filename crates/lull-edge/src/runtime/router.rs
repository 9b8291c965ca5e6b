//! The fetch handler: it parses the route, asks [`crate::http::plan`] what
//! to do (every decision: the credential, the topic, the body's bound,
//! coalescing, the demo switch) and carries the plan out — reads the body,
//! asks a queue topic's gate for room, hands the call to its key's object
//! ([`KeyClient`]; a single event or a batch's share of a topic that
//! coalesces through [`super::coalesce`]) or its gate ([`GateClient`]), or
//! the demo its route. Nothing is stored here; a rejected request reaches no object.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::value::RawValue;
use worker::worker_sys::web_sys;
use worker::{Context, Env, event};

use super::coalesce;
use super::config;
use super::demo;
use super::gate_client::GateClient;
use super::http::{self, Incoming, Reply};
use super::key_client::KeyClient;
use super::key_window::ISOLATE;
use super::points::Points;
use crate::error::ApiError;
use crate::http::batch;
use crate::http::client_token::{CLIENT_RATE_BINDING, MintRequest};
use crate::http::plan::{Action, Asked, BatchPlan, EventPlan, Setup, plan};
use crate::http::route::Route;
use crate::key::KeyCall;
use crate::key::KeyRequest;
use crate::metrics::{self, Metrics, Point, What};
use crate::queue::gate::{FULL_RETRY_SECS, GateAnswer, GateOp, Gates};
use crate::queue::room::{Room, RoomCache};
use crate::recover::{RecoverRequest, recover};
use crate::topic::{Topic, Topics};

/// `Retry-After` of a spent budget across keys (seconds): the binding's period at most.
const BUDGET_RETRY_SECS: u64 = 60;

thread_local! {
    /// Which queue topics' dead letters are full, as this isolate last heard (`queue::room`).
    static ROOM: RefCell<RoomCache> = RefCell::new(RoomCache::default());
}

/// `429 dead_letters_full` if `topic`'s dead letters are at their bound (at
/// half of it for a `client` token's events): asked of its gate object at most
/// once per `ROOM_CHECK_MS` in this isolate.
async fn refuse_when_full(env: &Env, topic: &Topic, client: bool) -> Result<(), ApiError> {
    let now = http::now_ms();
    let room = match ROOM.with_borrow(|cache| cache.fresh(&topic.name, now)) {
        Some(room) => room,
        None => {
            // A gate that cannot answer refuses nothing.
            let answer = GateClient { env: env.clone() }.ask(&topic.name, GateOp::Room).await;
            let room = match answer {
                Ok(GateAnswer::Room { full, clients_full }) => Room { full, clients_full },
                _ => Room::default(),
            };
            ROOM.with_borrow_mut(|cache| cache.record(&topic.name, room, now));
            room
        }
    };
    if room.refuses(client) { Err(ApiError::DeadLettersFull { retry_after_secs: FULL_RETRY_SECS }) } else { Ok(()) }
}

/// Spend one of `holder`'s events across keys (a `key_prefix` client token's
/// budget, [`CLIENT_RATE_BINDING`]): `429 too_many_events` when it is spent.
async fn spend_budget(env: &Env, holder: &str) -> Result<(), ApiError> {
    let limiter = env.rate_limiter(CLIENT_RATE_BINDING).map_err(|_| {
        ApiError::Config(format!(
            "a key_prefix client token's events need the {CLIENT_RATE_BINDING} rate limiting binding \
             ([[ratelimits]] in wrangler.toml)"
        ))
    })?;
    let outcome = limiter.limit(holder.to_string()).await.map_err(|e| ApiError::Internal(e.to_string()))?;
    if outcome.success { Ok(()) } else { Err(ApiError::ClientBudgetSpent { retry_after_secs: BUDGET_RETRY_SECS }) }
}

#[event(fetch)]
async fn fetch(req: web_sys::Request, env: Env, ctx: Context) -> Result<Reply, worker::Error> {
    let req = match Incoming::new(req) {
        Ok(req) => req,
        Err(e) => return http::respond_as(Err(e), false).map_err(worker::Error::from),
    };
    let origin = req.header("origin");
    let auth = req.header("authorization");
    // Asked only where it matters (health, a private error): not on every event.
    let admin = || config::is_admin(&env, auth.as_deref());
    let result = handle(req, &env, &ctx, origin.as_deref(), auth.as_deref(), &admin).await;
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
    authorization: Option<&str>,
    admin: &dyn Fn() -> bool,
) -> Result<Reply, ApiError> {
    let path = req.path();
    let route = Route::parse(req.method(), &path)?;
    if route == Route::Health {
        // Anyone learns whether the worker is up; an admin, its topics (or what is wrong).
        let config = config::load(env).map_err(|e| ApiError::Unhealthy(e.message()))?;
        let topics: Vec<&str> = config.topics.iter().map(|t| t.name.as_str()).collect();
        let body =
            if admin() { serde_json::json!({"ok": true, "topics": topics}) } else { serde_json::json!({"ok": true}) };
        return http::json(200, &body);
    }
    let config = config::load(env)?;
    let (idempotency_key, query) = (req.header("idempotency-key"), req.query());
    let now_s = http::now_ms() / 1000;
    let asked = Asked {
        path: &path,
        authorization,
        idempotency_key: idempotency_key.as_deref(),
        query: query.as_deref(),
        now_s,
        host: Some(req.host()),
    };
    let setup = Setup { tokens: &config.tokens, topics: &config.topics, demo: config.demo_sink };
    let counted = route.clone();
    let result = serve(&req, env, ctx, origin, route, &asked, &setup, &config).await;
    if let Err(error) = &result {
        count_refusal(env, &config.topics, &counted, error);
    }
    // This isolate's sums for the topic go over with its next event request once due.
    if let Route::Key { topic, request: KeyRequest::Event { .. }, .. } | Route::Batch { topic } = &counted
        && config.topics.get(topic).is_some()
    {
        hand_over(env, ctx, topic);
    }
    result
}

/// Carry out `route`'s plan.
#[allow(clippy::too_many_arguments)] // the request's parts, as `handle` has them
async fn serve(
    req: &Incoming,
    env: &Env,
    ctx: &Context,
    origin: Option<&str>,
    route: Route,
    asked: &Asked<'_>,
    setup: &Setup<'_>,
    config: &config::Config,
) -> Result<Reply, ApiError> {
    match plan(route, asked, setup)?.action {
        Action::Preflight => {
            let headers = config.cors.preflight(origin)?;
            let headers: Vec<(&str, &str)> = headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
            http::reply(204, None, &headers)
        }
        Action::Key(call) => forward(env, call).await,
        Action::Event(event) => accept_event(req, env, ctx, event).await,
        Action::Gate { topic, op, forget_room } => {
            if forget_room {
                ROOM.with_borrow_mut(|room| room.forget(&topic.name));
            }
            // The gate object's text, unparsed: bodies reach the caller byte for byte.
            http::pass_on(&GateClient { env: env.clone() }.call(&topic.name, op).await?)
        }
        Action::Mint { topic, body_limit } => {
            let now_s = asked.now_s;
            let asked = MintRequest::parse(&req.bytes_within(body_limit).await?)?;
            let claims = asked.claims(&topic.name, now_s)?;
            let token = config.tokens.client_secrets(&topic.name)?.mint(&claims)?;
            http::json(201, &serde_json::json!({"token": token, "expires_at": claims.exp}))
        }
        Action::Batch(batch) => accept_batch(req, env, ctx, batch).await,
        Action::Demo(route) => demo::serve(req, env, config, route).await,
        Action::Metrics => metrics_text(env, &config.topics).await,
        Action::Recover { topic, body_limit } => {
            let asked = RecoverRequest::parse(&req.bytes_within(body_limit).await?)?;
            let done = recover(&GateClient { env: env.clone() }, &KeyClient { env }, &topic.name, &asked).await?;
            http::json(if done.remaining > 0 { 202 } else { 200 }, &done)
        }
    }
}

/// `GET /v1/metrics`: every topic's counters and target state, asked of the
/// topics' objects at once, in Prometheus' text format. `503` if one cannot answer.
async fn metrics_text(env: &Env, topics: &Topics) -> Result<Reply, ApiError> {
    let gates = GateClient { env: env.clone() };
    let asked = futures::future::join_all(topics.iter().map(|topic| {
        let gates = &gates;
        async move { (topic.name.clone(), gates.ask(&topic.name, GateOp::Metrics).await) }
    }))
    .await;
    let mut all = Vec::with_capacity(asked.len());
    for (name, answer) in asked {
        match answer {
            Ok(GateAnswer::Totals { totals, state }) => all.push((name, totals, state)),
            Ok(_) => return Err(ApiError::Internal(format!("topic {name:?}: an answer of another shape"))),
            Err(why) => {
                return Err(ApiError::Unavailable { why, retry_after_secs: crate::error::UNAVAILABLE_RETRY_SECS });
            }
        }
    }
    http::reply(200, Some(&metrics::prometheus(&all)), &[("content-type", metrics::CONTENT_TYPE)])
}

/// A refusal the router made of `route`'s events (a configured topic's):
/// counted (data point and isolate sums).
fn count_refusal(env: &Env, topics: &Topics, route: &Route, error: &ApiError) {
    let (topic, n) = match route {
        Route::Key { topic, request: KeyRequest::Event { .. }, .. } => (topic, 1.0),
        Route::Batch { topic } => (topic, 1.0),
        _ => return,
    };
    if topics.get(topic).is_none() {
        return; // an unknown topic's name is the caller's, not a series
    }
    let point = Point { count: n, ..Point::new(topic, What::Events, error.code()) };
    ISOLATE.with(|isolate| isolate.tally.add(&point));
    Points::new(env.clone()).point(point);
}

/// Hand this isolate's sums for `topic` to its object, once due, after the
/// answer. Whether they are due is asked here, so a request begins no task
/// of its own (a promise, its closure) unless there is something to send.
fn hand_over(env: &Env, ctx: &Context, topic: &str) {
    let isolate = ISOLATE.with(Rc::clone);
    let Some(counts) = isolate.tally.due(topic, http::now_ms()) else { return };
    let (gates, topic) = (GateClient { env: env.clone() }, topic.to_string());
    ctx.wait_until(async move { metrics::send_counts(&isolate.tally, &gates, &topic, counts).await });
}

/// Carry out `event`: room, body, then its key's object (alone or coalesced).
async fn accept_event(req: &Incoming, env: &Env, ctx: &Context, event: EventPlan<'_>) -> Result<Reply, ApiError> {
    if event.intake.room_check {
        refuse_when_full(env, event.topic, event.intake.client).await?;
    }
    let body = event_body(req, event.intake.body_limit).await?;
    if let Some(holder) = &event.intake.budget {
        spend_budget(env, holder).await?;
    }
    if event.intake.coalesce {
        return coalesce::event(env, ctx, event.topic, event.key, body, event.idempotency_key).await;
    }
    forward(env, event.call(body)).await
}

/// Carry out `plan`: room, body, every key's share checked, then each share
/// to its key's object (alone or coalesced), answered per event.
async fn accept_batch(req: &Incoming, env: &Env, ctx: &Context, plan: BatchPlan<'_>) -> Result<Reply, ApiError> {
    let topic = plan.topic;
    if plan.intake.room_check {
        refuse_when_full(env, topic, plan.intake.client).await?;
    }
    let mut events = batch::parse(&req.bytes_within(plan.intake.body_limit).await?, topic.max_body_bytes)?;
    let count = events.len();
    let groups = batch::by_key(&events);
    // Every key is checked before any is stored.
    let mut shares = Vec::with_capacity(groups.len());
    for (key, places) in &groups {
        let first = places.first().copied().unwrap_or_default();
        plan.share(key).map_err(|error| ApiError::BatchItem { index: first, error: Box::new(error) })?;
        // Each event belongs to one key's places: moved into its share, not copied.
        let share = places
            .iter()
            .map(|&i| (std::mem::take(&mut events[i].event), plan.scoped(events[i].idempotency_key.take())))
            .collect();
        shares.push((key.clone(), share));
    }
    let plan = &plan;
    let answers = futures::future::join_all(shares.into_iter().map(|(key, events)| async move {
        if let Some(holder) = &plan.intake.budget {
            spend_budget(env, holder).await.map_err(|e| http::share_failed(&e))?;
        }
        if plan.intake.coalesce {
            return coalesce::batch_share(env, ctx, topic, key, events).await;
        }
        key_answer(env, plan.call(key, events)).await
    }))
    .await;
    let places = groups.into_iter().map(|(_, places)| places);
    http::json_text(207, &batch::results(count, places.zip(answers).collect()))
}

/// The event's JSON, within `limit` bytes and checked for syntax.
async fn event_body(req: &Incoming, limit: usize) -> Result<String, ApiError> {
    let bytes = req.bytes_within(limit).await?;
    let raw: &RawValue = serde_json::from_slice(&bytes).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    Ok(raw.get().to_string())
}

/// One key's share of a batch, answered: its events' `{"window", "seq"}`, or
/// the status and error all of them got.
async fn key_answer(env: &Env, call: KeyCall) -> batch::KeyAnswer {
    let answer = KeyClient { env }.call(call).await.map_err(|e| http::share_failed(&e))?;
    batch::read_key_answer(&answer, http::share_failed)
}

/// Hand `call` to its key's object and pass its answer on.
async fn forward(env: &Env, call: KeyCall) -> Result<Reply, ApiError> {
    http::pass_on(&KeyClient { env }.call(call).await?)
}
