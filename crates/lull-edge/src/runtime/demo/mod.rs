//! The demo's Worker side (the `demo` cargo feature; without it
//! `runtime/demo/off.rs` stands here, with nothing to serve): [`serve`]
//! serves a demo route the router's plan let through (the demo is on, the
//! admin token its route needs was checked: `crate::http::plan`). The search
//! endpoint ([`search`]), the demo receiver ([`sink`]) and the page's server
//! side ([`panel`]: its client token and its admin views); the routes
//! themselves are `crate::demo::route`'s.

mod panel;
mod search;
mod sink;

use worker::Env;

use super::config::Config;
use super::http::{Incoming, Reply};
use crate::demo::route::DemoRoute;
use crate::error::ApiError;

/// Serve `route`.
pub(crate) async fn serve(req: &Incoming, env: &Env, config: &Config, route: DemoRoute) -> Result<Reply, ApiError> {
    match route {
        DemoRoute::Sink { post: false } => sink::listed_reply(),
        DemoRoute::Sink { post: true } => sink::receive(req, config).await,
        DemoRoute::SinkFailing { key, on } => sink::failing(&key, on),
        DemoRoute::SinkAnswer(answer) => sink::answer(answer),
        DemoRoute::Page(page) => search::handle(req, env, page).await,
        DemoRoute::Panel(route) => panel::handle(req, env, config, route).await,
    }
}
