//! The delivery call: a `POST` to the topic's target signed with the topic's
//! secrets (Standard Webhooks, see [`crate::delivery::signing`]), bounded by
//! the topic's timeout and never following a redirect — or, for a queue
//! topic, the window's messages sent to its queue (in batches the queue
//! takes, see [`crate::delivery::queue_message::batches`]).

use worker::js_sys::{Array, Function, Object, Promise, Reflect};
use worker::wasm_bindgen::prelude::wasm_bindgen;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::web_sys::{AbortController, AbortSignal, Response};
use worker::{Env, QueueContentType, RawMessageBuilder};

use super::config;
use super::http::thrown_text;
use super::sys::{clear_timeout, set_timeout};
use crate::delivery::body::{ATTEMPT_HEADER, IDEMPOTENCY_HEADER};
use crate::delivery::signing::{self, Secret};
use crate::ports::{Outbound, Outcome, Outgoing, QueueSend, ToQueue};
use crate::target::retry_after_ms;

/// [`Outbound`] over `fetch`, signing with the topic's secrets.
pub(super) struct Fetcher {
    /// The worker's environment (the signing secrets).
    pub env: Env,
}

impl Outbound for Fetcher {
    async fn send(&self, out: Outgoing) -> Outcome {
        if let Some(queue) = out.queue {
            return enqueue(&self.env, queue).await;
        }
        match config::load(&self.env) {
            Ok(config) => {
                let secrets = config.signing.for_topic(&out.topic);
                send(out, secrets).await
            }
            Err(e) => Outcome::failed(format!("config: {}", e.message())),
        }
    }
}

/// Send a window's messages to its queue; a failure part way is a failed
/// attempt (the retry sends every part again, under the same keys).
async fn enqueue(env: &Env, send: ToQueue) -> Outcome {
    let sent = Queues { env: env.clone() }.send(&send.binding, &send.messages, 0).await;
    match sent {
        Ok(()) => Outcome::done(format!("queued {} message(s)", send.messages.len())),
        Err(why) => Outcome::failed(why),
    }
}

/// The longest `Location` an outcome quotes (the outcome is kept in the key's state).
const MAX_LOCATION: usize = 256;

/// Send it; never fails, the outcome says what happened. A redirect is not
/// followed: it is a failed attempt naming the status and the `Location`.
/// The timeout is a timer of the send's own ([`Deadline`]), cleared as soon
/// as the send ends: a pending timer keeps the object's context alive, so one
/// left running (as `AbortSignal.timeout()`'s is) held every object in memory,
/// its storage open, for the whole timeout after each delivery.
pub(super) async fn send(out: Outgoing, secrets: &[Secret]) -> Outcome {
    let deadline = match Deadline::start(out.timeout_ms) {
        Ok(deadline) => deadline,
        Err(e) => return Outcome::failed(format!("timer: {}", thrown_text(&e))),
    };
    let sending = match fetch(&out, secrets, &deadline.signal()) {
        Ok(sending) => sending,
        Err(e) => return Outcome::failed(format!("request: {}", thrown_text(&e))),
    };
    let response: Response = match super::settle::outcome_of(&sending).await {
        Ok(response) => response.unchecked_into(),
        // Told by the signal, not by the error's shape.
        Err(_) if deadline.passed() => return Outcome::failed("timeout"),
        Err(e) => return Outcome::failed(format!("network: {}", thrown_text(&e))),
    };
    deadline.release();
    answered(&response)
}

/// A send's timeout: an `AbortController` its own timer aborts. Dropped (on
/// every way out of the send), it clears the timer and, unless the answer
/// came ([`release`](Self::release)), aborts the controller: a send dropped
/// midway stops.
struct Deadline {
    /// What aborts the fetch (its signal is the fetch's).
    controller: AbortController,
    /// The timer's id, for `clearTimeout`.
    timer: i32,
    /// Whether the drop aborts (a send that ends without an answer).
    abort: bool,
}

impl Deadline {
    /// Start the timer: `ms` from now it calls the controller's own `abort`.
    fn start(ms: u64) -> Result<Self, JsValue> {
        let controller = AbortController::new()?;
        let abort: Function = Reflect::get(&controller, &JsValue::from_str("abort"))?.dyn_into()?;
        let timer = set_timeout(&abort.bind0(&controller), ms)?;
        Ok(Deadline { controller, timer, abort: true })
    }

    /// The answer came: clear the timer, and leave the fetch alone. An abort,
    /// even after the answer, closes its connection (a new one per delivery);
    /// left alone, the runtime finishes a short body and its pool takes the
    /// connection back for the next delivery (a long body still closes it).
    fn release(mut self) {
        self.abort = false;
    }

    /// The signal the timer aborts.
    fn signal(&self) -> AbortSignal {
        self.controller.signal()
    }

    /// Whether the timer has aborted the signal.
    fn passed(&self) -> bool {
        self.controller.signal().aborted()
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        clear_timeout(self.timer);
        if self.abort {
            self.controller.abort();
        }
    }
}

/// What an answer means: a 2xx delivered; a 3xx is a redirect not followed;
/// its `Retry-After`, if any, read against the clock now.
fn answered(response: &Response) -> Outcome {
    let status = response.status();
    let headers = response.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    let retry_after_ms = header("retry-after").and_then(|v| retry_after_ms(&v, super::http::now_ms()));
    let detail = match (status, header("location")) {
        (300..=399, Some(location)) => format!("{status} redirect to {}", clip(&location, MAX_LOCATION)),
        (300..=399, None) => format!("{status} redirect without a Location"),
        _ => status.to_string(),
    };
    Outcome { ok: (200..300).contains(&status), detail, status: Some(status), retry_after_ms }
}

/// `text` cut to at most `max` bytes (on a character boundary), `…` marking a cut.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let end = (0..=max).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    format!("{}…", &text[..end])
}

#[wasm_bindgen(module = "/js/messages.mjs")]
extern "C" {
    /// `fetch(url, {method: "POST", headers, body, redirect: "manual", signal})`
    /// begun, its headers `fixed` and [`NAMED`]'s names with the values given
    /// in that order; or the error it threw before it began (a header the
    /// runtime refuses, say).
    #[wasm_bindgen(catch)]
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        url: &str,
        body: &str,
        signal: &AbortSignal,
        fixed: &Object,
        names: &Array,
        idempotency_key: &str,
        attempt: &str,
        id: &str,
        timestamp: &str,
        signature: &str,
    ) -> Result<Promise, JsValue>;
}

/// The headers every delivery carries with the same value.
const FIXED: [(&str, &str); 2] =
    [("content-type", "application/json"), ("user-agent", concat!("lull-edge/", env!("CARGO_PKG_VERSION")))];

/// The headers whose values are the delivery's, in the order [`deliver`] takes them.
const NAMED: [&str; 5] =
    [IDEMPOTENCY_HEADER, ATTEMPT_HEADER, signing::ID_HEADER, signing::TIMESTAMP_HEADER, signing::SIGNATURE_HEADER];

thread_local! {
    /// [`FIXED`] and [`NAMED`] as the runtime's side takes them, made once.
    static HEADERS: (Object, Array) =
        (super::http::header_object(&FIXED), NAMED.iter().map(|name| JsValue::from_str(name)).collect());
}

/// The delivery's `fetch`, begun: signed, aborted by `timeout`, never
/// redirected (a redirect must not turn the POST into a GET, nor carry the
/// signed body elsewhere). One call into JavaScript ([`deliver`]).
fn fetch(out: &Outgoing, secrets: &[Secret], timeout: &AbortSignal) -> Result<Promise, JsValue> {
    let attempt = out.attempt.to_string();
    // Standard Webhooks: the id and the timestamp are signed with the body.
    let unix = super::http::now_ms() / 1000;
    let signature = signing::sign(secrets, &out.idempotency_key, unix, out.body.as_bytes());
    let unix = unix.to_string();
    let key = &out.idempotency_key;
    HEADERS.with(|(fixed, names)| {
        deliver(&out.target, &out.body, timeout, fixed, names, key, &attempt, key, &unix, &signature)
    })
}

/// [`QueueSend`] over the worker's queue bindings.
pub(super) struct Queues {
    /// The worker's environment (the bindings).
    pub env: Env,
}

impl QueueSend for Queues {
    async fn send(&self, binding: &str, messages: &[String], delay_secs: u32) -> Result<(), String> {
        let queue = self.env.queue(binding).map_err(|e| format!("queue binding {binding}: {e}"))?;
        for batch in crate::delivery::queue_message::batches(messages) {
            let raw = batch
                .iter()
                .map(|text| {
                    // As text: the JSON reaches the consumer byte for byte (no JS number or escape rewriting).
                    let mut message = RawMessageBuilder::new(worker::wasm_bindgen::JsValue::from_str(text));
                    if delay_secs > 0 {
                        message = message.delay_seconds(delay_secs);
                    }
                    message.build_with_content_type(QueueContentType::Text)
                })
                .collect::<Vec<_>>();
            queue.send_raw_batch(raw).await.map_err(|e| format!("queue {binding}: {e}"))?;
        }
        Ok(())
    }
}
