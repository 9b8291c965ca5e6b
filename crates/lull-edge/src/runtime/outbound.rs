//! One delivery: a signed `POST` to the topic's target, bounded by the topic's timeout.

use std::pin::pin;
use std::time::Duration;

use futures::future::{Either, select};
use worker::{AbortController, Delay, Fetch, Headers, Method, Request, RequestInit};

use crate::delivery::{ATTEMPT_HEADER, IDEMPOTENCY_HEADER};
use crate::signing;

/// What the target made of a delivery.
pub struct Outcome {
    /// A 2xx answer.
    pub ok: bool,
    /// The status code, `timeout`, or the network error.
    pub detail: String,
}

/// A delivery ready to send.
pub struct Outgoing<'a> {
    /// The target URL.
    pub target: &'a str,
    /// The JSON body.
    pub body: String,
    /// `{topic}/{key}/{window}`.
    pub idempotency_key: String,
    /// 1, 2, …
    pub attempt: u32,
    /// The signing secret.
    pub secret: &'a str,
    /// How long to wait for an answer.
    pub timeout_ms: u64,
}

/// Send it; never fails, the outcome says what happened.
pub async fn send(out: Outgoing<'_>) -> Outcome {
    let request = match request(&out) {
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

fn request(out: &Outgoing<'_>) -> worker::Result<Request> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    headers.set("user-agent", concat!("lull-edge/", env!("CARGO_PKG_VERSION")))?;
    headers.set(IDEMPOTENCY_HEADER, &out.idempotency_key)?;
    headers.set(ATTEMPT_HEADER, &out.attempt.to_string())?;
    let unix = super::http::now_ms() / 1000;
    headers.set(signing::HEADER, &signing::sign(out.secret.as_bytes(), unix, out.body.as_bytes()))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(out.body.as_str().into()));
    Request::new_with_init(out.target, &init)
}
