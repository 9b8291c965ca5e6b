//! The shell of [`crate::http::coalesce`]: this isolate's lanes, the object requests
//! they ask for, and the waits of the requests (single events and batches'
//! shares) that joined a batch.
//!
//! workerd runs every request of an isolate on one thread, each in its own
//! context: I/O begun in one request's context cannot be used from another's,
//! and wasm-bindgen-futures runs every ready Rust task in one microtask of
//! whichever context woke the first. So, here, no request ever wakes another:
//! - a waiting request sleeps on a timer of its own (workers-rs' [`Delay`]:
//!   a `setTimeout` it set, in its own context, cleared if the wait is
//!   dropped), then looks in its [`Slot`] for its answer, left there as plain
//!   data (status and JSON text, never a `Response`) by its batch's sender,
//!   and asks the lanes what to do next; it builds its own response;
//! - a batch is sent by one of its own members, from its own task, inside its
//!   `waitUntil` (a member whose client went away still finishes the send).
//!
//! (Waking a request by resolving a promise it made, from the sender's context,
//! worked at first on workerd — its continuation ran in its own context — but
//! after some 16,000 such wakes in one isolate every woken request built its
//! response in another's context: "Cannot perform I/O on behalf of a different
//! request". A request's own timer has no such limit.)

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use serde_json::json;
use worker::wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::future_to_promise;
use worker::{Context, Delay, Env, console_log};

use super::http::{self, Reply, now_ms};
use super::key_client::KeyClient;
use crate::error::ApiError;
use crate::http::ObjectAnswer;
use crate::http::batch::{self, KeyAnswer};
use crate::http::coalesce::{ANSWER_WITHIN_MS, Arrival, Flight, Lanes, Member, Place, Shape, Turn, request, share};
use crate::key::KeyCall;
use crate::log::Fact;
use crate::names::{Key, key_label, object_name};
use crate::topic::Topic;

thread_local! {
    /// The lanes of this isolate, by key.
    static LANES: RefCell<Lanes<Rc<Slot>>> = RefCell::new(Lanes::default());
}

/// Where a waiting request finds its answer (its event's, or its share's), once its batch was answered.
#[derive(Default)]
struct Slot {
    answer: RefCell<Option<Result<ObjectAnswer, ApiError>>>,
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
) -> Result<Reply, ApiError> {
    let slot = Rc::new(Slot::default());
    let member = Member::single(body, idempotency_key, Rc::clone(&slot));
    http::pass_on(&carry(env, ctx, topic, key, member, &slot).await?)
}

/// Accept one key's share of a batch of `topic` (which coalesces): alone when
/// nothing of its key is in flight, else whole in its key's next batch;
/// answered as its own share's request would be.
pub(crate) async fn batch_share(
    env: &Env,
    ctx: &Context,
    topic: &Topic,
    key: Key,
    events: Vec<(String, Option<String>)>,
) -> KeyAnswer {
    let slot = Rc::new(Slot::default());
    match carry(env, ctx, topic, key, Member::share(events, Rc::clone(&slot)), &slot).await {
        Ok(answer) => batch::read_key_answer(&answer, http::share_failed),
        Err(e) => Err(http::share_failed(&e)),
    }
}

/// Carry `member` (its answer goes to `slot`) to its key's object: alone when
/// nothing of its key is in flight, else in its key's next batch; the answer its
/// own request would have had.
async fn carry(
    env: &Env,
    ctx: &Context,
    topic: &Topic,
    key: Key,
    member: Member<Rc<Slot>>,
    slot: &Slot,
) -> Result<ObjectAnswer, ApiError> {
    let lane = object_name(&topic.name, &key);
    let arrival = LANES.with_borrow_mut(|lanes| lanes.arrive(&lane, member, now_ms()));
    let keys = KeyClient { env };
    let own = |key, member: Member<Rc<Slot>>| {
        let call = KeyCall { topic: topic.name.clone(), key, request: member.request() };
        keys.call(call)
    };
    match arrival {
        Arrival::Alone { flight, member } => {
            let answer = own(key, member).await;
            land(&lane, flight);
            answer
        }
        Arrival::Past { member } => own(key, member).await,
        Arrival::Joined(place) => {
            let sender = Sender { env: env.clone(), topic: topic.name.clone(), key, log_keys: topic.log_keys };
            wait(ctx, sender, &place, slot).await
        }
    }
}

/// `flight` of `lane` landed.
fn land(lane: &str, flight: Flight) {
    let now = now_ms();
    LANES.with_borrow_mut(|lanes| lanes.landed(lane, flight, now));
}

/// Wait at `place` for the member's answer, sending its batch if it falls to this request.
async fn wait(ctx: &Context, sender: Sender, place: &Place, slot: &Slot) -> Result<ObjectAnswer, ApiError> {
    loop {
        let answer = slot.answer.borrow_mut().take();
        if let Some(answer) = answer {
            return answer;
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
            Turn::Wait { until } => Delay::from(Duration::from_millis(until.saturating_sub(now).max(1))).await,
            Turn::GiveUp => {
                return Err(ApiError::Internal(format!(
                    "the request carrying these events to their key gave no answer within {ANSWER_WITHIN_MS} ms"
                )));
            }
        }
    }
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
    /// Send `members`' events as `flight` of `lane`, then leave each member its answer.
    async fn send(self, lane: String, flight: Flight, members: Vec<Member<Rc<Slot>>>) {
        let shapes: Vec<Shape> = members.iter().map(Member::shape).collect();
        let mut slots = Vec::with_capacity(members.len());
        let mut events = Vec::with_capacity(members.len());
        for member in members {
            let (mine, slot) = member.into_parts();
            slots.push(slot);
            events.extend(mine);
        }
        let count = events.len();
        let singles = shapes.iter().filter(|s| **s == Shape::Single).count();
        let request = request(&shapes, events);
        let label = key_label(self.key.as_str(), self.log_keys);
        let call = KeyCall { topic: self.topic.clone(), key: self.key, request };
        let (answers, status) = match (KeyClient { env: &self.env }).call(call).await {
            Ok(answer) => (share(&shapes, &answer), Some(answer.status)),
            Err(e) => (shapes.iter().map(|_| Err(e.clone())).collect(), None),
        };
        land(&lane, flight);
        if shapes.len() > 1 {
            let fact = Fact::new(
                "coalesced",
                json!({"events": count, "requests": shapes.len(), "singles": singles, "status": status}),
            );
            console_log!("{}", fact.line(&[("topic", &self.topic), ("key", &label)]));
        }
        for (slot, answer) in slots.into_iter().zip(answers) {
            *slot.answer.borrow_mut() = Some(answer);
        }
    }
}
