//! The queue side's native fault harness: the consumer's whole per-message
//! logic ([`Consumer::handle`]) and the topic gate object's ([`GateObject`])
//! driven together on virtual time over a model of Cloudflare Queues
//! (deliveries counted per message, `retry` with delays, `max_retries`, the
//! move to the dead-letter queue, and deletion past the dead-letter queue's
//! own `max_retries`), with fakes for the gate's storage (the gate value and
//! SQLite rows), the call to the gate object, the queue and the forward that
//! fail — or lose the gate object's memory and the calls it holds ("crash")
//! — at every call.
//!
//! Random messages (good ones, poison ones the receiver always refuses,
//! garbage) go round after round until every queue is empty, the operator
//! discarding dead letters when the topic's store is full. Judged from the
//! system, not from counters the code keeps: the receiver's log (forwards in
//! flight at each start, the attempt each carried), what the fake queues and
//! the gate's rows hold. Every delivery settles once; one is acked only when
//! the receiver answered it 2xx, its copy is on a queue again, or the gate's
//! rows keep it; the topic's bound holds at the receiver; a forward's attempt
//! grows on every delivery and a wait never inflates it; no lull message is
//! ever deleted by the queue; every message ends delivered, kept or discarded.
#![cfg(not(target_arch = "wasm32"))]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use lull_edge::ports::{Clock, Outbound, Outcome, Outgoing, QueueSend, StoreError};
use lull_edge::queue::consume::{Consumer, GATE_WAIT_BUDGET_MS, MAX_WAITS, Settle};
use lull_edge::queue::gate::{
    Counter, DeadLetterRow, DeadTotals, Failing, GateAnswer, GateObject, GateOp, GateState, GateStore, Gates, Grant,
    NewDeadLetter, StatusLetter,
};
use lull_edge::topic::Topics;
use proptest::prelude::*;

const LIMIT: u32 = 2;
const BOUND: usize = 3;
const TOPICS: &str = r#"{"q": {"target": "https://receiver.test/q", "wait_ms": 1, "delivery": "queue",
    "forward_concurrency": 2, "delivery_timeout_ms": 300000, "max_queue_dead_letters": 3}}"#;
const DELIVERY: &str = "LULL_QUEUE";
const DEAD: &str = "LULL_DEAD_LETTERS";
/// The model's queues, as wrangler.toml configures them.
const MAX_RETRIES: u32 = 3;
const DEAD_MAX_RETRIES: u32 = 100;
const RETRY_DELAY_MS: u64 = 1_000;

/// What the next call to the gate object does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
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
struct World {
    now: Cell<u64>,
    /// Deadlines of the sleeps pending at the last poll.
    timers: RefCell<Vec<u64>>,
    // The gate object's storage.
    gate: RefCell<Option<GateState>>,
    legacy: RefCell<Option<Vec<String>>>,
    rows: RefCell<BTreeMap<u64, NewDeadLetter>>,
    next_row: Cell<u64>,
    failing: RefCell<BTreeMap<String, (Failing, u64)>>,
    /// Faults: every storage call, every call to the gate, every queue send.
    store_faults: RefCell<Vec<bool>>,
    gate_faults: RefCell<Vec<Option<Fault>>>,
    queue_faults: RefCell<Vec<bool>>,
    /// The queues' messages, and what was deleted by them (past the dead-letter queue's retries).
    items: RefCell<Vec<Item>>,
    deleted: RefCell<Vec<String>>,
    /// Every send to a queue: (binding, text, delay).
    sent: RefCell<Vec<(String, String, u32)>>,
    /// The receiver: forwards started (idempotency key, attempt, in flight at its start), answers by forward.
    started: RefCell<Vec<(String, u32, usize)>>,
    in_flight: Cell<usize>,
    answers: RefCell<Vec<Option<bool>>>,
    poison: RefCell<BTreeSet<String>>,
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
    hold_sends: Cell<bool>,
    hold_saves: Cell<bool>,
    /// Calls the gate object got, by operation.
    gate_calls: RefCell<BTreeMap<&'static str, u64>>,
    logs: RefCell<Vec<String>>,
}

type Shared = Rc<World>;

/// One delivery of a round: (round, its place in the round).
type Delivery = (u64, usize);

fn pop<T: Copy + Default>(faults: &RefCell<Vec<T>>) -> T {
    faults.borrow_mut().pop().unwrap_or_default()
}

fn key_of(text: &str) -> Option<String> {
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
struct FakeGateStore(Shared);

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
struct FakeQueue(Shared);

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
struct FakeClock(Shared);

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

fn object(world: &Shared) -> Rc<Object> {
    Rc::new(GateObject::new(FakeGateStore(world.clone()), FakeQueue(world.clone()), FakeClock(world.clone())))
}

/// The calls to the gate object. A crash replaces it: the calls the old one
/// held fail, as a Durable Object's do when it restarts.
struct FakeGates {
    world: Shared,
    topics: Rc<Topics>,
    object: RefCell<Rc<Object>>,
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

impl<F: Future<Output = Result<GateAnswer, lull_edge::http::ApiError>>> Future for Held<'_, F> {
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
        Poll::Ready(Outcome { ok, detail: if ok { "200" } else { "503" }.into() })
    }
}

struct Receiver(Shared);

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
struct Parts {
    gates: FakeGates,
    queue: FakeQueue,
    receiver: Receiver,
    clock: FakeClock,
    topics: Rc<Topics>,
}

type TestConsumer<'a> = Consumer<'a, &'a FakeGates, &'a FakeQueue, &'a Receiver, &'a FakeClock>;

impl Parts {
    fn new(world: &Shared) -> Parts {
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

    fn consumer(&self) -> TestConsumer<'_> {
        let (gates, queue, outbound, clock) = (&self.gates, &self.queue, &self.receiver, &self.clock);
        Consumer { gates, queue, outbound, clock, topics: &self.topics, dead_letters: DEAD }
    }

    /// Call the gate object as an operator would (no injected call faults).
    fn admin(&self, op: GateOp) -> Result<GateAnswer, lull_edge::http::ApiError> {
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
enum Kind {
    Good,
    /// The receiver always refuses it: it ends as a dead letter.
    Poison,
    Garbage,
}

fn text(kind: Kind, i: usize) -> String {
    match kind {
        Kind::Garbage => format!("not json {i}"),
        _ => format!(
            r#"{{"topic":"q","idempotency_key":"q/k{i}/x.1","attempt":1,"body":{{"i":{i},"pad":"{}"}}}}"#,
            "x".repeat(i * 7)
        ),
    }
}

fn poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

#[derive(Debug, Clone)]
struct Case {
    kinds: Vec<Kind>,
    store_faults: Vec<bool>,
    gate_faults: Vec<Option<Fault>>,
    queue_faults: Vec<bool>,
    /// How forwards are answered: (which of those waiting, 2xx, let time pass first).
    answers: Vec<(usize, bool, bool)>,
    /// The operator discards the oldest dead letter when the store is full, in this share of rounds.
    discard_every: u32,
}

fn case() -> impl Strategy<Value = Case> {
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

fn check(case: &Case) {
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// Gate, storage and queue failures, gate restarts, a full dead-letter
    /// store: nothing acked unearned, nothing deleted, the bound kept, attempts counted.
    #[test]
    fn faults_on_the_queue_side_lose_nothing_and_keep_the_bound(case in case()) {
        check(&case);
    }
}

/// One round of `messages` handed to the consumer together; every forward is
/// answered 2xx in the order they start.
fn all_at_once(parts: &Parts, messages: &[String], dead: bool) -> Vec<Settle> {
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

#[test]
fn forty_waiters_are_woken_in_order_with_two_gate_requests_per_forward() {
    // Catches: polling instead of holding the call open (more acquires than
    // messages), a release that does not hand its lease on (requeues), or a
    // queue served out of order.
    let world: Shared = Rc::default();
    world.now.set(0);
    let parts = Parts::new(&world);
    let messages: Vec<String> = (0..40).map(|i| text(Kind::Good, i)).collect();
    let settled = all_at_once(&parts, &messages, false);
    assert!(settled.iter().all(|s| *s == Settle::Ack));
    assert!(world.sent.borrow().is_empty(), "no message went back on the queue");
    let calls = world.gate_calls.borrow().clone();
    assert_eq!((calls.get("acquire"), calls.get("release")), (Some(&40), Some(&40)), "{calls:?}");
    let total: u64 = calls.values().sum();
    assert!(total <= 2 * 40, "{total} gate requests for 40 forwards");
    let order: Vec<String> = world.started.borrow().iter().map(|(k, _, _)| k.clone()).collect();
    let expected: Vec<String> = messages.iter().map(|m| key_of(m).unwrap()).collect();
    assert_eq!(order, expected, "first come, first served");
    assert!(world.started.borrow().iter().all(|(_, _, n)| *n <= LIMIT as usize));
    // The gate's own count agrees (the status shows it).
    let Ok(GateAnswer::Status(status)) = parts.admin(GateOp::Status) else { panic!() };
    assert_eq!(status.requests.get("acquire"), Some(&40));
    assert_eq!(status.requests_total, total);
}

#[test]
fn a_waiter_past_its_budget_is_requeued_with_its_attempt_not_retried() {
    // Catches: a wait that spends a queue retry, or a copy that restarts or inflates the attempt count.
    let world: Shared = Rc::default();
    world.now.set(0);
    let parts = Parts::new(&world);
    let consumer = parts.consumer();
    let texts: Vec<String> = (0..3).map(|i| text(Kind::Good, i)).collect();
    let mut first = Box::pin(consumer.handle("a", &texts[0], 1, false));
    let mut second = Box::pin(consumer.handle("b", &texts[1], 1, false));
    assert!(poll(first.as_mut()).is_pending() && poll(second.as_mut()).is_pending());
    // Its third delivery (attempt 3): no room within the budget.
    let mut third = Box::pin(consumer.handle("c", &texts[2], 3, false));
    assert!(poll(third.as_mut()).is_pending(), "held open by the gate");
    world.now.set(GATE_WAIT_BUDGET_MS);
    assert_eq!(poll(third.as_mut()), Poll::Ready(Settle::Ack), "requeued, then acked");
    let sent = world.sent.borrow().clone();
    assert_eq!(sent.len(), 1);
    let copy: serde_json::Value = serde_json::from_str(&sent[0].1).unwrap();
    assert_eq!((copy["attempt"].as_u64(), copy["waits"].as_u64()), (Some(3), Some(1)), "the attempt it had reached");
    assert_eq!(sent[0].0, DELIVERY);
    let counters = world.gate.borrow().clone().unwrap().counters;
    assert_eq!((counters.get("requeued"), counters.get("retried")), (Some(&1), None), "waiting used up no retry");
    assert_eq!(world.gate_calls.borrow().get("acquire"), Some(&3), "one request held open, no polling");
}

#[test]
fn a_gate_that_errs_costs_no_retry() {
    // Catches: the old `retry()` branch on any gate error.
    for fault in [Fault::Fail, Fault::LoseAnswer, Fault::Crash] {
        let world: Shared = Rc::default();
        let parts = Parts::new(&world);
        // (A lost answer to a granted acquire: the lease expires unreleased; the message waits.)
        world.gate_faults.borrow_mut().push(Some(fault));
        let settle = all_at_once(&parts, &[text(Kind::Good, 1)], false);
        match fault {
            Fault::Crash => assert_eq!(settle, [Settle::Ack], "a fresh object serves it"),
            _ => {
                assert_eq!(settle, [Settle::Ack], "{fault:?}: requeued and acked");
                assert_eq!(world.sent.borrow().len(), 1, "{fault:?}: a copy waits on the queue");
                assert_eq!(world.sent.borrow()[0].2, 1, "{fault:?}: after 1 s");
            }
        }
    }
    // And when the copy cannot be sent either: retried, as the last resort.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    world.gate_faults.borrow_mut().push(Some(Fault::Fail));
    world.queue_faults.borrow_mut().push(true);
    assert_eq!(all_at_once(&parts, &[text(Kind::Good, 1)], false), [Settle::Retry { delay_secs: Some(1) }]);
}

#[test]
fn at_the_bound_a_dead_letter_waits_on_its_queue_and_is_kept_once_there_is_room() {
    // Catches: a dead letter written past the bound, a refused one acked
    // without a copy (or retried until the queue deletes it), and rows never freed.
    let world: Shared = Rc::default();
    world.now.set(5_000);
    let parts = Parts::new(&world);
    let letters: Vec<String> = (0..BOUND + 1).map(|i| text(Kind::Poison, i)).collect();
    let settled = all_at_once(&parts, &letters[..BOUND], true);
    assert!(settled.iter().all(|s| *s == Settle::Ack));
    assert_eq!(world.rows.borrow().len(), BOUND);
    assert_eq!(parts.admin(GateOp::Room), Ok(GateAnswer::Room { full: true }), "full: the router refuses events");
    let over = &letters[BOUND];
    assert_eq!(all_at_once(&parts, std::slice::from_ref(over), true), [Settle::Ack], "acked: a copy waits");
    assert_eq!(world.rows.borrow().len(), BOUND, "nothing written past the bound");
    let (binding, copy, delay) = world.sent.borrow()[0].clone();
    assert_eq!((binding.as_str(), delay), (DEAD, 1), "on the dead-letter queue, 1 s");
    // Still full at its next delivery: it waits longer.
    assert_eq!(all_at_once(&parts, std::slice::from_ref(&copy), true), [Settle::Ack]);
    let (_, copy, delay) = world.sent.borrow()[1].clone();
    assert_eq!(delay, 2, "doubling");
    let Ok(GateAnswer::Status(status)) = parts.admin(GateOp::Status) else { panic!() };
    assert_eq!((status.counters.get("requeued"), status.dead_letters_full), (Some(&2), true));
    // Discard one: the waiting letter is kept at its next delivery.
    assert_eq!(parts.admin(GateOp::Discard { id: 1 }), Ok(GateAnswer::Discarded { discarded: 1 }));
    assert!(parts.admin(GateOp::Discard { id: 1 }).is_err_and(|e| e.code() == "not_found"), "404 for an unknown id");
    assert_eq!(parts.admin(GateOp::Room), Ok(GateAnswer::Room { full: false }));
    assert_eq!(all_at_once(&parts, std::slice::from_ref(&copy), true), [Settle::Ack]);
    let kept = world.rows.borrow().values().map(|r| r.idempotency_key.clone()).collect::<Vec<_>>();
    assert!(kept.contains(&key_of(over).unwrap()));
    assert_eq!(world.rows.borrow().values().last().unwrap().message, copy, "the text as it came, byte for byte");
}

#[test]
fn a_dead_letter_says_when_it_first_failed_its_attempts_and_last_outcome() {
    // Catches: a row without the failing forward's history.
    let world: Shared = Rc::default();
    world.now.set(10_000);
    let parts = Parts::new(&world);
    world.poison.borrow_mut().insert("q/k0/x.1".into());
    let message = text(Kind::Poison, 0);
    let consumer = parts.consumer();
    for attempts in 1..=4 {
        let mut h = Box::pin(consumer.handle("m", &message, attempts, false));
        assert!(poll(h.as_mut()).is_pending());
        world.answers.borrow_mut()[attempts as usize - 1] = Some(false);
        // The fourth failure (forward_max_attempts) sends it to the dead-letter queue.
        let settle = if attempts < 4 { Settle::Retry { delay_secs: None } } else { Settle::Ack };
        assert_eq!(poll(h.as_mut()), Poll::Ready(settle));
        world.now.set(world.now.get() + 1_000);
    }
    let (binding, letter, _) = world.sent.borrow()[0].clone();
    assert_eq!(binding, DEAD);
    assert_eq!(all_at_once(&parts, std::slice::from_ref(&letter), true), [Settle::Ack]);
    let row = world.rows.borrow().values().next().unwrap().clone();
    assert_eq!((row.attempts, row.first_failed_at, row.outcome.as_str()), (4, 10_000, "503"));
    assert!(world.failing.borrow().is_empty(), "the failing record moved into the row");
}

#[test]
fn a_replay_goes_back_to_the_topics_queue_and_the_row_goes_only_once_sent() {
    // Catches: a row deleted before its replay is safely on the queue, or a replay under another key.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    let letters: Vec<String> = (0..3).map(|i| text(Kind::Poison, i)).collect();
    all_at_once(&parts, &letters, true);
    world.queue_faults.borrow_mut().push(true);
    let refused = parts.admin(GateOp::Replay { id: 2 });
    assert!(refused.is_err_and(|e| e.code() == "unavailable"));
    assert_eq!(world.rows.borrow().len(), 3, "kept: the send failed");
    assert_eq!(parts.admin(GateOp::Replay { id: 2 }), Ok(GateAnswer::Replayed { replayed: 1, remaining: 2 }));
    assert!(parts.admin(GateOp::Replay { id: 2 }).is_err_and(|e| e.code() == "not_found"));
    let (binding, replayed, delay) = world.sent.borrow()[0].clone();
    assert_eq!((binding.as_str(), delay), (DELIVERY, 0));
    let replayed: serde_json::Value = serde_json::from_str(&replayed).unwrap();
    let original: serde_json::Value = serde_json::from_str(&letters[1]).unwrap();
    assert_eq!(replayed["idempotency_key"], original["idempotency_key"]);
    assert_eq!(replayed["body"], original["body"]);
    assert_eq!(replayed["attempt"], 2, "the next attempt after those made");
    assert_eq!(parts.admin(GateOp::ReplayAll), Ok(GateAnswer::Replayed { replayed: 2, remaining: 0 }));
    let keys: Vec<String> = world.sent.borrow().iter().map(|(_, t, _)| key_of(t).unwrap()).collect();
    assert_eq!(keys, ["q/k1/x.1", "q/k0/x.1", "q/k2/x.1"], "each once, the rest in order");
}

#[test]
fn a_page_lists_bodies_intact_in_order_with_what_comes_next() {
    // Catches: bodies rewritten (numbers parsed: a large integer rounded, a
    // long decimal cut, 1e400 turned to null; escapes), pages past their limit, a missing next_after.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    let body = r#"{"n":123456789012345678901234,"d":0.10000000000000000000000000000000000001,"e":1e400,"s":"é\u0000"}"#;
    let big = format!(r#"{{"topic":"q","idempotency_key":"q/big/x.1","attempt":1,"body":{body}}}"#);
    all_at_once(&parts, &[big, text(Kind::Poison, 1), text(Kind::Poison, 2)], true);
    let Ok(GateAnswer::Page(text)) = parts.admin(GateOp::DeadLetters { after: None, limit: 2 }) else { panic!() };
    assert!(text.contains(&format!(r#""body":{body}"#)), "the body byte for byte: {text}");
    /// A page read without parsing its bodies (a Value refuses 1e400).
    #[derive(serde::Deserialize)]
    struct Page<'a> {
        #[serde(borrow)]
        dead_letters: Vec<&'a serde_json::value::RawValue>,
        count: u64,
        next_after: Option<u64>,
    }
    let page: Page = serde_json::from_str(&text).unwrap();
    assert_eq!((page.count, page.next_after, page.dead_letters.len()), (3, Some(2), 2));
    let Ok(GateAnswer::Page(rest)) = parts.admin(GateOp::DeadLetters { after: Some(2), limit: 2 }) else { panic!() };
    let rest: serde_json::Value = serde_json::from_str(&rest).unwrap();
    assert_eq!((rest["dead_letters"].as_array().unwrap().len(), rest["next_after"].is_null()), (1, true));
}

#[test]
fn the_first_releases_list_migrates_into_rows_once_even_when_interrupted() {
    // Catches: a migration that loses the list, or keeps a letter twice after a failure between its two steps.
    let world: Shared = Rc::default();
    let old: Vec<String> = (0..4).map(|i| text(Kind::Poison, i)).collect();
    *world.legacy.borrow_mut() = Some(old.clone());
    let parts = Parts::new(&world);
    // prepare, legacy read, keep_dead succeed; forgetting the list fails.
    *world.store_faults.borrow_mut() = vec![true, false, false, false];
    assert!(parts.admin(GateOp::Room).is_err_and(|e| e.code() == "unavailable"));
    assert_eq!(world.rows.borrow().len(), 4);
    assert!(world.legacy.borrow().is_some());
    assert_eq!(parts.admin(GateOp::Room), Ok(GateAnswer::Room { full: true }), "4 rows past a bound of 3: full");
    assert_eq!(world.rows.borrow().len(), 4, "not kept twice");
    assert!(world.legacy.borrow().is_none(), "the list went");
    let texts: Vec<String> = world.rows.borrow().values().map(|r| r.message.clone()).collect();
    assert_eq!(texts, old, "byte for byte, in order");
}

#[test]
fn a_lost_write_of_the_gate_answers_503_and_grants_nothing_storage_does_not_hold() {
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    // load succeeds, the save fails.
    *world.store_faults.borrow_mut() = vec![true, false];
    let refused = parts.admin(GateOp::Acquire { wait_ms: 0 });
    let Err(e) = refused else { panic!("{refused:?}") };
    assert_eq!((e.code(), e.retry_after_secs()), ("unavailable", Some(1)));
    assert!(world.gate.borrow().is_none(), "nothing stored");
    for _ in 0..LIMIT {
        let granted = parts.admin(GateOp::Acquire { wait_ms: 0 });
        assert!(
            matches!(granted, Ok(GateAnswer::Grant(Grant::Go { .. }))),
            "memory was dropped: the room is all there"
        );
    }
    assert_eq!(world.gate.borrow().as_ref().unwrap().gate.in_flight(0), LIMIT as usize, "both leases stored");
    let full = parts.admin(GateOp::Acquire { wait_ms: 0 });
    assert_eq!(full, Ok(GateAnswer::Grant(Grant::Wait { retry_at: 1_000 })), "no wait asked: told to come back soon");
    assert_eq!(parts.admin(GateOp::Count { counter: Counter::Acked }), Ok(GateAnswer::Counted { ok: true }));
}

#[test]
fn the_status_shows_in_flight_bound_counters_requests_and_the_oldest_dead_letters() {
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    all_at_once(&parts, &(0..2).map(|i| text(Kind::Poison, i)).collect::<Vec<_>>(), true);
    let Ok(GateAnswer::Grant(Grant::Go { lease, .. })) = parts.admin(GateOp::Acquire { wait_ms: 0 }) else { panic!() };
    parts.admin(GateOp::Acquire { wait_ms: 0 }).unwrap();
    assert_eq!(parts.admin(GateOp::Release { lease, outcome: None }), Ok(GateAnswer::Released { released: true }));
    assert_eq!(
        parts.admin(GateOp::Release { lease, outcome: None }),
        Ok(GateAnswer::Released { released: false }),
        "once"
    );
    let Ok(GateAnswer::Status(status)) = parts.admin(GateOp::Status) else { panic!() };
    assert_eq!(status.topic, "q");
    assert_eq!(status.in_flight, 1);
    assert_eq!(status.forward_concurrency, LIMIT);
    assert_eq!(status.dead_letter_count, 2);
    assert_eq!(status.max_queue_dead_letters, BOUND as u64);
    assert_eq!(status.requests.get("dead_letter"), Some(&2));
    assert_eq!(status.requests.get("acquire"), Some(&2));
    let oldest = StatusLetter { id: 1, idempotency_key: "q/k0/x.1".into(), attempts: 1 };
    assert_eq!(status.dead_letters.first(), Some(&oldest));
    let hook = Topics::parse(r#"{"h": {"target": "https://a", "wait_ms": 1}}"#).unwrap();
    let object = object(&world);
    let not_queue = poll(Box::pin(object.call("h", hook.get("h"), GateOp::Status)).as_mut());
    assert!(matches!(not_queue, Poll::Ready(Err(e)) if e.code() == "not_found"));
    let unknown = poll(Box::pin(object.call("x", None, GateOp::Acquire { wait_ms: 0 })).as_mut());
    assert!(matches!(unknown, Poll::Ready(Err(e)) if e.code() == "unknown_topic"));
}

#[test]
fn a_release_retried_after_its_answer_was_lost_counts_once() {
    // Catches: a retried release counting its outcome (acked or retried) and recording it again.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    // The acquire goes through; the release runs but its answer is lost; the retry finds the lease gone.
    *world.gate_faults.borrow_mut() = vec![Some(Fault::LoseAnswer), None];
    let consumer = parts.consumer();
    let message = text(Kind::Poison, 0);
    let mut handle = Box::pin(consumer.handle("m", &message, 1, false));
    assert!(poll(handle.as_mut()).is_pending());
    world.answers.borrow_mut()[0] = Some(false);
    assert_eq!(poll(handle.as_mut()), Poll::Ready(Settle::Retry { delay_secs: None }));
    assert_eq!(world.gate_calls.borrow().get("release"), Some(&2), "released, then asked again");
    let counters = world.gate.borrow().clone().unwrap().counters;
    assert_eq!(counters.get("retried"), Some(&1), "{counters:?}");
}

#[test]
fn a_dead_letter_being_replayed_can_be_neither_discarded_nor_replayed_again() {
    // Catches: a discard answered 200 while the message is still sent, or a
    // second replay of the same row answered 200 {"replayed": 0}.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    all_at_once(&parts, &[text(Kind::Poison, 0)], true);
    world.hold_sends.set(true);
    let object = parts.gates.object.borrow().clone();
    let mut replay = Box::pin(object.call("q", parts.topics.get("q"), GateOp::Replay { id: 1 }));
    assert!(poll(replay.as_mut()).is_pending(), "its send is under way");
    for op in [GateOp::Discard { id: 1 }, GateOp::Replay { id: 1 }] {
        let refused = parts.admin(op.clone());
        assert!(
            refused.as_ref().is_err_and(|e| (e.status(), e.code()) == (409, "replay_in_progress")),
            "{op:?}: {refused:?}"
        );
    }
    world.hold_sends.set(false);
    assert_eq!(poll(replay.as_mut()), Poll::Ready(Ok(GateAnswer::Replayed { replayed: 1, remaining: 0 })));
    assert_eq!(world.sent.borrow().len(), 1, "sent once");
    assert!(world.rows.borrow().is_empty());
    assert!(parts.admin(GateOp::Discard { id: 1 }).is_err_and(|e| e.code() == "not_found"), "then gone");
}

#[test]
fn a_dead_letter_delivered_again_after_its_row_was_written_is_kept_once_even_at_the_bound() {
    // Catches: a second row for one idempotency key (the store without its
    // unique index), or a redelivered letter refused 429 at the bound and
    // left waiting on the dead-letter queue although it is kept.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    let letters: Vec<String> = (0..BOUND).map(|i| text(Kind::Poison, i)).collect();
    all_at_once(&parts, &letters[..BOUND - 1], true);
    // The last one's row is written, its answer lost: it waits on the dead-letter queue.
    world.gate_faults.borrow_mut().push(Some(Fault::LoseAnswer));
    assert_eq!(all_at_once(&parts, &letters[BOUND - 1..], true), [Settle::Ack]);
    assert_eq!(world.rows.borrow().len(), BOUND, "written, and now at the bound");
    let (binding, copy, _) = world.sent.borrow()[0].clone();
    assert_eq!(binding, DEAD);
    // Delivered again: answered with its row, not a second one, and not refused as full.
    assert_eq!(all_at_once(&parts, std::slice::from_ref(&copy), true), [Settle::Ack]);
    assert_eq!(world.sent.borrow().len(), 1, "not sent to wait again");
    assert_eq!(world.rows.borrow().len(), BOUND);
    let keys: BTreeSet<String> = world.rows.borrow().values().map(|r| r.idempotency_key.clone()).collect();
    assert_eq!(keys.len(), BOUND, "one row per key");
}

/// A call to the gate object as the harness drives it (polled by hand).
type Call = Pin<Box<dyn Future<Output = Result<GateAnswer, lull_edge::http::ApiError>>>>;

fn call(parts: &Parts, op: GateOp) -> Call {
    let object = parts.gates.object.borrow().clone();
    let topics = parts.topics.clone();
    Box::pin(async move { object.call("q", topics.get("q"), op).await })
}

/// Both leases held (the topic's bound), a first waiter `w` and a second `x`
/// queued, and a release of the first lease taken out `w` and storing its
/// lease (the store held): `(w, x, release, the other lease)`.
fn release_storing_a_waiters_lease(parts: &Parts) -> (Call, Call, Call, u64) {
    let world = &parts.gates.world;
    let lease = |answer| match answer {
        Ok(GateAnswer::Grant(Grant::Go { lease, .. })) => lease,
        other => panic!("{other:?}"),
    };
    let (a, b) =
        (lease(parts.admin(GateOp::Acquire { wait_ms: 0 })), lease(parts.admin(GateOp::Acquire { wait_ms: 0 })));
    let mut w = call(parts, GateOp::Acquire { wait_ms: GATE_WAIT_BUDGET_MS });
    let mut x = call(parts, GateOp::Acquire { wait_ms: 10 * GATE_WAIT_BUDGET_MS });
    assert!(poll(w.as_mut()).is_pending() && poll(x.as_mut()).is_pending(), "both wait");
    world.hold_saves.set(true);
    let mut release = call(parts, GateOp::Release { lease: a, outcome: None });
    assert!(poll(release.as_mut()).is_pending(), "storing w's lease");
    (w, x, release, b)
}

fn stored_in_flight(world: &World) -> usize {
    world.gate.borrow().as_ref().unwrap().gate.in_flight(world.now.get())
}

#[test]
fn a_waiter_whose_time_runs_out_while_its_lease_is_stored_still_gets_it() {
    // Catches: a waiter that gives up (or rejoins with a new slot) when its
    // timer fires after a release took it out of the queue but before the
    // release's save ended: the lease then went to a slot nobody reads, held
    // until it expired (delivery_timeout_ms + 5 s of a stalled topic).
    let world: Shared = Rc::default();
    world.now.set(1_000);
    let parts = Parts::new(&world);
    let (mut w, mut x, mut release, b) = release_storing_a_waiters_lease(&parts);
    world.now.set(1_000 + GATE_WAIT_BUDGET_MS);
    assert!(poll(w.as_mut()).is_pending(), "its time is out, but a lease is being stored for it");
    world.hold_saves.set(false);
    assert_eq!(poll(release.as_mut()), Poll::Ready(Ok(GateAnswer::Released { released: true })));
    let Poll::Ready(Ok(GateAnswer::Grant(Grant::Go { lease, .. }))) = poll(w.as_mut()) else {
        panic!("w got no lease")
    };
    assert_eq!(stored_in_flight(&world), 2, "b and w's lease, nothing else");
    // Its release hands the room on to x at once.
    assert_eq!(parts.admin(GateOp::Release { lease, outcome: None }), Ok(GateAnswer::Released { released: true }));
    assert!(matches!(poll(x.as_mut()), Poll::Ready(Ok(GateAnswer::Grant(Grant::Go { .. })))));
    assert_eq!(parts.admin(GateOp::Release { lease: b, outcome: None }), Ok(GateAnswer::Released { released: true }));
}

#[test]
fn a_lease_stored_for_a_waiter_that_left_goes_to_the_next_one() {
    // Catches: a lease handed to a slot nobody holds any more (its request
    // dropped while the release stored the lease), and a lease handed but
    // never taken released only in memory, the room not handed on.
    for taken in [false, true] {
        let world: Shared = Rc::default();
        world.now.set(1_000);
        let parts = Parts::new(&world);
        let (w, mut x, mut release, _) = release_storing_a_waiters_lease(&parts);
        if !taken {
            drop(w); // gone while its lease is stored
            world.hold_saves.set(false);
            assert_eq!(poll(release.as_mut()), Poll::Ready(Ok(GateAnswer::Released { released: true })));
        } else {
            world.hold_saves.set(false);
            assert_eq!(poll(release.as_mut()), Poll::Ready(Ok(GateAnswer::Released { released: true })));
            assert!(poll(x.as_mut()).is_pending(), "x looked again: no room");
            drop(w); // gone with its lease handed, not taken
        }
        let answer = poll(x.as_mut());
        assert!(matches!(answer, Poll::Ready(Ok(GateAnswer::Grant(Grant::Go { .. })))), "taken {taken}: {answer:?}");
        assert_eq!(stored_in_flight(&world), 2, "taken {taken}: the lease changed hands, none orphaned");
    }
}

/// One delivery of `text` (the queue's `attempts`th), driven until it settles;
/// its forward, if any, is answered `ok`.
fn deliver(parts: &Parts, text: &str, attempts: u32, ok: bool) -> Settle {
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

#[test]
fn failed_forwards_interleaved_with_waits_still_reach_the_dead_letter_queue() {
    // Catches: a copy sent back to wait that restarts the count of failed
    // forwards (the queue's attempts restart with each copy): failing, then
    // waiting, then failing… it never reached max_retries and went round forever.
    let world: Shared = Rc::default();
    world.now.set(1_000);
    let parts = Parts::new(&world);
    let (mut text, mut attempts) = (text(Kind::Poison, 0), 1);
    for turn in 0..40 {
        if turn % 2 == 1 {
            // The topic is busy for this delivery: it waits, as a new copy.
            let hold = |_| match parts.admin(GateOp::Acquire { wait_ms: 0 }) {
                Ok(GateAnswer::Grant(Grant::Go { lease, .. })) => lease,
                other => panic!("{other:?}"),
            };
            let leases: Vec<u64> = (0..LIMIT).map(hold).collect();
            assert_eq!(deliver(&parts, &text, attempts, false), Settle::Ack, "requeued");
            for lease in leases {
                parts.admin(GateOp::Release { lease, outcome: None }).unwrap();
            }
            let (binding, copy, _) = world.sent.borrow().last().cloned().unwrap();
            assert_eq!(binding, DELIVERY);
            (text, attempts) = (copy, 1);
            continue;
        }
        match deliver(&parts, &text, attempts, false) {
            Settle::Retry { delay_secs: None } => {
                attempts += 1;
                assert!(attempts <= MAX_RETRIES + 1, "the queue would move it itself");
            }
            Settle::Ack => break,
            other => panic!("{other:?}"),
        }
    }
    let (binding, letter, delay) = world.sent.borrow().last().cloned().unwrap();
    assert_eq!((binding.as_str(), delay), (DEAD, 0), "sent to the dead-letter queue by the consumer");
    let letter: serde_json::Value = serde_json::from_str(&letter).unwrap();
    assert_eq!(
        (letter["failed"].as_u64(), letter["attempt"].as_u64(), letter["outcome"].as_str()),
        (Some(4), Some(4), Some("503"))
    );
    let attempts: Vec<u32> = world.started.borrow().iter().map(|(_, a, _)| *a).collect();
    assert_eq!(attempts, [1, 2, 3, 4], "forward_max_attempts (4) forwards, no more");
    // Kept from there with its last forward's attempt and outcome.
    let sent = world.sent.borrow().last().cloned().unwrap().1;
    assert_eq!(all_at_once(&parts, &[sent], true), [Settle::Ack]);
    let row = world.rows.borrow().values().next().cloned().unwrap();
    assert_eq!((row.attempts, row.outcome.as_str()), (4, "503"));
}

#[test]
fn a_gate_that_never_answers_dead_letters_a_message_after_its_waits() {
    // Catches: a permanently failing gate requeueing a message forever.
    let world: Shared = Rc::default();
    world.now.set(1_000);
    let parts = Parts::new(&world);
    // Every call to the gate fails (an acquire and a count per delivery).
    *world.gate_faults.borrow_mut() = vec![Some(Fault::Fail); 2 * MAX_WAITS as usize + 10];
    let mut text = text(Kind::Good, 0);
    for waits in 0..=MAX_WAITS {
        assert_eq!(deliver(&parts, &text, 1, true), Settle::Ack);
        let (binding, copy, _) = world.sent.borrow().last().cloned().unwrap();
        if waits < MAX_WAITS {
            assert_eq!(binding, DELIVERY, "wait {waits}");
            text = copy;
        } else {
            assert_eq!(binding, DEAD, "past {MAX_WAITS} waits: a dead letter");
            let letter: serde_json::Value = serde_json::from_str(&copy).unwrap();
            let why = letter["outcome"].as_str().unwrap();
            assert!(why.starts_with(&format!("waited {MAX_WAITS} times")) && why.contains("injected"), "{why}");
            assert_eq!((letter["waits"].as_u64(), letter["attempt"].as_u64()), (None, Some(0)), "no forward made");
        }
    }
    assert_eq!(world.sent.borrow().len(), MAX_WAITS as usize + 1);
    assert!(world.started.borrow().is_empty());
}
