//! The queue consumer's shell: each message of a batch is handled at once by
//! [`Consumer::handle`] (the decisions are [`crate::queue::consume`]'s) over
//! the Workers ports — the topics' gate objects ([`GateClient`]), the queue
//! bindings ([`Queues`]), the signed `fetch` ([`Fetcher`]) and the clock
//! ([`WorkersClock`]) — then acked or retried as it says.
//!
//! Before any message is handled: a batch whose messages cannot be read is
//! retried whole ([`on_unreadable_batch`]) and, while the configuration does
//! not load, every message is retried later each time ([`on_config_error`]);
//! neither is ever acked (workerd acks what a handler leaves unsettled).
//!
//! The handler is exported by hand (what `#[event(queue)]` generates, minus
//! the typed batch): it needs each message's `attempts`, which workers-rs
//! 0.8.7's `MessageBatch` does not expose ([`MessageAttempts`]).

use serde_json::json;
use wasm_bindgen::prelude::*;
use worker::worker_sys::{Context as ContextSys, Message as MessageSys, MessageBatch as MessageBatchSys};
use worker::{Env, MessageExt, QueueRetryOptionsBuilder, RawMessage, console_log};

use super::clock::WorkersClock;
use super::config;
use super::gate_client::GateClient;
use super::outbound::{Fetcher, Queues};
use super::points::Points;
use super::sys::MessageAttempts;
use crate::config::{DEAD_LETTER_BINDING, DEAD_LETTER_QUEUE_VAR};
use crate::log::Fact;
use crate::queue::consume::{Consumer, Settle, on_config_error, on_unreadable_batch};

/// The worker's `queue` handler (exported to JavaScript by `wasm_bindgen`, which needs it `pub`).
#[allow(unreachable_pub)]
#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures, js_sys = ::worker::js_sys)]
pub async fn queue(batch: MessageBatchSys, env: Env, _ctx: ContextSys) -> Result<JsValue, JsValue> {
    std::panic::AssertUnwindSafe(consume(batch, env)).await;
    Ok(JsValue::UNDEFINED)
}

async fn consume(batch: MessageBatchSys, env: Env) {
    let messages: Vec<MessageSys> = match batch.messages() {
        Ok(array) => array.iter().map(MessageSys::from).collect(),
        Err(e) => {
            // None can be settled one by one: the batch as a whole, as the decision says.
            let settle = on_unreadable_batch();
            let why = e.as_string().unwrap_or_else(|| "the batch's messages cannot be read".into());
            console_log!(
                "{}",
                Fact::new("queue_unreadable_batch", json!({"why": why, "settle": shown(settle)})).line(&[])
            );
            let _ = match settle {
                Settle::Ack => batch.ack_all(),
                Settle::Retry { delay_secs } => batch.retry_all(retry_options(delay_secs)),
            };
            return;
        }
    };
    let config = match config::load(&env) {
        Ok(config) => config,
        Err(e) => {
            // Every message retried, later each time (`on_config_error`): none is forwarded or acked.
            let settles: Vec<(RawMessage, u32, Settle)> = messages
                .into_iter()
                .map(|m| {
                    let attempts = m.attempts();
                    (RawMessage::from(m), attempts, on_config_error(attempts))
                })
                .collect();
            let ids: Vec<String> = settles.iter().map(|(m, _, _)| m.id()).collect();
            let attempts: Vec<u32> = settles.iter().map(|(_, a, _)| *a).collect();
            let settled: Vec<serde_json::Value> = settles.iter().map(|(_, _, s)| shown(*s)).collect();
            let fact = Fact::new(
                "queue_config_error",
                json!({"why": e.message(), "ids": ids, "attempts": attempts, "settle": settled}),
            );
            console_log!("{}", fact.line(&[]));
            for (m, _, s) in settles {
                settle(&m, s);
            }
            return;
        }
    };
    let queue_name = batch.queue().map(String::from).unwrap_or_default();
    let dead_letters = env.var(DEAD_LETTER_QUEUE_VAR).map(|v| v.to_string()).unwrap_or_default();
    let dead_letter = !dead_letters.is_empty() && queue_name == dead_letters;
    let consumer = Consumer {
        gates: GateClient { env: env.clone() },
        queue: Queues { env: env.clone() },
        outbound: Fetcher { env: env.clone() },
        clock: WorkersClock { points: Points::new(env.clone()) },
        topics: &config.topics,
        dead_letters: DEAD_LETTER_BINDING,
    };
    let work = messages.into_iter().map(|m| {
        let consumer = &consumer;
        async move {
            let attempts = m.attempts();
            let m = RawMessage::from(m);
            // Sent as text (the JSON byte for byte); anything else is stringified to be read.
            let body = m.body();
            let text = body
                .as_string()
                .or_else(|| worker::js_sys::JSON::stringify(&body).ok().and_then(|s| s.as_string()))
                .unwrap_or_default();
            settle(&m, consumer.handle(&m.id(), &text, attempts, dead_letter).await);
        }
    });
    futures::future::join_all(work).await;
}

/// End one message as `settle` says.
fn settle(m: &RawMessage, settle: Settle) {
    match settle {
        Settle::Ack => m.ack(),
        Settle::Retry { delay_secs: None } => m.retry(),
        Settle::Retry { delay_secs: Some(delay) } => {
            m.retry_with_options(&QueueRetryOptionsBuilder::new().with_delay_seconds(delay).build());
        }
    }
}

/// `retryAll`'s options: `{delaySeconds}` if set, else none (the queue's `retry_delay`).
fn retry_options(delay_secs: Option<u32>) -> JsValue {
    let Some(delay) = delay_secs else { return JsValue::UNDEFINED };
    let options = worker::js_sys::Object::new();
    let _ = worker::js_sys::Reflect::set(&options, &"delaySeconds".into(), &JsValue::from(delay));
    options.into()
}

/// A settle as a log line shows it.
fn shown(settle: Settle) -> serde_json::Value {
    match settle {
        Settle::Ack => json!("ack"),
        Settle::Retry { delay_secs } => json!({"retry": {"delay_s": delay_secs}}),
    }
}
