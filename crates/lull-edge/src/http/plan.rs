//! The router's decisions, runtime-free, as [`crate::queue::consume`] holds
//! the queue consumer's: [`plan`] turns a parsed [`Route`], who asks
//! ([`Asked`]: the credential it presented, its headers, query and time) and
//! the configuration ([`Setup`]: tokens, topics, whether the demo is on) into
//! one [`Plan`] — which object to ask (a key's, or a queue topic's gate),
//! with which call, what credential that took, what bound its body has,
//! whether its events coalesce — or the error the request gets before any
//! body is read or any object asked. `runtime/router.rs` carries a plan out.
//!
//! One place holds each rule:
//! - **credentials**: the least each route needs is one table (`requires`),
//!   checked once, here; a batch's caller is identified and its topic checked
//!   here (no byte of a batch another topic's token sent is read), each of
//!   its keys once its body is read ([`BatchPlan::share`]);
//! - **topics**: a route's topic must be configured, a queue route's must
//!   deliver by queue — checked after the credential, so an unknown caller
//!   learns nothing of the topics;
//! - **coalescing** ([`Intake::coalesce`]): the topic's `coalesce`, never for
//!   events under a client token's `events_per_minute` budget;
//! - **whose** an event is ([`Caller::holder`]): its producer `Idempotency-Key`
//!   is scoped by its caller ([`scoped_key`]), so one caller's key never answers
//!   another's event, and a client token's `events_per_minute` is its holder's;
//!   a `key_prefix` client token's events also spend its holder's budget across
//!   keys ([`Intake::budget`]);
//! - **bodies** ([`Intake::body_limit`], [`SMALL_BODY_BYTES`]): an event's
//!   bound is its topic's `max_body_bytes`, a batch's [`MAX_BATCH_BYTES`];
//! - **the demo**: its routes exist only while it is on, and only for a
//!   loopback host (`Asked::host`), before any credential is asked for.

use crate::demo::route::DemoRoute;
use crate::error::ApiError;
use crate::http::auth::{Access, Caller, Target, Tokens};
use crate::http::batch::MAX_BATCH_BYTES;
use crate::http::route::{Route, is_loopback, producer_key, with_page, with_queue_page};
use crate::key::{KeyCall, KeyRequest};
use crate::names::Key;
use crate::queue::gate::GateOp;
use crate::topic::{Topic, Topics};

/// Bodies of admin routes (a client token's request) are at most this long.
pub const SMALL_BODY_BYTES: usize = 4 * 1024;

/// What the router read off a request, for [`plan`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Asked<'a> {
    /// The URL's path, as the runtime gave it (a `404` names it).
    pub path: &'a str,
    /// The `Authorization` header: the credential presented, if any.
    pub authorization: Option<&'a str>,
    /// The `Idempotency-Key` header, if any.
    pub idempotency_key: Option<&'a str>,
    /// The URL's query, if any (a page of dead letters or of the timeline).
    pub query: Option<&'a str>,
    /// Now (unix seconds), for client tokens' `exp` and `nbf`.
    pub now_s: u64,
    /// The request URL's host and port (its `Host`), if any: the demo answers a loopback one only.
    pub host: Option<&'a str>,
}

/// The configuration, as far as a plan needs it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setup<'c> {
    /// The admin, ingest and topics' own tokens, and the client tokens' secrets.
    pub tokens: &'c Tokens,
    /// The topics.
    pub topics: &'c Topics,
    /// Whether the demo's routes are served (`LULL_DEMO_SINK = "on"` in a build with the demo).
    pub demo: bool,
}

/// What the router does with one request, decided before any body is read
/// or any object asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan<'c> {
    /// The least credential the route required and the caller presented
    /// (`None`: it requires none — a preflight, a delivery to the demo sink,
    /// the demo page's endpoints).
    pub access: Option<Access>,
    /// What to carry out.
    pub action: Action<'c>,
}

/// What a plan carries out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action<'c> {
    /// `OPTIONS`: answer the browser's CORS preflight.
    Preflight,
    /// Ask a key's object `call` and pass its answer on (every key operation but an event).
    Key(KeyCall),
    /// Accept one event of a key: read its body, then hand it to the key's object.
    Event(EventPlan<'c>),
    /// Ask a queue topic's gate object and pass its answer on.
    Gate {
        /// The topic (it delivers by queue).
        topic: &'c Topic,
        /// What to ask (a dead-letter page with its page read from the query).
        op: GateOp,
        /// Whether this isolate forgets what it knew of the topic's room for
        /// events first (a replay or a discard may make room).
        forget_room: bool,
    },
    /// Mint a client token for `topic` from the body's request.
    Mint {
        /// The topic the token is for.
        topic: &'c Topic,
        /// The body's bound (bytes): [`SMALL_BODY_BYTES`].
        body_limit: usize,
    },
    /// Accept a batch of one topic's events.
    Batch(BatchPlan<'c>),
    /// One of the demo's routes, for the demo to serve (`crate::demo::serve`).
    Demo(DemoRoute),
    /// Every topic's counters, for `GET /v1/metrics`.
    Metrics,
    /// Replay `topic`'s windows dead-lettered since the body's time (`crate::recover`).
    Recover {
        /// The topic.
        topic: &'c Topic,
        /// The body's bound (bytes): [`SMALL_BODY_BYTES`].
        body_limit: usize,
    },
}

/// How a request's events enter their topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Intake {
    /// The request body's bound (bytes): an event's is its topic's
    /// `max_body_bytes`, a batch's [`MAX_BATCH_BYTES`] (each of its events within the topic's).
    pub body_limit: usize,
    /// Ask the topic's gate for room first: a queue topic refuses events
    /// while its dead letters are full (`429 dead_letters_full`).
    pub room_check: bool,
    /// The events are a client token's: a queue topic refuses them from half
    /// its dead-letter bound (`crate::queue::room`), so a page cannot fill the
    /// bound that backends' events are refused at.
    pub client: bool,
    /// Whether the events ride with others of their key
    /// ([`crate::http::coalesce`]): the topic's `coalesce`, never under a
    /// client token's `events_per_minute` (that budget is spent event by
    /// event, not refused a whole batch at a time).
    pub coalesce: bool,
    /// The client token's `events_per_minute` for the key, if it sets one.
    pub events_per_minute: Option<u32>,
    /// Whose events these are ([`Caller::holder`]): a client token's holder
    /// spends its own `events_per_minute`.
    pub holder: String,
    /// A `key_prefix` client token's holder: each key's share of its events
    /// first spends one of the holder's events across keys (the
    /// `LULL_CLIENT_RATE` binding), so a token cannot make keys without bound.
    pub budget: Option<String>,
}

/// A producer's `Idempotency-Key` as its key object keeps it: scoped by the
/// caller's holder (`"{holder} {key}"`; a key has no space), so a key one
/// caller used is another caller's to use too.
pub(crate) fn scoped_key(holder: &str, idempotency_key: Option<String>) -> Option<String> {
    idempotency_key.map(|key| format!("{holder} {key}"))
}

/// One event of a key, its body still to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EventPlan<'c> {
    /// Its topic.
    pub topic: &'c Topic,
    /// Its key.
    pub key: Key,
    /// The producer's `Idempotency-Key`, checked and scoped by its caller ([`scoped_key`]).
    pub idempotency_key: Option<String>,
    /// How it enters the topic.
    pub intake: Intake,
}

impl EventPlan<'_> {
    /// The key's call for the event's JSON `body` (sent alone: it does not coalesce).
    pub(crate) fn call(self, body: String) -> KeyCall {
        let (events_per_minute, holder) = self.intake.client_minute();
        let request = KeyRequest::Event { body, idempotency_key: self.idempotency_key, events_per_minute, holder };
        KeyCall { topic: self.topic.name.clone(), key: self.key, request }
    }
}

/// A batch of one topic's events, its body still to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BatchPlan<'c> {
    /// Its topic.
    pub topic: &'c Topic,
    /// How its events enter the topic.
    pub intake: Intake,
    /// Who asked: identified, each key still to check ([`BatchPlan::share`]).
    pub caller: Caller,
}

impl Intake {
    /// What a key object counts against a client token's `events_per_minute`:
    /// the bound and the holder it is counted for (none without one).
    fn client_minute(&self) -> (Option<u32>, Option<String>) {
        (self.events_per_minute, self.events_per_minute.map(|_| self.holder.to_string()))
    }
}

impl BatchPlan<'_> {
    /// Whether the caller may post the events of `key` (a client token covers
    /// some keys only, a topic's own ingest token its topic only): `403` if
    /// not. Every key is checked before any is stored.
    pub(crate) fn share(&self, key: &Key) -> Result<(), ApiError> {
        let target = Target { topic: Some(&self.topic.name), key: Some(key.as_str()), now_s: 0 };
        if self.caller.may(Access::Ingest, target) { Ok(()) } else { Err(ApiError::Forbidden) }
    }

    /// An event's `Idempotency-Key` (checked) as its key object keeps it ([`scoped_key`]).
    pub(crate) fn scoped(&self, idempotency_key: Option<String>) -> Option<String> {
        scoped_key(&self.intake.holder, idempotency_key)
    }

    /// The key's call for its share of the batch, its idempotency keys scoped
    /// already ([`BatchPlan::scoped`]; sent alone: it does not coalesce).
    pub(crate) fn call(&self, key: Key, events: Vec<(String, Option<String>)>) -> KeyCall {
        let (events_per_minute, holder) = self.intake.client_minute();
        let request = KeyRequest::Events { events, events_per_minute, holder };
        KeyCall { topic: self.topic.name.clone(), key, request }
    }
}

/// The plan for `route`, asked as `asked` says, under `setup`; or the error
/// the request gets before anything else happens (in this order: the demo
/// switch, the credential, the topic and its queue, the producer's
/// `Idempotency-Key`, the query's page).
pub(crate) fn plan<'c>(route: Route, asked: &Asked<'_>, setup: &Setup<'c>) -> Result<Plan<'c>, ApiError> {
    // The demo answers this machine only (a loopback host: no other site's
    // page reaches it by a name rebound to 127.0.0.1), else as if not built.
    if matches!(route, Route::Demo(_)) && !(setup.demo && asked.host.is_some_and(is_loopback)) {
        return Err(ApiError::NotFound(format!("route {:?}", asked.path)));
    }
    let required = requires(&route, asked.now_s);
    let caller = match required {
        None => None,
        Some((need, target)) => {
            let caller = setup.tokens.identify(asked.authorization, target)?;
            // A batch's keys are known once its body is read (each is checked
            // then); its topic now, before a byte of it is read.
            let may = match route {
                Route::Batch { .. } => posts_to(&caller, target),
                _ => caller.may(need, target),
            };
            if !may {
                return Err(ApiError::Forbidden);
            }
            Some(caller)
        }
    };
    let access = required.map(|(need, _)| need);
    let action = match route {
        Route::Health => return Err(ApiError::Internal("health is answered before any plan".into())),
        Route::Preflight => Action::Preflight,
        Route::Demo(demo) => Action::Demo(demo),
        Route::Metrics => Action::Metrics,
        Route::Recover { topic } => {
            Action::Recover { topic: topic_of(setup.topics, topic)?, body_limit: SMALL_BODY_BYTES }
        }
        Route::MintClientToken { topic } => {
            let topic = topic_of(setup.topics, topic)?;
            if !topic.client_tokens {
                return Err(ApiError::ClientTokensOff(topic.name.clone()));
            }
            Action::Mint { topic, body_limit: SMALL_BODY_BYTES }
        }
        Route::Topic { topic, op } => Action::Gate { topic: topic_of(setup.topics, topic)?, op, forget_room: false },
        Route::Queue { topic, op } => {
            let topic = queue_of(setup.topics, topic)?;
            let op = with_queue_page(op, asked.query)?;
            // Room may come back: this isolate asks again at the next event.
            let forget_room = op.frees_room();
            Action::Gate { topic, op, forget_room }
        }
        Route::Batch { topic } => {
            let topic = topic_of(setup.topics, topic)?;
            let caller = caller.ok_or_else(|| ApiError::Internal("a batch's caller is identified".into()))?;
            let intake = intake(topic, &caller, MAX_BATCH_BYTES);
            Action::Batch(BatchPlan { topic, intake, caller })
        }
        Route::Key { topic, key, request } => {
            let topic = topic_of(setup.topics, topic)?;
            let idempotency_key = producer_key(asked.idempotency_key)?;
            match request {
                KeyRequest::Event { .. } => {
                    let caller = caller.ok_or_else(|| ApiError::Internal("an event's caller is identified".into()))?;
                    let intake = intake(topic, &caller, topic.max_body_bytes);
                    let idempotency_key = scoped_key(&intake.holder, idempotency_key);
                    Action::Event(EventPlan { topic, key, idempotency_key, intake })
                }
                request => {
                    let request = with_page(request, asked.query)?;
                    Action::Key(KeyCall { topic: topic.name.clone(), key, request })
                }
            }
        }
    };
    Ok(Plan { access, action })
}

/// The least credential `route` needs, and what it is about: the one table
/// of credentials (`None`: it needs none).
fn requires(route: &Route, now_s: u64) -> Option<(Access, Target<'_>)> {
    fn on(topic: &str, now_s: u64) -> Target<'_> {
        Target { topic: Some(topic), key: None, now_s }
    }
    match route {
        Route::Health | Route::Preflight => None,
        Route::MintClientToken { topic } => Some((Access::Admin, on(topic, now_s))),
        Route::Batch { topic } => Some((Access::Ingest, on(topic, now_s))),
        Route::Key { topic, key, request } => {
            Some((key_access(request), Target { key: Some(key.as_str()), ..on(topic, now_s) }))
        }
        // The queue routes and the demo sink's have always checked a client
        // token at time 0 (so it is refused as unauthorized, not forbidden): kept so.
        Route::Queue { topic, .. } | Route::Topic { topic, .. } | Route::Recover { topic } => {
            Some((Access::Admin, on(topic, 0)))
        }
        Route::Demo(demo) => demo.needs_admin().then_some((Access::Admin, Target::default())),
        Route::Metrics => Some((Access::Admin, Target::default())),
    }
}

/// Whether `caller` may post events to some key of `target`'s topic (a
/// batch's: its keys are checked once its body is read): a client token of
/// that topic, or a caller that may post to it whatever the key.
fn posts_to(caller: &Caller, target: Target<'_>) -> bool {
    match caller {
        Caller::Client(claims) => target.topic == Some(claims.topic.as_str()),
        caller => caller.may(Access::Ingest, target),
    }
}

/// The least credential a key request needs: posting events is ingest;
/// flushing and cancelling are their own (a client token whose `ops` names
/// them may); the rest admin.
fn key_access(request: &KeyRequest) -> Access {
    match request {
        KeyRequest::Event { .. } | KeyRequest::Events { .. } => Access::Ingest,
        KeyRequest::Flush => Access::Flush,
        KeyRequest::Cancel => Access::Cancel,
        KeyRequest::Status
        | KeyRequest::DeadLetters { .. }
        | KeyRequest::Replay { .. }
        | KeyRequest::ReplayAll
        | KeyRequest::ReplaySince { .. }
        | KeyRequest::Discard { .. }
        | KeyRequest::Timeline { .. } => Access::Admin,
    }
}

/// The topic called `name`: `404 unknown_topic` if none is configured.
fn topic_of(topics: &Topics, name: String) -> Result<&Topic, ApiError> {
    topics.get(&name).ok_or(ApiError::UnknownTopic(name))
}

/// The queue topic called `name`: `404 unknown_topic`, or `404 not_found` if it delivers by webhook.
fn queue_of(topics: &Topics, name: String) -> Result<&Topic, ApiError> {
    let topic = topic_of(topics, name)?;
    if topic.queue.is_none() {
        return Err(ApiError::NotFound(format!("queue of topic {:?} (it delivers by webhook)", topic.name)));
    }
    Ok(topic)
}

/// How `caller`'s events enter `topic`, the request's body within `body_limit`.
fn intake(topic: &Topic, caller: &Caller, body_limit: usize) -> Intake {
    let events_per_minute = caller.events_per_minute();
    Intake {
        body_limit,
        room_check: topic.queue.is_some(),
        client: matches!(caller, Caller::Client(_)),
        coalesce: topic.coalesce && events_per_minute.is_none(),
        events_per_minute,
        holder: caller.holder().to_string(),
        budget: caller.prefix_holder().map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::client_token::{Claims, ClientOp, topic_secrets};
    use crate::key::timeline::TIMELINE_PAGE;
    use lull_core::WindowId;

    const ADMIN: &str = "admin-token-0000";
    const INGEST: &str = "ingest-token-000";
    const ORDERS: &str = "orders-token-000";
    const SECRET: &str = "client-secret-one-0123456789abcdef";
    /// A time as the worker reads it (a client token checked at 0 finds its lifetime too long).
    const NOW: u64 = 1_700_000_000;

    struct World {
        tokens: Tokens,
        topics: Topics,
    }

    fn world() -> World {
        let topics = Topics::parse(
            r#"{"orders": {"target": "https://a/o", "wait_ms": 1, "ingest_token_env": "ORDERS_TOKEN",
                           "client_tokens": true},
                "plain": {"target": "https://a/p", "wait_ms": 1, "coalesce": false, "max_body_bytes": 1000},
                "q": {"target": "https://a/q", "wait_ms": 1, "delivery": "queue", "client_tokens": true}}"#,
        )
        .unwrap();
        let own = [("orders".to_string(), "ORDERS_TOKEN".to_string(), ORDERS.to_string())];
        let client = topic_secrets(&topics, Some(SECRET), |_| None).unwrap();
        let tokens = Tokens::new(ADMIN, INGEST, &own, client).unwrap();
        World { tokens, topics }
    }

    /// A client token for `key` (or every key starting with it, `prefix`) of
    /// `topic`, granted `ops`, held by `sub` (or by itself).
    fn token(world: &World, topic: &str, key: &str, prefix: bool, ops: &[ClientOp], sub: Option<&str>) -> String {
        let mut claims = Claims::new(topic, key, prefix, NOW, 600, None);
        claims.ops = (!ops.is_empty()).then(|| ops.to_vec());
        claims.sub = sub.map(str::to_string);
        format!("Bearer {}", world.tokens.client_secrets(topic).unwrap().mint(&claims).unwrap())
    }

    /// A client token for `key` of `topic` that may flush and cancel it too.
    fn client(world: &World, topic: &str, key: &str, events_per_minute: Option<u32>) -> String {
        let mut claims = Claims::new(topic, key, false, NOW, 600, events_per_minute);
        claims.ops = Some(vec![ClientOp::Flush, ClientOp::Cancel]);
        format!("Bearer {}", world.tokens.client_secrets(topic).unwrap().mint(&claims).unwrap())
    }

    /// Every credential kind, by name: admin, global ingest, a topic's own
    /// ingest token (`orders`'), a client token for key `k` of `orders` that
    /// may flush and cancel it (in scope on the routes below) and one for
    /// another key (out of scope), none.
    fn credentials(world: &World) -> [(&'static str, Option<String>); 6] {
        [
            ("admin", Some(format!("Bearer {ADMIN}"))),
            ("ingest", Some(format!("Bearer {INGEST}"))),
            ("own", Some(format!("Bearer {ORDERS}"))),
            ("client in scope", Some(client(world, "orders", "k", None))),
            ("client out of scope", Some(client(world, "orders", "other", None))),
            ("none", None),
        ]
    }

    fn plan_of<'c>(
        world: &'c World,
        demo: bool,
        method: &str,
        target: &str,
        authorization: Option<&str>,
        idempotency_key: Option<&str>,
    ) -> Result<Plan<'c>, ApiError> {
        let (path, query) = target.split_once('?').map_or((target, None), |(p, q)| (p, Some(q)));
        let asked = Asked { path, authorization, idempotency_key, query, now_s: NOW, host: Some("127.0.0.1:8787") };
        let setup = Setup { tokens: &world.tokens, topics: &world.topics, demo };
        plan(Route::parse(method, path)?, &asked, &setup)
    }

    /// A plan's outcome in a word: its action's kind, or the error's code.
    fn outcome(result: &Result<Plan<'_>, ApiError>) -> &'static str {
        match result {
            Ok(plan) => match plan.action {
                Action::Preflight => "preflight",
                Action::Key(_) => "key",
                Action::Event(_) => "event",
                Action::Gate { .. } => "gate",
                Action::Mint { .. } => "mint",
                Action::Batch(_) => "batch",
                Action::Demo(_) => "demo",
                Action::Metrics => "metrics",
                Action::Recover { .. } => "recover",
            },
            Err(e) => e.code(),
        }
    }

    const UNAUTHORIZED: &str = "unauthorized";
    const FORBIDDEN: &str = "forbidden";

    /// Every route of the API by every credential kind (in the order of
    /// [`credentials`]): what each gets, and the access each route requires.
    #[test]
    fn every_route_by_every_credential() {
        let world = world();
        let (u, f) = (UNAUTHORIZED, FORBIDDEN);
        let key = "/v1/topics/orders/keys/k";
        let queue = "/v1/topics/q/queue";
        let admin = Some(Access::Admin);
        let rows: Vec<(&str, String, Option<Access>, [&str; 6])> = vec![
            ("POST", format!("{key}/events"), Some(Access::Ingest), ["event", "event", "event", "event", f, u]),
            ("GET", key.to_string(), admin, ["key", f, f, f, f, u]),
            ("DELETE", key.to_string(), Some(Access::Cancel), ["key", f, f, "key", f, u]),
            ("POST", format!("{key}/flush"), Some(Access::Flush), ["key", f, f, "key", f, u]),
            ("GET", format!("{key}/dead-letters"), admin, ["key", f, f, f, f, u]),
            ("POST", format!("{key}/dead-letters/7/retry"), admin, ["key", f, f, f, f, u]),
            ("POST", format!("{key}/dead-letters/retry"), admin, ["key", f, f, f, f, u]),
            ("DELETE", format!("{key}/dead-letters/7"), admin, ["key", f, f, f, f, u]),
            ("GET", format!("{key}/timeline"), admin, ["key", f, f, f, f, u]),
            // Identified here; each key of the body checked once it is read (below).
            (
                "POST",
                "/v1/topics/orders/events:batch".into(),
                Some(Access::Ingest),
                ["batch", "batch", "batch", "batch", "batch", u],
            ),
            ("POST", "/v1/topics/orders/client-tokens".into(), admin, ["mint", f, f, f, f, u]),
            // A client token is checked at time 0 here, as ever: refused as unauthorized.
            ("GET", queue.to_string(), admin, ["gate", f, f, u, u, u]),
            ("GET", format!("{queue}/dead-letters"), admin, ["gate", f, f, u, u, u]),
            ("POST", format!("{queue}/dead-letters/7/retry"), admin, ["gate", f, f, u, u, u]),
            ("POST", format!("{queue}/dead-letters/retry"), admin, ["gate", f, f, u, u, u]),
            ("DELETE", format!("{queue}/dead-letters/7"), admin, ["gate", f, f, u, u, u]),
            ("GET", "/v1/topics/orders".into(), admin, ["gate", f, f, u, u, u]),
            ("POST", "/v1/topics/orders/target:resume".into(), admin, ["gate", f, f, u, u, u]),
            ("GET", "/v1/metrics".into(), admin, ["metrics", f, f, u, u, u]),
            ("POST", "/v1/topics/orders/recover".into(), admin, ["recover", f, f, u, u, u]),
            ("OPTIONS", format!("{key}/events"), None, ["preflight"; 6]),
        ];
        for (method, path, access, want) in rows {
            for ((who, credential), want) in credentials(&world).iter().zip(want) {
                let got = plan_of(&world, false, method, &path, credential.as_deref(), None);
                assert_eq!(outcome(&got), want, "{method} {path} by {who}: {got:?}");
                if let Ok(plan) = got {
                    assert_eq!(plan.access, access, "{method} {path}: the access it required");
                }
            }
        }
    }

    #[test]
    fn the_demo_routes_need_the_demo_on_then_the_sinks_admin_token() {
        let world = world();
        let u = UNAUTHORIZED;
        let rows: [(&str, &str, Option<Access>, [&str; 6]); 5] = [
            // The sink's credential is checked about nothing, at time 0, as ever.
            ("GET", "/sink", Some(Access::Admin), ["demo", FORBIDDEN, FORBIDDEN, u, u, u]),
            ("PUT", "/sink/failing/k", Some(Access::Admin), ["demo", FORBIDDEN, FORBIDDEN, u, u, u]),
            ("POST", "/sink", None, ["demo"; 6]),
            ("GET", "/demo/search", None, ["demo"; 6]),
            ("GET", "/demo/token", None, ["demo"; 6]),
        ];
        for (method, path, access, want) in rows {
            for ((who, credential), want) in credentials(&world).iter().zip(want) {
                let off = plan_of(&world, false, method, path, credential.as_deref(), None);
                assert_eq!(outcome(&off), "not_found", "{method} {path} by {who}, the demo off");
                if !crate::demo::BUILT {
                    continue;
                }
                let on = plan_of(&world, true, method, path, credential.as_deref(), None);
                assert_eq!(outcome(&on), want, "{method} {path} by {who}: {on:?}");
                if let Ok(plan) = on {
                    assert_eq!(plan.access, access, "{method} {path}");
                }
            }
        }
        let off = plan_of(&world, false, "GET", "/sink", None, None).unwrap_err();
        assert_eq!(off.message(), "route \"/sink\" not found");
    }

    /// The demo answers a loopback host only (what a browser on this machine
    /// names it; a page of another site whose name was rebound to 127.0.0.1
    /// sends its own): anywhere else its routes are not found, as if it were
    /// not built, and the API answers as ever.
    #[test]
    fn the_demo_answers_a_loopback_host_only() {
        let world = world();
        let asked = |host: Option<&str>, method: &str, path: &str| {
            let asked = Asked { path, host, now_s: NOW, ..Asked::default() };
            let setup = Setup { tokens: &world.tokens, topics: &world.topics, demo: true };
            outcome(&Route::parse(method, path).and_then(|route| plan(route, &asked, &setup)))
        };
        let local =
            ["127.0.0.1:8787", "127.0.0.1", "localhost:8787", "LOCALHOST", "[::1]:8787", "[::1]", "127.1.2.3:80"];
        let elsewhere = [
            "lull.example.com",
            "lull.example.com:8787",
            "127.0.0.1.nip.io:8787",
            "localhost.example.com",
            "0.0.0.0:8787",
            "192.168.1.2:8787",
            "[::2]:8787",
            "",
            "127.0.0.1:8787@evil.example",
        ];
        for (method, path) in [("POST", "/sink"), ("GET", "/demo/token"), ("GET", "/demo/search")] {
            for host in local {
                let want = if crate::demo::BUILT { "demo" } else { "not_found" };
                assert_eq!(asked(Some(host), method, path), want, "{method} {path} at {host}");
            }
            for host in elsewhere.map(Some).into_iter().chain([None]) {
                assert_eq!(asked(host, method, path), "not_found", "{method} {path} at {host:?}");
            }
        }
        let health =
            Asked { path: "/v1/topics/orders/keys/k/events", host: Some("lull.example.com"), ..Asked::default() };
        let setup = Setup { tokens: &world.tokens, topics: &world.topics, demo: true };
        let route = Route::parse("POST", health.path).unwrap();
        assert_eq!(outcome(&plan(route, &health, &setup)), UNAUTHORIZED, "the API answers any host");
    }

    #[test]
    fn a_batch_is_identified_at_once_and_checked_key_by_key() {
        let world = world();
        let key = |k: &str| Key::new(k.into()).unwrap();
        let batch = |topic: &str, credential: &str| match plan_of(
            &world,
            false,
            "POST",
            &format!("/v1/topics/{topic}/events:batch"),
            Some(credential),
            None,
        ) {
            Ok(Plan { action: Action::Batch(batch), .. }) => batch,
            other => panic!("{other:?}"),
        };
        let in_scope = batch("orders", &client(&world, "orders", "k", None));
        assert_eq!(in_scope.share(&key("k")), Ok(()));
        assert_eq!(in_scope.share(&key("other")), Err(ApiError::Forbidden), "a key the client token does not cover");
        let own = format!("Bearer {ORDERS}");
        assert_eq!(batch("orders", &own).share(&key("any")), Ok(()), "a topic's own token, its topic");
        // Another topic's own token is refused at once (the test below).
        for credential in [format!("Bearer {ADMIN}"), format!("Bearer {INGEST}")] {
            assert_eq!(batch("plain", &credential).share(&key("any")), Ok(()));
        }
        let call = batch("orders", &format!("Bearer {ADMIN}")).call(key("k"), vec![("1".into(), None)]);
        let events = KeyRequest::Events { events: vec![("1".into(), None)], events_per_minute: None, holder: None };
        assert_eq!(call, KeyCall { topic: "orders".into(), key: key("k"), request: events });
        let bad = plan_of(&world, false, "POST", "/v1/topics/orders/events:batch", Some("Bearer nope-nope-nope"), None);
        assert_eq!(outcome(&bad), UNAUTHORIZED, "an unknown token is refused before the body is read");
    }

    /// A batch's keys are known only once its body is read, its topic at
    /// once: a caller that may post to no key of the topic (a client token
    /// or a topic's own token of another topic) is refused here, before a
    /// byte of its body is read.
    #[test]
    fn a_batch_from_a_caller_of_another_topic_is_refused_before_its_body_is_read() {
        let world = world();
        let batch = |topic: &str, credential: &str| {
            let path = format!("/v1/topics/{topic}/events:batch");
            outcome(&plan_of(&world, false, "POST", &path, Some(credential), None))
        };
        assert_eq!(batch("q", &client(&world, "orders", "k", None)), FORBIDDEN, "a client token of orders on q");
        assert_eq!(batch("plain", &client(&world, "orders", "k", None)), UNAUTHORIZED, "plain takes no client token");
        assert_eq!(batch("plain", &format!("Bearer {ORDERS}")), FORBIDDEN, "orders' own token");
        assert_eq!(batch("nope", &format!("Bearer {ORDERS}")), FORBIDDEN, "orders' own token, an unknown topic");
        assert_eq!(batch("orders", &client(&world, "orders", "other", None)), "batch", "its topic: keys checked later");
        assert_eq!(batch("orders", &format!("Bearer {ORDERS}")), "batch");
        assert_eq!(batch("plain", &format!("Bearer {INGEST}")), "batch");
    }

    #[test]
    fn events_take_their_topics_body_bound_room_check_and_coalescing() {
        let world = world();
        let admin = format!("Bearer {ADMIN}");
        let intake = |topic: &str, credential: &str| {
            let path = format!("/v1/topics/{topic}/keys/k/events");
            match plan_of(&world, false, "POST", &path, Some(credential), Some("p-1")) {
                Ok(Plan { action: Action::Event(event), .. }) => event.intake,
                other => panic!("{other:?}"),
            }
        };
        let backend = |body_limit, room_check, coalesce, holder: &str| Intake {
            body_limit,
            room_check,
            client: false,
            coalesce,
            events_per_minute: None,
            holder: holder.into(),
            budget: None,
        };
        assert_eq!(intake("orders", &admin), backend(64 * 1024, false, true, "admin"));
        assert_eq!(intake("plain", &admin), backend(1000, false, false, "admin"), "coalesce: false");
        assert_eq!(intake("q", &admin), backend(64 * 1024, true, true, "admin"), "a queue topic asks for room");
        assert_eq!(intake("q", &format!("Bearer {INGEST}")), backend(64 * 1024, true, true, "ingest"));
        let budget = client(&world, "orders", "k", Some(30));
        let limited = intake("orders", &budget);
        assert!(limited.holder.starts_with("client:") && limited.holder.len() == 23, "{limited:?}");
        let client_of = |body_limit, room_check, coalesce, events_per_minute| Intake {
            body_limit,
            room_check,
            client: true,
            coalesce,
            events_per_minute,
            holder: limited.holder.clone(),
            budget: None,
        };
        assert_eq!(limited, client_of(64 * 1024, false, false, Some(30)), "a per-minute budget");
        let unlimited = intake("orders", &client(&world, "orders", "k", None));
        assert_eq!((unlimited.client, unlimited.coalesce, unlimited.events_per_minute), (true, true, None));
        let q_budget = client(&world, "q", "k", Some(30));
        let batch = match plan_of(&world, false, "POST", "/v1/topics/q/events:batch", Some(&q_budget), None) {
            Ok(Plan { action: Action::Batch(batch), .. }) => batch.intake,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            batch,
            Intake { holder: batch.holder.clone(), ..client_of(MAX_BATCH_BYTES, true, false, Some(30)) },
            "a batch's body bound is its own"
        );

        let Ok(Plan { action: Action::Event(event), .. }) =
            plan_of(&world, false, "POST", "/v1/topics/orders/keys/k/events", Some(&budget), Some("p-1"))
        else {
            panic!()
        };
        let holder = Some(limited.holder.clone());
        let scoped = Some(format!("{} p-1", limited.holder));
        let request =
            KeyRequest::Event { body: "{}".into(), idempotency_key: scoped, events_per_minute: Some(30), holder };
        let k = Key::new("k".into()).unwrap();
        assert_eq!(event.call("{}".into()), KeyCall { topic: "orders".into(), key: k, request });
        let mint = plan_of(&world, false, "POST", "/v1/topics/orders/client-tokens", Some(&admin), None);
        let orders = world.topics.get("orders").unwrap();
        assert_eq!(mint.unwrap().action, Action::Mint { topic: orders, body_limit: SMALL_BODY_BYTES });
        let off = plan_of(&world, false, "POST", "/v1/topics/plain/client-tokens", Some(&admin), None);
        assert_eq!(outcome(&off), "client_tokens_off", "a topic that accepts no client tokens mints none");
    }

    /// A client token posts events; it flushes or cancels only what its `ops` names.
    #[test]
    fn a_client_token_flushes_and_cancels_only_when_its_ops_say_so() {
        let world = world();
        let key = "/v1/topics/orders/keys/k";
        let ask = |method: &str, path: &str, credential: &str| {
            outcome(&plan_of(&world, false, method, path, Some(credential), None))
        };
        let events_only = token(&world, "orders", "k", false, &[], None);
        assert_eq!(ask("POST", &format!("{key}/events"), &events_only), "event");
        assert_eq!(ask("POST", &format!("{key}/flush"), &events_only), FORBIDDEN);
        assert_eq!(ask("DELETE", key, &events_only), FORBIDDEN, "a page cannot drop what backends posted");
        let flush = token(&world, "orders", "k", false, &[ClientOp::Flush], None);
        assert_eq!(ask("POST", &format!("{key}/flush"), &flush), "key");
        assert_eq!(ask("DELETE", key, &flush), FORBIDDEN);
        let cancel = token(&world, "orders", "k", false, &[ClientOp::Cancel], None);
        assert_eq!(ask("DELETE", key, &cancel), "key");
        assert_eq!(ask("POST", &format!("{key}/flush"), &cancel), FORBIDDEN);
    }

    /// A producer's `Idempotency-Key` is its caller's: scoped by who posts it,
    /// one event or a batch's; a client token's by its `sub`, else by itself.
    #[test]
    fn idempotency_keys_are_scoped_by_caller() {
        let world = world();
        let path = "/v1/topics/orders/keys/k/events";
        let scoped = |credential: &str| match plan_of(&world, false, "POST", path, Some(credential), Some("p-1")) {
            Ok(Plan { action: Action::Event(event), .. }) => event.idempotency_key.unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(scoped(&format!("Bearer {ADMIN}")), "admin p-1");
        assert_eq!(scoped(&format!("Bearer {INGEST}")), "ingest p-1");
        assert_eq!(scoped(&format!("Bearer {ORDERS}")), "topic p-1");
        let one = scoped(&token(&world, "orders", "k", false, &[], None));
        let two = scoped(&token(&world, "orders", "k", false, &[ClientOp::Flush], None));
        assert!(one.starts_with("client:") && one.ends_with(" p-1"), "{one}");
        assert_ne!(one, two, "without a sub, each token is its own holder");
        let alice = scoped(&token(&world, "orders", "k", false, &[], Some("alice")));
        let alice_again = scoped(&token(&world, "orders", "k", false, &[ClientOp::Flush], Some("alice")));
        let bob = scoped(&token(&world, "orders", "k", false, &[], Some("bob")));
        assert_eq!(alice, alice_again, "one sub, one holder");
        assert_ne!(alice, bob);
        let batch = match plan_of(
            &world,
            false,
            "POST",
            "/v1/topics/orders/events:batch",
            Some(&format!("Bearer {INGEST}")),
            None,
        ) {
            Ok(Plan { action: Action::Batch(batch), .. }) => batch,
            other => panic!("{other:?}"),
        };
        assert_eq!(batch.scoped(Some("p-1".into())).as_deref(), Some("ingest p-1"));
        assert_eq!(batch.scoped(None), None);
    }

    /// A `key_prefix` client token spends its holder's budget across keys; a
    /// one-key token and backends do not.
    #[test]
    fn a_key_prefix_token_spends_its_holders_budget_across_keys() {
        let world = world();
        let intake = |credential: &str| match plan_of(
            &world,
            false,
            "POST",
            "/v1/topics/orders/keys/user-7/events",
            Some(credential),
            None,
        ) {
            Ok(Plan { action: Action::Event(event), .. }) => event.intake,
            other => panic!("{other:?}"),
        };
        let prefix = intake(&token(&world, "orders", "user-", true, &[], Some("u7")));
        assert_eq!(prefix.budget.as_deref(), Some(prefix.holder.as_str()));
        assert_eq!(intake(&token(&world, "orders", "user-7", false, &[], None)).budget, None);
        assert_eq!(intake(&format!("Bearer {INGEST}")).budget, None);
    }

    #[test]
    fn key_and_gate_calls_read_their_page_and_forget_room_after_a_change() {
        let world = world();
        let admin = format!("Bearer {ADMIN}");
        let asked = |method: &str, target: &str| plan_of(&world, false, method, target, Some(&admin), None);
        let key = Key::new("k".into()).unwrap();
        let call = |request| Action::Key(KeyCall { topic: "orders".into(), key: key.clone(), request });
        let timeline = asked("GET", "/v1/topics/orders/keys/k/timeline?after=3").unwrap();
        assert_eq!(timeline.action, call(KeyRequest::Timeline { after: Some(3), limit: TIMELINE_PAGE }));
        let replay = asked("POST", "/v1/topics/orders/keys/k/dead-letters/7/retry?x=1").unwrap();
        assert_eq!(replay.action, call(KeyRequest::Replay { window: WindowId(7) }), "others ignore the query");
        assert_eq!(outcome(&asked("GET", "/v1/topics/orders/keys/k/dead-letters?limit=0")), "bad_query");
        let q = world.topics.get("q").unwrap();
        let gate = |target: &str| asked(if target.ends_with("retry") { "POST" } else { "GET" }, target);
        assert_eq!(
            gate("/v1/topics/q/queue").unwrap().action,
            Action::Gate { topic: q, op: GateOp::Status, forget_room: false }
        );
        assert_eq!(
            gate("/v1/topics/q/queue/dead-letters?after=2").unwrap().action,
            Action::Gate { topic: q, op: GateOp::DeadLetters { after: Some(2), limit: 100 }, forget_room: false }
        );
        assert_eq!(
            gate("/v1/topics/q/queue/dead-letters/retry").unwrap().action,
            Action::Gate { topic: q, op: GateOp::ReplayAll, forget_room: true }
        );
        let discard = asked("DELETE", "/v1/topics/q/queue/dead-letters/4").unwrap();
        assert_eq!(discard.action, Action::Gate { topic: q, op: GateOp::Discard { id: 4 }, forget_room: true });
        assert_eq!(outcome(&gate("/v1/topics/q/queue/dead-letters?limit=501")), "bad_query");
    }

    /// The credential comes first (an unknown caller learns nothing of the
    /// topics), then the topic and its queue, then the producer's key, then the page.
    #[test]
    fn refusals_come_in_one_order() {
        let world = world();
        let admin = format!("Bearer {ADMIN}");
        let code = |method: &str, target: &str, credential: Option<&str>, idempotency_key: Option<&str>| {
            outcome(&plan_of(&world, false, method, target, credential, idempotency_key))
        };
        assert_eq!(code("GET", "/v1/topics/nope/keys/k", None, None), UNAUTHORIZED);
        assert_eq!(code("GET", "/v1/topics/nope/keys/k", Some(&format!("Bearer {INGEST}")), None), FORBIDDEN);
        assert_eq!(code("GET", "/v1/topics/nope/keys/k", Some(&admin), None), "unknown_topic");
        assert_eq!(
            code("POST", "/v1/topics/nope/keys/k/events", Some(&format!("Bearer {INGEST}")), None),
            "unknown_topic"
        );
        assert_eq!(
            code("POST", "/v1/topics/nope/events:batch", Some(&format!("Bearer {INGEST}")), None),
            "unknown_topic"
        );
        assert_eq!(code("POST", "/v1/topics/nope/client-tokens", Some(&admin), None), "unknown_topic");
        assert_eq!(code("GET", "/v1/topics/orders/queue", None, None), UNAUTHORIZED);
        assert_eq!(code("GET", "/v1/topics/orders/queue", Some(&admin), None), "not_found", "a webhook topic");
        assert_eq!(code("GET", "/v1/topics/nope/queue/dead-letters", Some(&admin), None), "unknown_topic");
        let bad_key = Some("with space");
        assert_eq!(code("GET", "/v1/topics/nope/keys/k", Some(&admin), bad_key), "unknown_topic");
        assert_eq!(code("GET", "/v1/topics/orders/keys/k?limit=0", Some(&admin), bad_key), "invalid_idempotency_key");
        assert_eq!(code("GET", "/v1/topics/orders/keys/k/timeline?limit=0", Some(&admin), None), "bad_query");
        assert_eq!(code("POST", "/v1/topics/orders/keys/k/events", Some(&admin), bad_key), "invalid_idempotency_key");
        let health = plan_of(&world, false, "GET", "/healthz", None, None);
        assert_eq!(outcome(&health), "internal", "health is answered before any plan");
    }
}
