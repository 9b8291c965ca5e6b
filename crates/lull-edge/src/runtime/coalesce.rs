//! The shell of [`crate::coalesce`]: this isolate's lanes, the object requests
//! they ask for, and the waits of the requests that joined a batch.
//!
//! workerd runs every request of an isolate on one thread, each in its own
//! context: I/O begun in one request's context cannot be used from another's,
//! and wasm-bindgen-futures runs every ready Rust task in one microtask of
//! whichever context woke the first. So, here:
//! - a waiting request is woken only through a JS promise it made itself, in
//!   its own context ([`Slot::sleep`]); whoever wakes it leaves plain data in its
//!   slot (status and JSON text, never a `Response`) and resolves that promise;
//!   each request builds its own response;
//! - a batch is sent by one of its own members, from its own task, inside its
//!   `waitUntil` (a member whose client went away still finishes the send); the
//!   sender hands the lane to the next batch by waking that batch's leader,
//!   which sends it from its own context in turn.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde_json::json;
use worker::js_sys::{self, Function, Promise};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::{JsFuture, future_to_promise};
use worker::web_sys::WorkerGlobalScope;
use worker::{Context, Env, Headers, Response, console_log};

use super::http::now_ms;
use super::router::forward;
use crate::coalesce::{ANSWER_WITHIN_MS, Answer, Arrival, Flight, Lanes, Member, Place, Turn, share};
use crate::http::ApiError;
use crate::key::{KeyCall, KeyRequest};
use crate::log::Fact;
use crate::names::{Key, key_label, object_name};
use crate::topic::Topic;

thread_local! {
    /// The lanes of this isolate, by key.
    static LANES: RefCell<Lanes<Rc<Slot>>> = RefCell::new(Lanes::default());
}

/// How a waiting request is woken, and where its answer is left for it.
#[derive(Default)]
struct Slot {
    /// Its event's answer, once its batch was answered.
    answer: RefCell<Option<Result<Answer, ApiError>>>,
    /// Woken while it was not waiting: it looks again before it waits.
    nudged: Cell<bool>,
    /// Resolves the promise it waits on (made in its own context).
    resolve: RefCell<Option<Function>>,
}

impl Slot {
    /// Wake the request (its promise's continuation runs in its own context).
    fn wake(&self) {
        self.nudged.set(true);
        let resolve = self.resolve.borrow_mut().take();
        if let Some(resolve) = resolve {
            let _ = resolve.call0(&JsValue::UNDEFINED);
        }
    }

    /// Wait until woken, or `ms` at most: on a promise made here, in the caller's context.
    async fn sleep(&self, ms: u64) {
        if self.nudged.replace(false) {
            return;
        }
        let mut made = None;
        let promise = Promise::new(&mut |resolve, _reject| made = Some(resolve));
        let Some(resolve) = made else { return };
        let global: WorkerGlobalScope = js_sys::global().unchecked_into();
        let ms = i32::try_from(ms).unwrap_or(i32::MAX);
        let timer = global.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms).ok();
        *self.resolve.borrow_mut() = Some(resolve);
        let _ = JsFuture::from(promise).await;
        self.resolve.borrow_mut().take();
        self.nudged.set(false);
        if let Some(timer) = timer {
            global.clear_timeout_with_handle(timer);
        }
    }
}

/// Accept one single event of `topic` (which coalesces): alone when nothing of its
/// key is in flight, else in its key's next batch; answered as its own request would be.
pub(crate) async fn event(
    env: &Env,
    ctx: &Context,
    topic: &Topic,
    key: Key,
    body: String,
    idempotency_key: Option<String>,
) -> Result<Response, ApiError> {
    let lane = object_name(&topic.name, &key);
    let slot = Rc::new(Slot::default());
    let member = Member { event: body, idempotency_key, waker: Rc::clone(&slot) };
    let arrival = LANES.with_borrow_mut(|lanes| lanes.arrive(&lane, member, now_ms()));
    match arrival {
        Arrival::Alone { flight, member } => {
            let answer = forward(env, single(&topic.name, key, member)).await;
            land(&lane, flight);
            answer
        }
        Arrival::Past { member } => forward(env, single(&topic.name, key, member)).await,
        Arrival::Joined(place) => {
            let sender = Sender { env: env.clone(), topic: topic.name.clone(), key, log_keys: topic.log_keys };
            wait(ctx, sender, &place, &slot).await
        }
    }
}

/// One event's own request.
fn single(topic: &str, key: Key, member: Member<Rc<Slot>>) -> KeyCall {
    let request =
        KeyRequest::Event { body: member.event, idempotency_key: member.idempotency_key, events_per_minute: None };
    KeyCall { topic: topic.to_string(), key, request }
}

/// `flight` of `lane` landed: wake the leader of the batch waiting behind it, if any.
fn land(lane: &str, flight: Flight) {
    let next = LANES.with_borrow_mut(|lanes| lanes.landed(lane, flight));
    if let Some(leader) = next {
        leader.wake();
    }
}

/// Wait at `place` for the event's answer, sending its batch if it falls to this request.
async fn wait(ctx: &Context, sender: Sender, place: &Place, slot: &Slot) -> Result<Response, ApiError> {
    loop {
        let answer = slot.answer.borrow_mut().take();
        if let Some(answer) = answer {
            return respond(answer?);
        }
        let now = now_ms();
        match LANES.with_borrow_mut(|lanes| lanes.turn(place, now)) {
            Turn::Send { flight, members } => {
                let send = sender.clone().send(place.lane.clone(), flight, members);
                let promise = future_to_promise(async move {
                    send.await;
                    Ok(JsValue::UNDEFINED)
                });
                // The send runs either way; `waitUntil` keeps it alive if this request's client goes away.
                let _ = ctx.as_ref().wait_until(&promise);
            }
            Turn::Wait { until } => slot.sleep(until.saturating_sub(now).max(1)).await,
            Turn::GiveUp => {
                return Err(ApiError::Internal(format!(
                    "the request carrying this event to its key gave no answer within {ANSWER_WITHIN_MS} ms"
                )));
            }
        }
    }
}

/// The event's own answer, as its single-event request would have had it.
fn respond(answer: Answer) -> Result<Response, ApiError> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    if let Some(secs) = &answer.retry_after {
        headers.set("retry-after", secs)?;
    }
    Ok(Response::ok(answer.body)?.with_status(answer.status).with_headers(headers))
}

/// What sends a batch of one key.
#[derive(Clone)]
struct Sender {
    env: Env,
    topic: String,
    key: Key,
    log_keys: bool,
}

impl Sender {
    /// Send `members`' events as `flight` of `lane`, hand the lane on, then each member its answer.
    async fn send(self, lane: String, flight: Flight, members: Vec<Member<Rc<Slot>>>) {
        let count = members.len();
        let mut slots = Vec::with_capacity(count);
        let mut events = Vec::with_capacity(count);
        for member in members {
            slots.push(member.waker);
            events.push((member.event, member.idempotency_key));
        }
        let request = match events.pop() {
            Some((body, idempotency_key)) if events.is_empty() => {
                KeyRequest::Event { body, idempotency_key, events_per_minute: None }
            }
            last => {
                events.extend(last);
                KeyRequest::Events { events, events_per_minute: None }
            }
        };
        let label = key_label(self.key.as_str(), self.log_keys);
        let call = KeyCall { topic: self.topic.clone(), key: self.key, request };
        let (answers, status) = match reply(&self.env, call).await {
            Ok((status, body, retry_after)) => (share(count, status, &body, retry_after.as_deref()), Some(status)),
            Err(e) => ((0..count).map(|_| Err(e.clone())).collect(), None),
        };
        land(&lane, flight);
        if count > 1 {
            let fact = Fact::new("coalesced", json!({"events": count, "status": status}));
            console_log!("{}", fact.line(&[("topic", &self.topic), ("key", &label)]));
        }
        for (slot, answer) in slots.into_iter().zip(answers) {
            *slot.answer.borrow_mut() = Some(answer);
            slot.wake();
        }
    }
}

/// The object's answer to `call`: status, JSON text and `Retry-After`.
async fn reply(env: &Env, call: KeyCall) -> Result<(u16, String, Option<String>), ApiError> {
    let mut res = forward(env, call).await?;
    let retry_after = res.headers().get("retry-after")?;
    Ok((res.status_code(), res.text().await?, retry_after))
}
