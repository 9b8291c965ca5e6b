//! The delivery call: a signed `POST` to the topic's target, bounded by the topic's timeout.

use std::pin::pin;
use std::time::Duration;

use futures::future::{Either, select};
use worker::{AbortController, Delay, Env, Fetch, Headers, Method, Request, RequestInit};

use super::config;
use crate::delivery::{ATTEMPT_HEADER, IDEMPOTENCY_HEADER};
use crate::ports::{Outbound, Outcome, Outgoing};
use crate::signing;

/// [`Outbound`] over `fetch`, signing with the configured secret.
pub struct Fetcher {
    /// The worker's environment (the signing secret).
    pub env: Env,
}

impl Outbound for Fetcher {
    async fn send(&self, out: Outgoing) -> Outcome {
        match config::load(&self.env) {
            Ok(config) => send(out, &config.signing_secret).await,
            Err(e) => Outcome { ok: false, detail: format!("config: {}", e.message()) },
        }
    }
}

/// Send it; never fails, the outcome says what happened.
async fn send(out: Outgoing, secret: &str) -> Outcome {
    let request = match request(&out, secret) {
        Ok(request) => request,
        Err(e) => return Outcome { ok: false, detail: format!("request: {e}") },
    };
    let controller = AbortController::default();
    let signal = controller.signal();
    let fetch = Fetch::Request(request);
    let sending = pin!(fetch.send_with_signal(&signal));
    let timer = pin!(Delay::from(Duration::from_millis(out.timeout_ms)));
    match select(sending, timer).await {
        Either::Left((Ok(response), _)) => {
            let status = response.status_code();
            Outcome { ok: (200..300).contains(&status), detail: status.to_string() }
        }
        Either::Left((Err(e), _)) => Outcome { ok: false, detail: format!("network: {e}") },
        Either::Right(((), _)) => {
            controller.abort();
            Outcome { ok: false, detail: "timeout".into() }
        }
    }
}

fn request(out: &Outgoing, secret: &str) -> worker::Result<Request> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    headers.set("user-agent", concat!("lull-edge/", env!("CARGO_PKG_VERSION")))?;
    headers.set(IDEMPOTENCY_HEADER, &out.idempotency_key)?;
    headers.set(ATTEMPT_HEADER, &out.attempt.to_string())?;
    let unix = super::http::now_ms() / 1000;
    headers.set(signing::HEADER, &signing::sign(secret.as_bytes(), unix, out.body.as_bytes()))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(out.body.as_str().into()));
    Request::new_with_init(&out.target, &init)
}
