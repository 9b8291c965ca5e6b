//! The queue consumer (`delivery = "queue"`): each message is forwarded to its
//! topic's target, signed as a webhook is, once the topic's [`TopicGate`]
//! grants a lease — so at most `forward_concurrency` forwards are in flight
//! for the topic, across batches and isolates, and starts keep to
//! `forward_rate_per_s`. A 2xx acks the message; anything else retries it with
//! the queue's `retry_delay`, and past `max_retries` the queue moves it to its
//! dead-letter queue, whose messages this consumer keeps (in the topic's gate
//! object) before it acks them. A message the gate cannot admit soon is sent
//! to the queue again with the delay the gate gives, then acked: waiting for
//! room never uses up a message's retries.
//! Each topic asks its own gate and every message of a batch is handled at
//! once; a batch waits for room at most [`GATE_WAIT_BUDGET_MS`].

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use worker::{
    Context, Delay, Env, MessageBatch, MessageExt, QueueContentType, QueueRetryOptionsBuilder, RawMessage,
    RawMessageBuilder, console_log, event,
};

use super::config::{self, Config};
use super::http::now_ms;
use super::outbound;
use super::topic_gate;
use crate::delivery::queue_message::QueueMessage;
use crate::ports::Outgoing;

/// How long a message may wait for the gate inside one batch before it is
/// sent to the queue again (with the gate's delay) instead.
pub const GATE_WAIT_BUDGET_MS: u64 = 2_000;
/// Tries of a lease's release (a lost release holds room until the lease expires).
const RELEASE_TRIES: u32 = 3;
/// The variable naming the dead-letter queue, whose messages are recorded.
const DEAD_LETTER_VAR: &str = "LULL_DEAD_LETTER_QUEUE";

#[derive(Deserialize)]
struct Acquired {
    go: Option<u64>,
    wait_until: Option<u64>,
}

fn log(event: &str, fields: serde_json::Value) {
    let mut line = json!({"lull": event});
    if let (Some(line), serde_json::Value::Object(fields)) = (line.as_object_mut(), fields) {
        line.extend(fields);
    }
    console_log!("{line}");
}

/// Ask `topic`'s gate (`op`: `acquire`, `release/{lease}`, `count/{what}`).
async fn gate(env: &Env, topic: &str, op: &str) -> worker::Result<serde_json::Value> {
    let mut res = topic_gate::ask(env, topic, op, None).await?;
    if res.status_code() != 200 {
        return Err(worker::Error::RustError(format!("gate {op}: {}", res.status_code())));
    }
    res.json().await
}

/// Send `text` (a message) to the queue `binding` again, after `delay_seconds`.
async fn requeue(env: &Env, binding: &str, text: &str, delay_seconds: u32) -> worker::Result<()> {
    let message = RawMessageBuilder::new(worker::wasm_bindgen::JsValue::from_str(text))
        .delay_seconds(delay_seconds)
        .build_with_content_type(QueueContentType::Text);
    env.queue(binding)?.send_raw(message).await
}

/// Keep a dead-lettered message in its topic's gate object.
async fn keep_dead_letter(env: &Env, topic: &str, text: &str) -> worker::Result<()> {
    let res = topic_gate::ask(env, topic, "dead-letter", Some(text)).await?;
    match res.status_code() {
        200 => Ok(()),
        status => Err(worker::Error::RustError(format!("the gate kept no dead letter ({status})"))),
    }
}

#[event(queue)]
pub async fn consume(batch: MessageBatch<serde_json::Value>, env: Env, _ctx: Context) -> worker::Result<()> {
    let config = match config::load(&env) {
        Ok(config) => config,
        Err(e) => {
            log("queue_retry", json!({"why": e.message(), "messages": batch.raw_iter().len()}));
            batch.retry_all();
            return Ok(());
        }
    };
    let dead_letters = env.var(DEAD_LETTER_VAR).map(|v| v.to_string()).unwrap_or_default();
    let from_dead_letters = !dead_letters.is_empty() && batch.queue() == dead_letters;
    let work = batch.raw_iter().map(|m| handle(m, &env, &config, from_dead_letters));
    futures::future::join_all(work).await;
    Ok(())
}

async fn handle(m: RawMessage, env: &Env, config: &Config, dead_letter: bool) {
    // Sent as text (the JSON byte for byte); anything else is stringified to be read.
    let body = m.body();
    let text = body
        .as_string()
        .or_else(|| worker::js_sys::JSON::stringify(&body).ok().and_then(|s| s.as_string()))
        .unwrap_or_default();
    let message: QueueMessage = match serde_json::from_str(&text) {
        Ok(message) => message,
        Err(e) => {
            // Never dropped: retried, then in the dead-letter queue for a person to look at.
            log("queue_retry", json!({"id": m.id(), "why": format!("not a lull message: {e}")}));
            return m.retry(); // on the dead-letter queue too: kept there, never acked unread
        }
    };
    let (topic_name, key) = (message.topic.clone(), message.idempotency_key.clone());
    if dead_letter {
        // Kept in the topic's gate object (whatever the topic is configured as now), then acked.
        let kept = keep_dead_letter(env, &topic_name, &text).await;
        log(
            "queue_dead_letter",
            json!({"topic": topic_name, "idempotency_key": key, "kept": kept.is_ok(),
                                        "why": kept.as_ref().err().map(ToString::to_string)}),
        );
        return if kept.is_ok() { m.ack() } else { m.retry() };
    }
    let Some(topic) = config.topics.get(&topic_name).filter(|t| t.queue.is_some()) else {
        log("queue_retry", json!({"topic": topic_name, "idempotency_key": key, "why": "not a queue topic here"}));
        return m.retry();
    };
    // A lease from the topic's gate, waiting here while that is short.
    let started = now_ms();
    let lease = loop {
        let acquired = gate(env, &topic_name, "acquire")
            .await
            .and_then(|v| serde_json::from_value::<Acquired>(v).map_err(|e| worker::Error::RustError(e.to_string())));
        match acquired {
            Ok(Acquired { go: Some(lease), .. }) => break lease,
            Ok(Acquired { wait_until: Some(until), .. }) if until < started + GATE_WAIT_BUDGET_MS => {
                Delay::from(Duration::from_millis(until.saturating_sub(now_ms()).max(1))).await;
            }
            Ok(Acquired { wait_until: Some(until), .. }) => {
                // No room soon: on the queue again after the gate's delay; this one is done.
                let wait_s = until.saturating_sub(now_ms()).div_ceil(1000);
                let delay = u32::try_from(wait_s).unwrap_or(u32::MAX).clamp(1, 43_200);
                let binding = topic.queue.as_ref().map(|q| q.binding.as_str()).unwrap_or_default();
                return match requeue(env, binding, &text, delay).await {
                    Ok(()) => {
                        let _ = gate(env, &topic_name, "count/requeued").await;
                        m.ack()
                    }
                    Err(e) => {
                        log("queue_retry", json!({"topic": topic_name, "idempotency_key": key, "why": e.to_string()}));
                        m.retry_with_options(&QueueRetryOptionsBuilder::new().with_delay_seconds(delay).build())
                    }
                };
            }
            other => {
                let why = match other {
                    Err(e) => e.to_string(),
                    _ => "the gate gave no answer".into(),
                };
                log("queue_retry", json!({"topic": topic_name, "idempotency_key": key, "why": why}));
                let _ = gate(env, &topic_name, "count/retried").await;
                return m.retry_with_options(&QueueRetryOptionsBuilder::new().with_delay_seconds(1).build());
            }
        }
    };
    let out = Outgoing {
        target: topic.target.clone(),
        body: message.body.get().to_string(),
        idempotency_key: key.clone(),
        attempt: message.attempt,
        timeout_ms: topic.delivery_timeout_ms,
        queue: None,
    };
    let outcome = outbound::send(out, &config.signing_secret).await;
    for _ in 0..RELEASE_TRIES {
        if gate(env, &topic_name, &format!("release/{lease}")).await.is_ok() {
            break;
        }
    }
    if outcome.ok {
        log("queue_ack", json!({"topic": topic_name, "idempotency_key": key, "outcome": outcome.detail}));
        let _ = gate(env, &topic_name, "count/acked").await;
        m.ack();
    } else {
        log("queue_retry", json!({"topic": topic_name, "idempotency_key": key, "outcome": outcome.detail}));
        let _ = gate(env, &topic_name, "count/retried").await;
        m.retry();
    }
}
