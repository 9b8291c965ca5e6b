//! The demo's Worker side without the `demo` cargo feature (built as
//! `runtime::demo` in its place, see `runtime/demo/mod.rs`): nothing to serve.

use worker::Env;

use super::config::Config;
use super::http::{Incoming, Reply};
use crate::demo::route::DemoRoute;
use crate::error::ApiError;

/// Never called: no path is the demo's.
pub(crate) async fn serve(_: &Incoming, _: &Env, _: &Config, route: DemoRoute) -> Result<Reply, ApiError> {
    match route {}
}
