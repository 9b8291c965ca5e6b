//! The worker's configuration, and its key objects' binding, read from its
//! environment once per isolate.

use std::cell::RefCell;
use std::rc::Rc;
use std::thread::LocalKey;

use worker::{Env, ObjectNamespace};

use crate::delivery::signing::{Keyring, Secret};
use crate::error::ApiError;
use crate::http::auth::Tokens;
use crate::http::client_token::topic_secrets;
use crate::http::cors::Cors;
use crate::topic::Topics;

/// The Durable Object binding's name in `wrangler.toml`.
pub(crate) const KEY_WINDOW_BINDING: &str = "KEY_WINDOW";

/// Everything the worker is configured with.
pub(crate) struct Config {
    /// `LULL_TOPICS`: a JSON string, or a table in `wrangler.toml`.
    pub topics: Topics,
    /// `LULL_ADMIN_TOKEN`, `LULL_INGEST_TOKEN` and each topic's `ingest_token_env`.
    pub tokens: Tokens,
    /// `LULL_SIGNING_SECRET` and each topic's `signing_secret_env`: sign deliveries.
    pub signing: Keyring,
    /// `LULL_DEMO_SINK = "on"`, in a build with the demo ([`crate::demo::BUILT`]):
    /// serve the demo's routes (`/sink`, a receiver for local use, and `/demo/…`).
    pub demo_sink: bool,
    /// `LULL_CORS_ORIGINS`: web origins that may call the API from a browser.
    pub cors: Cors,
}

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

fn required(env: &Env, name: &str) -> Result<String, ApiError> {
    match text(env, name) {
        Some(value) if !value.is_empty() => Ok(value),
        _ => Err(ApiError::Config(format!(
            "{name} is not set (`wrangler secret put {name}`, or .dev.vars for local development)"
        ))),
    }
}

fn topics_json(env: &Env) -> Result<String, ApiError> {
    if let Some(json) = text(env, "LULL_TOPICS") {
        return Ok(json);
    }
    env.object_var::<serde_json::Value>("LULL_TOPICS")
        .map(|table| table.to_string())
        .map_err(|_| ApiError::Config("LULL_TOPICS is not set ([vars] in wrangler.toml)".into()))
}

/// Whether `header` carries an admin token (`LULL_ADMIN_TOKEN`), read
/// without the rest of the configuration, which may be what is broken.
pub(crate) fn is_admin(env: &Env, header: Option<&str>) -> bool {
    text(env, "LULL_ADMIN_TOKEN").is_some_and(|tokens| crate::http::auth::carries_one_of(header, &tokens))
}

/// The secrets in the variable `name`: one or several `whsec_<base64>`, separated by whitespace.
fn secrets(env: &Env, name: &str) -> Result<Vec<Secret>, ApiError> {
    // The reason names the variable, never the secret.
    Secret::parse_all(&required(env, name)?).map_err(|e| ApiError::Config(format!("{name}: {e}")))
}

/// `LULL_SIGNING_SECRET` for every topic, except those with their own `signing_secret_env`.
fn keyring(env: &Env, topics: &Topics) -> Result<Keyring, ApiError> {
    let mut keyring = Keyring::new(secrets(env, "LULL_SIGNING_SECRET")?);
    for topic in topics.iter() {
        if let Some(var) = &topic.signing_secret_env {
            keyring.set_topic(&topic.name, secrets(env, var)?);
        }
    }
    Ok(keyring)
}

/// The configuration, parsed and checked once per environment ([`per_env`]).
pub(crate) fn load(env: &Env) -> Result<Rc<Config>, ApiError> {
    per_env(&CONFIG, env, || read(env))
}

/// The configuration as the environment gives it.
fn read(env: &Env) -> Result<Rc<Config>, ApiError> {
    let json = topics_json(env)?;
    let topics = Topics::parse(&json).map_err(|e| ApiError::Config(e.to_string()))?;
    let mut own = Vec::new();
    for topic in topics.iter() {
        if let Some(var) = &topic.ingest_token_env {
            own.push((topic.name.clone(), var.clone(), required(env, var)?));
        }
    }
    let client = topic_secrets(&topics, text(env, "LULL_CLIENT_TOKEN_SECRET").as_deref(), |var| text(env, var))?;
    let tokens = Tokens::new(&required(env, "LULL_ADMIN_TOKEN")?, &required(env, "LULL_INGEST_TOKEN")?, &own, client)?;
    let signing = keyring(env, &topics)?;
    let config = Rc::new(Config {
        topics,
        tokens,
        signing,
        demo_sink: crate::demo::BUILT && text(env, "LULL_DEMO_SINK").is_some_and(|v| v == "on"),
        cors: Cors::parse(text(env, "LULL_CORS_ORIGINS").as_deref())?,
    });
    Ok(config)
}
