//! The queue consumer's shell: each message of a batch is handled at once by
//! [`Consumer::handle`] (the decisions are [`crate::queue::consume`]'s) over
//! the Workers ports — the topics' gate objects ([`GateClient`]), the queue
//! bindings ([`Queues`]), the signed `fetch` ([`Fetcher`]) and the clock
//! ([`WorkersClock`]) — then acked or retried as it says.

use std::time::Duration;

use serde_json::json;
use worker::{Context, Delay, Env, MessageBatch, MessageExt, QueueRetryOptionsBuilder, console_log, event};

use super::config;
use super::http::now_ms;
use super::outbound::{Fetcher, Queues};
use super::topic_gate::GateClient;
use crate::log::Fact;
use crate::ports::Clock;
use crate::queue::consume::{Consumer, Settle};

/// The variable naming the dead-letter queue, whose messages are kept.
const DEAD_LETTER_VAR: &str = "LULL_DEAD_LETTER_QUEUE";

/// [`Clock`] over `Date.now()`, a timer and the console.
pub struct WorkersClock;

impl Clock for WorkersClock {
    fn now(&self) -> u64 {
        now_ms()
    }

    async fn sleep(&self, ms: u64) {
        Delay::from(Duration::from_millis(ms)).await;
    }

    fn log(&self, line: &str) {
        console_log!("{line}");
    }
}

#[event(queue)]
pub async fn consume(batch: MessageBatch<serde_json::Value>, env: Env, _ctx: Context) -> worker::Result<()> {
    let config = match config::load(&env) {
        Ok(config) => config,
        Err(e) => {
            let fact = Fact::new("queue_retry", json!({"why": e.message(), "messages": batch.raw_iter().len()}));
            console_log!("{}", fact.line(&[]));
            batch.retry_all();
            return Ok(());
        }
    };
    let dead_letters = env.var(DEAD_LETTER_VAR).map(|v| v.to_string()).unwrap_or_default();
    let dead_letter = !dead_letters.is_empty() && batch.queue() == dead_letters;
    let consumer = Consumer {
        gates: GateClient { env: &env },
        queue: Queues { env: &env },
        outbound: Fetcher { env: env.clone() },
        clock: WorkersClock,
        topics: &config.topics,
    };
    let work = batch.raw_iter().map(|m| {
        let consumer = &consumer;
        async move {
            // Sent as text (the JSON byte for byte); anything else is stringified to be read.
            let body = m.body();
            let text = body
                .as_string()
                .or_else(|| worker::js_sys::JSON::stringify(&body).ok().and_then(|s| s.as_string()))
                .unwrap_or_default();
            match consumer.handle(&m.id(), &text, dead_letter).await {
                Settle::Ack => m.ack(),
                Settle::Retry { delay_secs: None } => m.retry(),
                Settle::Retry { delay_secs: Some(delay) } => {
                    m.retry_with_options(&QueueRetryOptionsBuilder::new().with_delay_seconds(delay).build());
                }
            }
        }
    });
    futures::future::join_all(work).await;
    Ok(())
}
