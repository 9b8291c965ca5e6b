//! The worker's configuration, and its key objects' binding, read from its
//! environment once per isolate.

use std::cell::RefCell;
use std::rc::Rc;
use std::thread::LocalKey;

use worker::{Env, ObjectNamespace};

use crate::config::{KEY_WINDOW_BINDING, TOPICS_VAR};
use crate::error::ApiError;

pub(crate) use crate::config::Config;

thread_local! {
    /// The configuration, with the environment it was read from.
    static CONFIG: RefCell<Option<(Env, Rc<Config>)>> = const { RefCell::new(None) };
    /// The key objects' namespace, with the environment it was read from.
    static KEY_WINDOWS: RefCell<Option<(Env, ObjectNamespace)>> = const { RefCell::new(None) };
}

/// What `make` reads from `env`, read once per environment object: the
/// runtime hands the same one to every request of an isolate (a new
/// configuration is a new isolate). Reading `LULL_TOPICS` and the binding on
/// every request cost about 6% of the Worker's CPU in a profile of one hot key.
fn per_env<T: Clone>(
    cache: &'static LocalKey<RefCell<Option<(Env, T)>>>,
    env: &Env,
    make: impl FnOnce() -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    let same = |(cached, value): &(Env, T)| worker::js_sys::Object::is(cached, env).then(|| value.clone());
    if let Some(value) = cache.with_borrow(|c| c.as_ref().and_then(same)) {
        return Ok(value);
    }
    let value = make()?;
    cache.with_borrow_mut(|c| *c = Some((env.clone(), value.clone())));
    Ok(value)
}

/// The key objects' namespace (`KEY_WINDOW`).
pub(crate) fn key_windows(env: &Env) -> Result<ObjectNamespace, ApiError> {
    per_env(&KEY_WINDOWS, env, || Ok(env.durable_object(KEY_WINDOW_BINDING)?))
}

/// The secret or var `name`, if set.
pub(crate) fn text(env: &Env, name: &str) -> Option<String> {
    env.secret(name).map(|s| s.to_string()).or_else(|_| env.var(name).map(|v| v.to_string())).ok()
}

/// `LULL_TOPICS` as JSON text: a var or secret holding it, or a table in `wrangler.toml`.
fn topics_json(env: &Env) -> Option<String> {
    text(env, TOPICS_VAR).or_else(|| env.object_var::<serde_json::Value>(TOPICS_VAR).ok().map(|t| t.to_string()))
}

/// Whether `header` carries an admin token (`LULL_ADMIN_TOKEN`), read
/// without the rest of the configuration, which may be what is broken.
pub(crate) fn is_admin(env: &Env, header: Option<&str>) -> bool {
    text(env, "LULL_ADMIN_TOKEN").is_some_and(|tokens| crate::http::auth::carries_one_of(header, &tokens))
}

/// The configuration, parsed and checked once per environment ([`per_env`]).
pub(crate) fn load(env: &Env) -> Result<Rc<Config>, ApiError> {
    per_env(&CONFIG, env, || read(env))
}

/// The configuration as the environment gives it ([`Config::read`]: the
/// reading `cargo xtask check-config` checks, so the two cannot disagree).
fn read(env: &Env) -> Result<Rc<Config>, ApiError> {
    let var = |name: &str| if name == TOPICS_VAR { topics_json(env) } else { text(env, name) };
    Config::read(&var).map(Rc::new)
}
