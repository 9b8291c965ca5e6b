//! The queue consumer's shell: each message of a batch is handled at once by
//! [`Consumer::handle`] (the decisions are [`crate::queue::consume`]'s) over
//! the Workers ports — the topics' gate objects ([`GateClient`]), the queue
//! bindings ([`Queues`]), the signed `fetch` ([`Fetcher`]) and the clock
//! ([`WorkersClock`]) — then acked or retried as it says.
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
use super::sys::MessageAttempts;
use crate::config::{DEAD_LETTER_BINDING, DEAD_LETTER_QUEUE_VAR};
use crate::log::Fact;
use crate::queue::consume::{Consumer, Settle};

/// The worker's `queue` handler (exported to JavaScript by `wasm_bindgen`, which needs it `pub`).
#[allow(unreachable_pub)]
#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures, js_sys = ::worker::js_sys)]
pub async fn queue(batch: MessageBatchSys, env: Env, _ctx: ContextSys) -> Result<JsValue, JsValue> {
    std::panic::AssertUnwindSafe(consume(batch, env)).await;
    Ok(JsValue::UNDEFINED)
}

async fn consume(batch: MessageBatchSys, env: Env) {
    let messages: Vec<MessageSys> =
        batch.messages().map(|a| a.iter().map(MessageSys::from).collect()).unwrap_or_default();
    let config = match config::load(&env) {
        Ok(config) => config,
        Err(e) => {
            let fact = Fact::new("queue_retry", json!({"why": e.message(), "messages": messages.len()}));
            console_log!("{}", fact.line(&[]));
            let _ = batch.retry_all(JsValue::NULL);
            return;
        }
    };
    let queue_name = batch.queue().map(String::from).unwrap_or_default();
    let dead_letters = env.var(DEAD_LETTER_QUEUE_VAR).map(|v| v.to_string()).unwrap_or_default();
    let dead_letter = !dead_letters.is_empty() && queue_name == dead_letters;
    let consumer = Consumer {
        gates: GateClient { env: &env },
        queue: Queues { env: env.clone() },
        outbound: Fetcher { env: env.clone() },
        clock: WorkersClock,
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
            match consumer.handle(&m.id(), &text, attempts, dead_letter).await {
                Settle::Ack => m.ack(),
                Settle::Retry { delay_secs: None } => m.retry(),
                Settle::Retry { delay_secs: Some(delay) } => {
                    m.retry_with_options(&QueueRetryOptionsBuilder::new().with_delay_seconds(delay).build());
                }
            }
        }
    });
    futures::future::join_all(work).await;
}
