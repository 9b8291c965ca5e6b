//! The demo page's server side (`LULL_DEMO_SINK = "on"`, for local use, no
//! bearer token): it stands in for the user's backend, so the page holds no
//! ingest or admin token, only a client token for its document's key.
//!
//! - `GET /demo/token?key=K`: a client token for key `K` of the `demo` topic,
//!   [`TOKEN_TTL_S`] long, minted as the admin route
//!   `POST /v1/topics/demo/client-tokens` mints `{"key": K, "ttl_s": 600}`:
//!   `{"token", "expires_at"}`.
//! - What the page shows that only an admin may read, for the `demo` topic
//!   only: `GET /demo/keys/{key}` (status), `GET /demo/keys/{key}/timeline`
//!   (`?after&limit`) and `POST /demo/keys/{key}/dead-letters/retry`, handed to
//!   the key's object as the admin routes are; `GET /demo/sink` (the `demo`
//!   topic's deliveries) and `PUT`/`DELETE /demo/sink/failing/{key}`, served by
//!   the sink's own functions, as a backend holding the admin token would call
//!   the admin routes (which check that token before the sink serves them);
//!   `PUT /demo/sink/answer/{throttle|gone}` and `DELETE /demo/sink/answer`
//!   (the sink's answer switch); `GET /demo/target` and `POST
//!   /demo/target/resume` (the `demo` topic's target, as `GET
//!   /v1/topics/demo` and `POST /v1/topics/demo/target:resume`).

use worker::Env;

use super::sink;
use crate::demo::route::{PanelRoute, token_key};
use crate::error::ApiError;
use crate::http::client_token::{ClientOp, MintRequest};
use crate::http::route::with_page;
use crate::key::KeyCall;
use crate::queue::gate::GateOp;
use crate::runtime::config::Config;
use crate::runtime::gate_client::GateClient;
use crate::runtime::http::{self, Incoming, Reply};
use crate::runtime::key_client::KeyClient;

/// The one topic the page's server side serves.
pub(super) const TOPIC: &str = "demo";
/// How long the page's client tokens live (s); `lull-web/edge` fetches a new one before then.
pub(super) const TOKEN_TTL_S: u64 = 600;

/// The header the page sends with every change (`lull-demo: 1`): another
/// site's page cannot send it without a preflight the worker refuses, so it
/// cannot replay dead letters or flip the sink from a developer's browser.
pub(super) const CHANGE_HEADER: &str = "lull-demo";

/// Serve `route` for the `demo` topic.
pub(super) async fn handle(req: &Incoming, env: &Env, config: &Config, route: PanelRoute) -> Result<Reply, ApiError> {
    let topic = config.topics.get(TOPIC).ok_or_else(|| ApiError::UnknownTopic(TOPIC.into()))?;
    if req.method() != "GET" && req.header(CHANGE_HEADER).as_deref() != Some("1") {
        return Err(ApiError::Forbidden);
    }
    match route {
        PanelRoute::Token => {
            let key = token_key(req.query().as_deref())?;
            let asked = MintRequest {
                key: Some(key.as_str().to_string()),
                key_prefix: None,
                ttl_s: Some(TOKEN_TTL_S),
                events_per_minute: None,
                // The page's own key: its buttons flush and cancel it.
                ops: Some(vec![ClientOp::Flush, ClientOp::Cancel]),
                sub: None,
            };
            let claims = asked.claims(&topic.name, http::now_ms() / 1000)?;
            let token = config.tokens.client_secrets(&topic.name)?.mint(&claims)?;
            http::json(200, &serde_json::json!({"token": token, "expires_at": claims.exp}))
        }
        PanelRoute::Key { key, request } => {
            let request = with_page(request, req.query().as_deref())?;
            let call = KeyCall { topic: topic.name.clone(), key, request };
            http::pass_on(&KeyClient { env }.call(call).await?)
        }
        PanelRoute::Sink => {
            let mut body = sink::listed();
            if let Some(received) = body["received"].as_array_mut() {
                received.retain(|r| r["delivery"]["topic"] == TOPIC);
            }
            http::json(200, &body)
        }
        PanelRoute::SinkFailing { key, on } => sink::failing(&key, on),
        PanelRoute::SinkAnswer(answer) => sink::answer(answer),
        PanelRoute::Target { resume } => {
            let op = if resume { GateOp::Resume } else { GateOp::Topic };
            http::pass_on(&GateClient { env: env.clone() }.call(&topic.name, op).await?)
        }
    }
}
