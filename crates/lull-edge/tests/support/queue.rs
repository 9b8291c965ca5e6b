//! The queue side's fault harness, for `tests/queue_faults.rs`: the
//! consumer's whole per-message logic ([`Consumer::handle`]) and the topic gate
//! object's ([`GateObject`]) driven together on virtual time over a model of
//! Cloudflare Queues (deliveries counted per message, `retry` with delays,
//! `max_retries`, the move to the dead-letter queue, and deletion past the
//! dead-letter queue's own `max_retries`). The fakes: [`FakeGateStore`] (the
//! gate value and SQLite rows), [`FakeGates`] (the calls to the gate object),
//! [`FakeQueue`] (the queues), [`Receiver`] (the forward's target, answered by
//! the harness) and [`FakeClock`] (virtual time). Storage and the queue fail
//! at any call; a call to the gate fails, loses its answer, or finds the gate
//! object restarted, its memory and the calls it held lost ([`Fault`]).
//!
//! [`run`] goes round after round ([`round`]: every available message of both
//! queues at once, driven until each settles) until every queue is empty, the
//! operator discarding dead letters when the topic's store is full. As each
//! delivery settles, an ack must be earned (its forward got a 2xx, a copy of
//! it is on a queue again, or the gate's rows keep it); after each round, the
//! dead letters kept stay within the topic's bound. [`check`] then judges what
//! the run left: every lull message settled; the bound held at the receiver; a
//! forward's attempt grew on every delivery and a wait never inflated it; one
//! row per key; no lull message deleted by the queue; every message ended
//! delivered, kept or discarded; copies keep their body.

use lull_edge::metrics::{Metrics, Point};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use lull_edge::ports::{Clock, Outbound, Outcome, Outgoing, QueueSend, StoreError};
use lull_edge::{
    Consumer, DeadLetterRow, DeadTotals, Failing, GateAnswer, GateObject, GateOp, GateState, GateStore, Gates,
    NewDeadLetter, Settle, Topics,
};
use proptest::prelude::*;

pub(crate) const LIMIT: u32 = 2;
pub(crate) const BOUND: usize = 3;
const TOPICS: &str = r#"{"q": {"target": "https://receiver.test/q", "wait_ms": 1, "delivery": "queue",
    "forward_concurrency": 2, "delivery_timeout_ms": 300000, "max_queue_dead_letters": 3}}"#;
pub(crate) const DELIVERY: &str = "LULL_QUEUE";
pub(crate) const DEAD: &str = "LULL_DEAD_LETTERS";
/// The model's queues, as wrangler.toml configures them.
pub(crate) const MAX_RETRIES: u32 = 3;
const DEAD_MAX_RETRIES: u32 = 100;
const RETRY_DELAY_MS: u64 = 1_000;

/// What the next call to the gate object does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The call fails (nothing happens at the other end).
    Fail,
    /// The gate object runs the call, but its answer is lost on the way back.
    LoseAnswer,
    /// The gate object restarts before the call: its memory and every call it holds are lost (storage is kept).
    Crash,
}

/// A queue message as the model queue holds it.
#[derive(Clone, Debug)]
struct Item {
    text: String,
    dead: bool,
    attempts: u32,
    available_at: u64,
}

/// Everything outside the consumer: the gate's storage, the queues, the receiver, the clock.
#[derive(Default)]
pub(crate) struct World {
    pub(crate) now: Cell<u64>,
    /// Deadlines of the sleeps pending at the last poll.
    timers: RefCell<Vec<u64>>,
    // The gate object's storage.
    pub(crate) gate: RefCell<Option<GateState>>,
    /// Keys holding dead letters, and their newest one's time (the `dead_keys` table).
    pub(crate) dead_keys: RefCell<BTreeMap<String, u64>>,
    pub(crate) legacy: RefCell<Option<Vec<String>>>,
    pub(crate) rows: RefCell<BTreeMap<u64, NewDeadLetter>>,
    next_row: Cell<u64>,
    pub(crate) failing: RefCell<BTreeMap<String, (Failing, u64)>>,
    /// Faults: every storage call, every call to the gate, every queue send.
    pub(crate) store_faults: RefCell<Vec<bool>>,
    pub(crate) gate_faults: RefCell<Vec<Option<Fault>>>,
    pub(crate) queue_faults: RefCell<Vec<bool>>,
    /// The queues' messages, and what was deleted by them (past the dead-letter queue's retries).
    items: RefCell<Vec<Item>>,
    deleted: RefCell<Vec<String>>,
    /// Every send to a queue: (binding, text, delay).
    pub(crate) sent: RefCell<Vec<(String, String, u32)>>,
    /// The receiver: forwards started (idempotency key, attempt, in flight at its start), answers by forward.
    pub(crate) started: RefCell<Vec<(String, u32, usize)>>,
    in_flight: Cell<usize>,
    pub(crate) answers: RefCell<Vec<Option<bool>>>,
    /// The next refused forward is a `429` instead of a `500`, with this `Retry-After` (ms), if any.
    pub(crate) throttle_next: Cell<Option<Option<u64>>>,
    pub(crate) poison: RefCell<BTreeSet<String>>,
    /// Idempotency keys the receiver answered 2xx.
    succeeded: RefCell<BTreeSet<String>>,
    /// Which delivery (round, place in it) the harness is polling: what it
    /// does is its own. Its forwards answered 2xx, the delivery making each
    /// send (beside `sent`), and the row the gate answered each `Kept` with.
    delivering: Cell<Option<Delivery>>,
    round: Cell<u64>,
    succeeded_by: RefCell<BTreeSet<Delivery>>,
    sent_by: RefCell<Vec<Option<Delivery>>>,
    kept_by: RefCell<BTreeMap<Delivery, u64>>,
    /// While set, queue sends (and gate saves) wait until the harness clears it.
    pub(crate) hold_sends: Cell<bool>,
    pub(crate) hold_saves: Cell<bool>,
    /// Calls the gate object got, by operation.
    pub(crate) gate_calls: RefCell<BTreeMap<&'static str, u64>>,
    pub(crate) logs: RefCell<Vec<String>>,
    /// The data points the consumer and the gate object wrote.
    pub(crate) points: RefCell<Vec<Point>>,
}

pub(crate) type Shared = Rc<World>;

/// One delivery of a round: (round, its place in the round).
type Delivery = (u64, usize);

fn pop<T: Copy + Default>(faults: &RefCell<Vec<T>>) -> T {
    faults.borrow_mut().pop().unwrap_or_default()
}

pub(crate) fn key_of(text: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(text).ok()?["idempotency_key"].as_str().map(str::to_string)
}

/// Pending until `ready` says so (the harness lets it go).
struct Until<F: Fn() -> bool>(F);

impl<F: Fn() -> bool> Future for Until<F> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if (self.0)() { Poll::Ready(()) } else { Poll::Pending }
    }
}

/// The gate's storage: the gate value and SQLite rows, failing at any call.
pub(crate) struct FakeGateStore(Shared);

impl FakeGateStore {
    fn fault(&self) -> Result<(), StoreError> {
        if pop(&self.0.store_faults) { Err(StoreError("injected storage failure".into())) } else { Ok(()) }
    }
}

impl GateStore for FakeGateStore {
    async fn load(&self) -> Result<Option<GateState>, StoreError> {
        self.fault()?;
        Ok(self.0.gate.borrow().clone())
    }
    async fn save(&self, state: &GateState) -> Result<(), StoreError> {
        let world = self.0.clone();
        Until(move || !world.hold_saves.get()).await;
        self.fault()?;
        *self.0.gate.borrow_mut() = Some(state.clone());
        Ok(())
    }
    async fn legacy_dead_letters(&self) -> Result<Option<Vec<String>>, StoreError> {
        self.fault()?;
        Ok(self.0.legacy.borrow().clone())
    }
    async fn forget_legacy_dead_letters(&self) -> Result<(), StoreError> {
        self.fault()?;
        *self.0.legacy.borrow_mut() = None;
        Ok(())
    }
    fn prepare(&self) -> Result<(), StoreError> {
        self.fault()
    }
    fn dead_totals(&self) -> Result<DeadTotals, StoreError> {
        self.fault()?;
        let rows = self.0.rows.borrow();
        Ok(DeadTotals { count: rows.len() as u64, bytes: rows.values().map(|r| r.message.len() as u64).sum() })
    }
    fn keep_dead(&self, letters: &[NewDeadLetter]) -> Result<u64, StoreError> {
        self.fault()?;
        let mut rows = self.0.rows.borrow_mut();
        let mut last = 0;
        for letter in letters {
            // SQLite's unique indexes: a legacy place, and a (non-empty) idempotency key.
            let key = &letter.idempotency_key;
            let kept = rows.iter().find(|(_, r)| {
                (letter.legacy.is_some() && r.legacy == letter.legacy) || (!key.is_empty() && r.idempotency_key == *key)
            });
            if let Some((id, _)) = kept {
                last = if key.is_empty() { last } else { *id };
                self.0.failing.borrow_mut().remove(key);
                continue;
            }
            last = self.0.next_row.get() + 1;
            self.0.next_row.set(last);
            rows.insert(last, letter.clone());
            self.0.failing.borrow_mut().remove(&letter.idempotency_key);
        }
        Ok(last)
    }
    fn dead_letter_of(&self, idempotency_key: &str) -> Result<Option<u64>, StoreError> {
        self.fault()?;
        let rows = self.0.rows.borrow();
        Ok(rows
            .iter()
            .find(|(_, r)| !idempotency_key.is_empty() && r.idempotency_key == idempotency_key)
            .map(|(id, _)| *id))
    }
    fn dead_page(&self, after: Option<u64>, limit: usize) -> Result<Vec<DeadLetterRow>, StoreError> {
        self.fault()?;
        let rows = self.0.rows.borrow();
        let page = rows.range(after.map_or(0, |a| a + 1)..).take(limit);
        Ok(page.map(|(id, letter)| DeadLetterRow { id: *id, letter: letter.clone() }).collect())
    }
    fn dead_letter(&self, id: u64) -> Result<Option<DeadLetterRow>, StoreError> {
        self.fault()?;
        Ok(self.0.rows.borrow().get(&id).map(|letter| DeadLetterRow { id, letter: letter.clone() }))
    }
    fn forget_dead(&self, ids: &[u64]) -> Result<u64, StoreError> {
        self.fault()?;
        let mut rows = self.0.rows.borrow_mut();
        Ok(ids.iter().filter(|id| rows.remove(id).is_some()).count() as u64)
    }
    fn failing(&self, idempotency_key: &str) -> Result<Option<Failing>, StoreError> {
        self.fault()?;
        Ok(self.0.failing.borrow().get(idempotency_key).map(|(f, _)| f.clone()))
    }
    fn record_dead_key(&self, key: &str, at: u64) -> Result<(), StoreError> {
        self.fault()?;
        let mut keys = self.0.dead_keys.borrow_mut();
        let kept = keys.entry(key.to_string()).or_default();
        *kept = (*kept).max(at);
        Ok(())
    }

    fn dead_keys(&self, since: u64, after: Option<&str>, limit: usize) -> Result<(Vec<String>, u64), StoreError> {
        self.fault()?;
        let keys = self.0.dead_keys.borrow();
        let matching: Vec<&String> = keys
            .iter()
            .filter(|(k, at)| **at >= since && after.is_none_or(|a| k.as_str() > a))
            .map(|(k, _)| k)
            .collect();
        let page: Vec<String> = matching.iter().take(limit).map(|k| (*k).clone()).collect();
        Ok((page.clone(), (matching.len() - page.len()) as u64))
    }

    fn forget_dead_keys(&self, keys: &[String]) -> Result<(), StoreError> {
        self.fault()?;
        let mut kept = self.0.dead_keys.borrow_mut();
        for key in keys {
            kept.remove(key);
        }
        Ok(())
    }

    fn record_forward(&self, key: &str, failed: Option<&Failing>, stale: u64) -> Result<(), StoreError> {
        self.fault()?;
        let mut failing = self.0.failing.borrow_mut();
        match failed {
            None => drop(failing.remove(key)),
            Some(f) => {
                let first = failing.get(key).map_or(f.first_failed_at, |(old, _)| old.first_failed_at);
                failing.insert(key.to_string(), (Failing { first_failed_at: first, ..f.clone() }, f.first_failed_at));
                failing.retain(|_, (_, last)| *last >= stale);
            }
        }
        Ok(())
    }
}

/// The queues: a send puts a new message on the queue the binding names.
pub(crate) struct FakeQueue(Shared);

impl QueueSend for FakeQueue {
    async fn send(&self, binding: &str, messages: &[String], delay_secs: u32) -> Result<(), String> {
        let world = self.0.clone();
        Until(move || !world.hold_sends.get()).await;
        if pop(&self.0.queue_faults) {
            return Err("queue: injected failure".into());
        }
        let available_at = self.0.now.get() + u64::from(delay_secs) * 1000;
        for text in messages {
            self.0.sent.borrow_mut().push((binding.into(), text.clone(), delay_secs));
            self.0.sent_by.borrow_mut().push(self.0.delivering.get());
            let dead = binding == DEAD;
            assert!(dead || binding == DELIVERY, "a binding wrangler.toml has: {binding}");
            self.0.items.borrow_mut().push(Item { text: text.clone(), dead, attempts: 0, available_at });
        }
        Ok(())
    }
}

/// Virtual time: a pause ends when the harness moves the clock past it.
struct Sleep {
    world: Shared,
    until: u64,
}

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.world.now.get() >= self.until {
            return Poll::Ready(());
        }
        self.world.timers.borrow_mut().push(self.until);
        Poll::Pending
    }
}

#[derive(Clone)]
pub(crate) struct FakeClock(Shared);

impl Metrics for FakeClock {
    fn point(&self, point: Point) {
        self.0.points.borrow_mut().push(point);
    }
}

impl Metrics for &FakeClock {
    fn point(&self, point: Point) {
        (*self).point(point);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> u64 {
        self.0.now.get()
    }
    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        Sleep { world: self.0.clone(), until: self.0.now.get() + ms }
    }
    fn log(&self, line: &str) {
        self.0.logs.borrow_mut().push(line.to_string());
    }
}

impl Clock for &FakeClock {
    fn now(&self) -> u64 {
        (*self).now()
    }
    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        (*self).sleep(ms)
    }
    fn log(&self, line: &str) {
        (*self).log(line)
    }
}

impl QueueSend for &FakeQueue {
    fn send(&self, binding: &str, messages: &[String], delay_secs: u32) -> impl Future<Output = Result<(), String>> {
        (*self).send(binding, messages, delay_secs)
    }
}

type Object = GateObject<FakeGateStore, FakeQueue, FakeClock>;

pub(crate) fn object(world: &Shared) -> Rc<Object> {
    Rc::new(GateObject::new(FakeGateStore(world.clone()), FakeQueue(world.clone()), FakeClock(world.clone())))
}

/// The calls to the gate object. A crash replaces it: the calls the old one
/// held fail, as a Durable Object's do when it restarts.
pub(crate) struct FakeGates {
    pub(crate) world: Shared,
    topics: Rc<Topics>,
    pub(crate) object: RefCell<Rc<Object>>,
    epoch: Cell<u64>,
}

impl FakeGates {
    fn crash(&self) {
        *self.object.borrow_mut() = object(&self.world);
        self.epoch.set(self.epoch.get() + 1);
    }
}

/// `inner`, failing at once when the gate object it runs on restarts.
struct Held<'a, F> {
    inner: Pin<Box<F>>,
    gates: &'a FakeGates,
    epoch: u64,
}

impl<F: Future<Output = Result<GateAnswer, lull_edge::ApiError>>> Future for Held<'_, F> {
    type Output = Result<GateAnswer, String>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.gates.epoch.get() != self.epoch {
            return Poll::Ready(Err("gate: the object restarted".into()));
        }
        self.inner.as_mut().poll(cx).map(|a| a.map_err(|e| format!("gate: {}", e.code())))
    }
}

impl Gates for &FakeGates {
    async fn ask(&self, topic: &str, op: GateOp) -> Result<GateAnswer, String> {
        let fault = self.world.gate_faults.borrow_mut().pop().flatten();
        match fault {
            Some(Fault::Fail) => return Err("gate: injected failure".into()),
            Some(Fault::Crash) => self.crash(),
            _ => {}
        }
        *self.world.gate_calls.borrow_mut().entry(op.name()).or_default() += 1;
        let object = self.object.borrow().clone();
        let topics = self.topics.clone();
        let topic = topic.to_string();
        let call = async move { object.call(&topic, topics.get(&topic), op).await };
        let answer = Held { inner: Box::pin(call), gates: self, epoch: self.epoch.get() }.await;
        if fault == Some(Fault::LoseAnswer) {
            return Err("gate: the answer was lost".into());
        }
        if let (Ok(GateAnswer::Kept { kept: id }), Some(by)) = (&answer, self.world.delivering.get()) {
            self.world.kept_by.borrow_mut().insert(by, *id);
        }
        answer
    }
}

/// A forward in flight: ready once the harness answers it.
struct Forward {
    world: Shared,
    id: usize,
    key: String,
    by: Option<Delivery>,
}

impl Future for Forward {
    type Output = Outcome;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Outcome> {
        let Some(ok) = self.world.answers.borrow()[self.id] else { return Poll::Pending };
        self.world.in_flight.set(self.world.in_flight.get() - 1);
        if ok {
            self.world.succeeded.borrow_mut().insert(self.key.clone());
            if let Some(by) = self.by {
                self.world.succeeded_by.borrow_mut().insert(by);
            }
        }
        if !ok && let Some(retry_after_ms) = self.world.throttle_next.take() {
            return Poll::Ready(Outcome { ok: false, detail: "429".into(), status: Some(429), retry_after_ms });
        }
        Poll::Ready(if ok { Outcome::done("200") } else { Outcome::failed("500") })
    }
}

pub(crate) struct Receiver(Shared);

impl Outbound for &Receiver {
    fn send(&self, out: Outgoing) -> impl Future<Output = Outcome> {
        let w = &self.0;
        w.in_flight.set(w.in_flight.get() + 1);
        w.started.borrow_mut().push((out.idempotency_key.clone(), out.attempt, w.in_flight.get()));
        w.answers.borrow_mut().push(None);
        let (id, by) = (w.answers.borrow().len() - 1, w.delivering.get());
        Forward { world: w.clone(), id, key: out.idempotency_key, by }
    }
}

/// The consumer's ports, over one world.
pub(crate) struct Parts {
    pub(crate) gates: FakeGates,
    queue: FakeQueue,
    receiver: Receiver,
    clock: FakeClock,
    pub(crate) topics: Rc<Topics>,
}

type TestConsumer<'a> = Consumer<'a, &'a FakeGates, &'a FakeQueue, &'a Receiver, &'a FakeClock>;

impl Parts {
    pub(crate) fn new(world: &Shared) -> Parts {
        let topics = Rc::new(Topics::parse(TOPICS).unwrap());
        let gates = FakeGates {
            world: world.clone(),
            topics: topics.clone(),
            object: RefCell::new(object(world)),
            epoch: Cell::new(0),
        };
        let (queue, receiver, clock) = (FakeQueue(world.clone()), Receiver(world.clone()), FakeClock(world.clone()));
        Parts { gates, queue, receiver, clock, topics }
    }

    pub(crate) fn consumer(&self) -> TestConsumer<'_> {
        let (gates, queue, outbound, clock) = (&self.gates, &self.queue, &self.receiver, &self.clock);
        Consumer { gates, queue, outbound, clock, topics: &self.topics, dead_letters: DEAD }
    }

    /// Call the gate object as an operator would (no injected call faults).
    pub(crate) fn admin(&self, op: GateOp) -> Result<GateAnswer, lull_edge::ApiError> {
        let object = self.gates.object.borrow().clone();
        let mut call = Box::pin(async move { object.call("q", self.topics.get("q"), op).await });
        match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(answer) => answer,
            Poll::Pending => panic!("an admin call waited"),
        }
    }
}

/// A message of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Good,
    /// The receiver always refuses it: it ends as a dead letter.
    Poison,
    Garbage,
}

pub(crate) fn text(kind: Kind, i: usize) -> String {
    match kind {
        Kind::Garbage => format!("not json {i}"),
        _ => format!(
            r#"{{"topic":"q","idempotency_key":"q/k{i}/x.1","attempt":1,"body":{{"i":{i},"pad":"{}"}}}}"#,
            "x".repeat(i * 7)
        ),
    }
}

pub(crate) fn poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

#[derive(Debug, Clone)]
pub(crate) struct Case {
    kinds: Vec<Kind>,
    store_faults: Vec<bool>,
    gate_faults: Vec<Option<Fault>>,
    queue_faults: Vec<bool>,
    /// How forwards are answered: (which of those waiting, 2xx, let time pass first).
    answers: Vec<(usize, bool, bool)>,
    /// The operator discards the oldest dead letter when the store is full, in this share of rounds.
    discard_every: u32,
}

pub(crate) fn case() -> impl Strategy<Value = Case> {
    let kind = prop_oneof![6 => Just(Kind::Good), 3 => Just(Kind::Poison), 1 => Just(Kind::Garbage)];
    let fault = prop_oneof![8 => Just(None), 1 => Just(Some(Fault::Fail)), 1 => Just(Some(Fault::LoseAnswer)),
                            1 => Just(Some(Fault::Crash))];
    (
        prop::collection::vec(kind, 1..14),
        prop::collection::vec(prop::bool::weighted(0.15), 0..80),
        prop::collection::vec(fault, 0..80),
        prop::collection::vec(prop::bool::weighted(0.3), 0..12),
        prop::collection::vec((0..12usize, prop::bool::weighted(0.7), prop::bool::weighted(0.3)), 0..60),
        1..6u32,
    )
        .prop_map(|(kinds, store_faults, gate_faults, queue_faults, answers, discard_every)| Case {
            kinds,
            store_faults,
            gate_faults,
            queue_faults,
            answers,
            discard_every,
        })
}

/// What one run left: the world and the operator's discards.
struct Run {
    world: Shared,
    discarded: BTreeSet<String>,
}

/// Deliver every available message of both queues at once (a round), drive
/// them until each settles, and apply the queues' rules to the outcomes.
/// Checks, as each delivery settles, that an ack is earned.
fn round(parts: &Parts, script: &mut std::slice::Iter<'_, (usize, bool, bool)>) {
    let world = &parts.gates.world;
    let now = world.now.get();
    let (batch, rest): (Vec<Item>, Vec<Item>) =
        std::mem::take(&mut *world.items.borrow_mut()).into_iter().partition(|i| i.available_at <= now);
    *world.items.borrow_mut() = rest;
    let consumer = parts.consumer();
    let round_id = world.round.get() + 1;
    world.round.set(round_id);
    let mut handles: Vec<Pin<Box<dyn Future<Output = Settle> + '_>>> = batch
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let consumer = &consumer;
            let (text, attempts, dead) = (item.text.clone(), item.attempts + 1, item.dead);
            Box::pin(async move { consumer.handle(&format!("m{i}"), &text, attempts, dead).await })
                as Pin<Box<dyn Future<Output = _>>>
        })
        .collect();
    let mut settled: Vec<Option<Settle>> = vec![None; handles.len()];
    for _ in 0..100_000 {
        world.timers.borrow_mut().clear();
        for (i, handle) in handles.iter_mut().enumerate() {
            if settled[i].is_some() {
                continue;
            }
            world.delivering.set(Some((round_id, i)));
            let polled = poll(handle.as_mut());
            world.delivering.set(None);
            if let Poll::Ready(s) = polled {
                settled[i] = Some(s);
                if s == Settle::Ack {
                    acked_for_a_reason(world, &batch[i], (round_id, i));
                }
            }
        }
        if settled.iter().all(Option::is_some) {
            break;
        }
        let waiting: Vec<usize> =
            world.answers.borrow().iter().enumerate().filter(|(_, a)| a.is_none()).map(|(i, _)| i).collect();
        let next_timer = world.timers.borrow().iter().min().copied();
        let (pick, ok, let_time_pass) = script.next().copied().unwrap_or((0, true, false));
        match (waiting.is_empty(), next_timer) {
            (true, None) => panic!("a delivery waits on nothing"),
            (false, Some(at)) if let_time_pass => world.now.set(at.max(world.now.get())),
            (true, Some(at)) => world.now.set(at.max(world.now.get())),
            (false, _) => {
                let id = waiting[pick % waiting.len()];
                let key = world.started.borrow()[id].0.clone();
                let ok = ok && !world.poison.borrow().contains(&key);
                world.answers.borrow_mut()[id] = Some(ok);
            }
        }
    }
    drop(handles);
    for (item, settle) in batch.into_iter().zip(settled) {
        let settle = settle.expect("every delivery settles");
        let Settle::Retry { delay_secs } = settle else { continue };
        let attempts = item.attempts + 1;
        let max = if item.dead { DEAD_MAX_RETRIES } else { MAX_RETRIES };
        if attempts > max {
            if item.dead {
                world.deleted.borrow_mut().push(item.text);
            } else {
                // Past its retries: moved to the dead-letter queue (its attempts restart).
                world.items.borrow_mut().push(Item { dead: true, attempts: 0, available_at: world.now.get(), ..item });
            }
            continue;
        }
        let delay = delay_secs.map_or(RETRY_DELAY_MS, |s| u64::from(s) * 1000);
        world.items.borrow_mut().push(Item { attempts, available_at: world.now.get() + delay, ..item });
    }
}

/// An acked delivery earned it, by what this delivery itself did: its
/// forward got a 2xx, it sent a copy of itself (same key, same body) to a
/// queue, or the gate answered it `Kept` with a row holding its key and body.
fn acked_for_a_reason(world: &World, item: &Item, me: Delivery) {
    let key = key_of(&item.text).expect("garbage is never acked");
    let body = |t: &str| serde_json::from_str::<serde_json::Value>(t).map(|v| v["body"].to_string()).ok();
    let mine = |t: &str| key_of(t).as_deref() == Some(key.as_str()) && body(t) == body(&item.text);
    let forwarded = !item.dead && world.succeeded_by.borrow().contains(&me);
    let sent = world.sent.borrow();
    let by = world.sent_by.borrow();
    let copied = sent.iter().zip(by.iter()).any(|((_, t, _), by)| *by == Some(me) && mine(t));
    let row = world.kept_by.borrow().get(&me).copied();
    let kept = row.and_then(|id| world.rows.borrow().get(&id).map(|r| mine(&r.message))).unwrap_or(false);
    assert!(forwarded || copied || kept, "acked with no 2xx, no copy of its own on a queue and no row: {}", item.text);
}

fn run(case: &Case) -> Run {
    let world: Shared = Rc::default();
    world.now.set(1_000_000);
    *world.store_faults.borrow_mut() = case.store_faults.clone();
    *world.gate_faults.borrow_mut() = case.gate_faults.clone();
    *world.queue_faults.borrow_mut() = case.queue_faults.clone();
    for (i, kind) in case.kinds.iter().enumerate() {
        let text = text(*kind, i);
        if *kind == Kind::Poison {
            world.poison.borrow_mut().insert(key_of(&text).unwrap());
        }
        world.items.borrow_mut().push(Item { text, dead: false, attempts: 0, available_at: 1_000_000 });
    }
    let parts = Parts::new(&world);
    let mut script = case.answers.iter();
    let mut discarded = BTreeSet::new();
    for n in 0..2_000u32 {
        // Garbage is never a lull message: it may go round until the queue deletes it.
        if world.items.borrow().iter().all(|i| key_of(&i.text).is_none()) {
            break;
        }
        round(&parts, &mut script);
        // The bound is never passed.
        assert!(world.rows.borrow().len() <= BOUND, "{} dead letters kept (bound {BOUND})", world.rows.borrow().len());
        // The operator makes room now and then.
        if world.rows.borrow().len() >= BOUND && n % case.discard_every == 0 {
            let (&id, row) = world.rows.borrow().iter().next().map(|(id, r)| (id, r.clone())).unwrap();
            if parts.admin(GateOp::Discard { id }).is_ok() {
                discarded.insert(row.idempotency_key);
            }
        }
        let next = world.items.borrow().iter().map(|i| i.available_at).min();
        if let Some(at) = next {
            world.now.set(world.now.get().max(at));
        }
    }
    Run { world, discarded }
}

pub(crate) fn check(case: &Case) {
    let Run { world, discarded } = run(case);
    assert!(
        world.items.borrow().iter().all(|i| key_of(&i.text).is_none()),
        "every lull message settles: {:?}",
        world.items.borrow()
    );
    // The bound holds at the receiver.
    let peak = world.started.borrow().iter().map(|(_, _, n)| *n).max().unwrap_or(0);
    assert!(peak <= LIMIT as usize, "{peak} forwards in flight at once (bound {LIMIT})");
    // No lull message is deleted by the queue.
    let lost: Vec<String> = world.deleted.borrow().iter().filter(|t| key_of(t).is_some()).cloned().collect();
    assert!(lost.is_empty(), "deleted by the queue: {lost:?}");
    // Attempts grow on every forward of a key; without a failed send (a retry in place of a wait), by one.
    let mut seen: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    let started = world.started.borrow();
    for (key, attempt, _) in started.iter() {
        seen.entry(key.as_str()).or_default().push(*attempt);
    }
    for (key, attempts) in &seen {
        assert!(attempts.windows(2).all(|w| w[1] > w[0]), "{key}: attempts {attempts:?}");
        if case.queue_faults.iter().all(|f| !f) {
            let expected: Vec<u32> = (1..=attempts.len() as u32).collect();
            assert_eq!(attempts, &expected, "{key}: a wait never counts as an attempt");
        }
    }
    // One row per idempotency key, whatever answers or acks were lost.
    let keys: Vec<String> = world.rows.borrow().values().map(|r| r.idempotency_key.clone()).collect();
    let kept: BTreeSet<String> = keys.iter().cloned().collect();
    assert_eq!(kept.len(), keys.len(), "a key kept twice: {keys:?}");
    // Every lull message ends delivered, kept, or discarded by the operator.
    for (i, kind) in case.kinds.iter().enumerate() {
        let Some(key) = key_of(&text(*kind, i)) else { continue };
        let done = world.succeeded.borrow().contains(&key) || kept.contains(&key) || discarded.contains(&key);
        assert!(done, "{key} ({kind:?}) was neither delivered, kept nor discarded");
        if *kind == Kind::Poison {
            assert!(!world.succeeded.borrow().contains(&key));
        }
    }
    // Every wait is at least a second and at most what a queue takes (a copy
    // the consumer dead-letters goes at once, saying why); copies keep their body.
    for (binding, copy, delay) in world.sent.borrow().iter() {
        let copy_json = serde_json::from_str::<serde_json::Value>(copy).unwrap();
        let dead_lettered = copy_json["outcome"].is_string() && copy_json["waits"].is_null();
        let delays = if dead_lettered { 0..=0 } else { 1..=43_200 };
        assert!(delays.contains(delay), "{binding}: delay {delay} ({copy})");
        let body = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap()["body"].to_string();
        let i: usize = key_of(copy).unwrap()[3..].split('/').next().unwrap().parse().unwrap();
        assert_eq!(body(copy), body(&text(case.kinds[i], i)), "a copy carries the body as it was");
    }
}

/// `message` delivered as its queue's attempts 1 to `times`, one after
/// another, each forward failing at the receiver, the clock moving `step_ms`
/// after each: every delivery's settle.
pub(crate) fn failing_deliveries(parts: &Parts, message: &str, times: u32, step_ms: u64) -> Vec<Settle> {
    let world = &parts.gates.world;
    let consumer = parts.consumer();
    (1..=times)
        .map(|attempts| {
            let mut h = Box::pin(consumer.handle("m", message, attempts, false));
            assert!(poll(h.as_mut()).is_pending(), "attempt {attempts}: the forward is in flight");
            let last = world.answers.borrow().len() - 1;
            world.answers.borrow_mut()[last] = Some(false);
            let Poll::Ready(settle) = poll(h.as_mut()) else { panic!("attempt {attempts}: a failed forward settles") };
            world.now.set(world.now.get() + step_ms);
            settle
        })
        .collect()
}

/// One round of `messages` handed to the consumer together; every forward is
/// answered 2xx in the order they start.
pub(crate) fn all_at_once(parts: &Parts, messages: &[String], dead: bool) -> Vec<Settle> {
    let world = &parts.gates.world;
    let consumer = parts.consumer();
    let mut handles: Vec<_> = messages.iter().map(|t| Box::pin(consumer.handle("m", t, 1, dead))).collect::<Vec<_>>();
    let mut settled = vec![None; handles.len()];
    for _ in 0..100_000 {
        world.timers.borrow_mut().clear();
        for (i, h) in handles.iter_mut().enumerate() {
            if settled[i].is_none()
                && let Poll::Ready(s) = poll(h.as_mut())
            {
                settled[i] = Some(s);
            }
        }
        if settled.iter().all(Option::is_some) {
            break;
        }
        let waiting = world.answers.borrow().iter().position(Option::is_none);
        match (waiting, world.timers.borrow().iter().min().copied()) {
            (Some(id), _) => world.answers.borrow_mut()[id] = Some(true),
            (None, Some(at)) => world.now.set(at),
            (None, None) => panic!("stuck"),
        }
    }
    settled.into_iter().map(Option::unwrap).collect()
}

/// A call to the gate object as the harness drives it (polled by hand).
pub(crate) type Call = Pin<Box<dyn Future<Output = Result<GateAnswer, lull_edge::ApiError>>>>;

pub(crate) fn call(parts: &Parts, op: GateOp) -> Call {
    let object = parts.gates.object.borrow().clone();
    let topics = parts.topics.clone();
    Box::pin(async move { object.call("q", topics.get("q"), op).await })
}

/// One delivery of `text` (the queue's `attempts`th), driven until it settles;
/// its forward, if any, is answered `ok`.
pub(crate) fn deliver(parts: &Parts, text: &str, attempts: u32, ok: bool) -> Settle {
    let world = &parts.gates.world;
    let consumer = parts.consumer();
    let mut handle = Box::pin(consumer.handle("m", text, attempts, false));
    for _ in 0..10_000 {
        world.timers.borrow_mut().clear();
        if let Poll::Ready(settle) = poll(handle.as_mut()) {
            return settle;
        }
        let waiting = world.answers.borrow().iter().position(Option::is_none);
        match (waiting, world.timers.borrow().iter().min().copied()) {
            (Some(id), _) => world.answers.borrow_mut()[id] = Some(ok),
            (None, Some(at)) => world.now.set(at),
            (None, None) => panic!("stuck"),
        }
    }
    panic!("never settled")
}
