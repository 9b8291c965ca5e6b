//! The queue side's native fault harness: the consumer's whole per-message
//! logic ([`Consumer::handle`]) and the topic gate object's ([`GateObject`])
//! driven together on virtual time, with fakes for the gate's storage, the
//! call to the gate object, the queue and the forward that fail — or lose
//! the gate object's memory ("crash") — at every call.
//!
//! Random batches of messages (good ones, dead letters, messages of no queue
//! topic, garbage), handled at once, with forwards answered in random order
//! and outcome. Judged from the system, not from counters the code keeps:
//! the receiver's log (forwards in flight at each start) and what the fake
//! queue and the gate's storage hold. Every message settles once; one is
//! acked only when the receiver answered it 2xx, its copy is on the queue
//! again, or the gate's storage keeps it as a dead letter; the topic's
//! bound on forwards in flight holds at the receiver.
#![cfg(not(target_arch = "wasm32"))]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use lull_edge::ports::{
    Clock, GateAnswer, GateOp, GateState, GateStore, Gates, Outbound, Outcome, Outgoing, QueueSend, StoreError,
};
use lull_edge::queue::consume::{Consumer, GATE_WAIT_BUDGET_MS, Settle};
use lull_edge::queue::gate::FULL_POLL_MS;
use lull_edge::queue::gate_object::{GateObject, MAX_DEAD_LETTERS};
use lull_edge::topic::Topics;
use proptest::prelude::*;

const LIMIT: u32 = 2;
const TOPICS: &str = r#"{"q": {"target": "https://receiver.test/q", "wait_ms": 1, "delivery": "queue",
    "forward_concurrency": 2, "delivery_timeout_ms": 300000}}"#;

/// What the next call to one port does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// The call fails (nothing happens at the other end).
    Fail,
    /// The gate object runs the call, but its answer is lost on the way back.
    LoseAnswer,
    /// The gate object loses its memory before the call (storage is kept).
    Crash,
}

/// Everything outside the consumer: the gate's storage, the queue, the receiver, the clock.
#[derive(Default)]
struct World {
    now: Cell<u64>,
    gate: RefCell<Option<GateState>>,
    dead: RefCell<Vec<String>>,
    /// Faults for the gate's storage writes, the calls to the gate, queue sends.
    store_faults: RefCell<Vec<bool>>,
    gate_faults: RefCell<Vec<Option<Fault>>>,
    queue_faults: RefCell<Vec<bool>>,
    /// What was sent to the queue again: (binding, text, delay).
    requeued: RefCell<Vec<(String, String, u32)>>,
    /// The receiver: forwards started (idempotency key, in flight at its start), answers by forward.
    started: RefCell<Vec<(String, usize)>>,
    in_flight: Cell<usize>,
    answers: RefCell<Vec<Option<bool>>>,
    /// Idempotency keys the receiver answered 2xx.
    succeeded: RefCell<BTreeSet<String>>,
    logs: RefCell<Vec<String>>,
}

type Shared = Rc<World>;

fn pop<T: Copy + Default>(faults: &RefCell<Vec<T>>) -> T {
    faults.borrow_mut().pop().unwrap_or_default()
}

struct FakeGateStore(Shared);

impl GateStore for FakeGateStore {
    async fn load(&self) -> Result<Option<GateState>, StoreError> {
        Ok(self.0.gate.borrow().clone())
    }
    async fn save(&self, state: &GateState) -> Result<(), StoreError> {
        if pop(&self.0.store_faults) {
            return Err(StoreError("injected write failure".into()));
        }
        *self.0.gate.borrow_mut() = Some(state.clone());
        Ok(())
    }
    async fn dead_letters(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.0.dead.borrow().clone())
    }
    async fn save_dead_letters(&self, dead: &[String]) -> Result<(), StoreError> {
        if pop(&self.0.store_faults) {
            return Err(StoreError("injected write failure".into()));
        }
        *self.0.dead.borrow_mut() = dead.to_vec();
        Ok(())
    }
}

/// The calls to the gate object, which it serves at once (a Durable Object
/// runs one call at a time; none of its calls await anything but storage).
struct FakeGates {
    world: Shared,
    topics: Rc<Topics>,
    object: RefCell<Rc<GateObject<FakeGateStore>>>,
}

impl Gates for &FakeGates {
    async fn ask(&self, topic: &str, op: GateOp) -> Result<GateAnswer, String> {
        let fault = self.world.gate_faults.borrow_mut().pop().flatten();
        match fault {
            Some(Fault::Fail) => return Err("gate: injected failure".into()),
            Some(Fault::Crash) => {
                *self.object.borrow_mut() = Rc::new(GateObject::new(FakeGateStore(self.world.clone())))
            }
            _ => {}
        }
        let object = self.object.borrow().clone();
        let answer = object.call(topic, self.topics.get(topic), op, self.world.now.get()).await;
        if fault == Some(Fault::LoseAnswer) {
            return Err("gate: the answer was lost".into());
        }
        answer.map_err(|e| format!("gate: {}", e.code()))
    }
}

struct FakeQueue(Shared);

impl QueueSend for &FakeQueue {
    async fn send(&self, binding: &str, messages: &[String], delay_secs: u32) -> Result<(), String> {
        if pop(&self.0.queue_faults) {
            return Err("queue: injected failure".into());
        }
        for m in messages {
            self.0.requeued.borrow_mut().push((binding.into(), m.clone(), delay_secs));
        }
        Ok(())
    }
}

/// A forward in flight: ready once the harness answers it.
struct Forward {
    world: Shared,
    id: usize,
    key: String,
}

impl Future for Forward {
    type Output = Outcome;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Outcome> {
        let Some(ok) = self.world.answers.borrow()[self.id] else { return Poll::Pending };
        self.world.in_flight.set(self.world.in_flight.get() - 1);
        if ok {
            self.world.succeeded.borrow_mut().insert(self.key.clone());
        }
        Poll::Ready(Outcome { ok, detail: if ok { "200" } else { "503" }.into() })
    }
}

struct Receiver(Shared);

impl Outbound for &Receiver {
    fn send(&self, out: Outgoing) -> impl Future<Output = Outcome> {
        let w = &self.0;
        w.in_flight.set(w.in_flight.get() + 1);
        w.started.borrow_mut().push((out.idempotency_key.clone(), w.in_flight.get()));
        w.answers.borrow_mut().push(None);
        Forward { world: w.clone(), id: w.answers.borrow().len() - 1, key: out.idempotency_key }
    }
}

/// Virtual time: a pause moves the clock and returns at once.
struct FakeClock(Shared);

impl Clock for &FakeClock {
    fn now(&self) -> u64 {
        self.0.now.get()
    }
    async fn sleep(&self, ms: u64) {
        self.0.now.set(self.0.now.get() + ms);
    }
    fn log(&self, line: &str) {
        self.0.logs.borrow_mut().push(line.to_string());
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
            object: RefCell::new(Rc::new(GateObject::new(FakeGateStore(world.clone())))),
        };
        let (queue, receiver, clock) = (FakeQueue(world.clone()), Receiver(world.clone()), FakeClock(world.clone()));
        Parts { gates, queue, receiver, clock, topics }
    }

    fn consumer(&self) -> TestConsumer<'_> {
        let (gates, queue, outbound, clock) = (&self.gates, &self.queue, &self.receiver, &self.clock);
        Consumer { gates, queue, outbound, clock, topics: &self.topics }
    }
}

/// A message of the batch.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Good,
    DeadLetter,
    OtherTopic,
    Garbage,
}

fn text(kind: Kind, i: usize) -> String {
    let topic = if matches!(kind, Kind::OtherTopic) { "gone" } else { "q" };
    match kind {
        Kind::Garbage => format!("not json {i}"),
        _ => format!(r#"{{"topic":"{topic}","idempotency_key":"q/k{i}/x.1","attempt":1,"body":{{"i":{i}}}}}"#),
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
    /// The order forwards are answered in (indices into those waiting) and how.
    answers: Vec<(usize, bool)>,
}

fn case() -> impl Strategy<Value = Case> {
    let kind = prop_oneof![6 => Just(Kind::Good), 2 => Just(Kind::DeadLetter), 1 => Just(Kind::OtherTopic),
                           1 => Just(Kind::Garbage)];
    let fault = prop_oneof![8 => Just(None), 1 => Just(Some(Fault::Fail)), 1 => Just(Some(Fault::LoseAnswer)),
                            1 => Just(Some(Fault::Crash))];
    (
        prop::collection::vec(kind, 1..12),
        prop::collection::vec(prop::bool::weighted(0.15), 0..40),
        prop::collection::vec(fault, 0..60),
        prop::collection::vec(prop::bool::weighted(0.3), 0..10),
        prop::collection::vec((0..12usize, prop::bool::weighted(0.7)), 0..40),
    )
        .prop_map(|(kinds, store_faults, gate_faults, queue_faults, answers)| Case {
            kinds,
            store_faults,
            gate_faults,
            queue_faults,
            answers,
        })
}

/// Run one batch; returns each message's text and how it settled, and the world.
fn run(case: &Case) -> (Vec<(Kind, String, Settle)>, Shared) {
    let world: Shared = Rc::default();
    world.now.set(1_000_000);
    *world.store_faults.borrow_mut() = case.store_faults.clone();
    *world.gate_faults.borrow_mut() = case.gate_faults.clone();
    *world.queue_faults.borrow_mut() = case.queue_faults.clone();
    let parts = Parts::new(&world);
    let consumer = parts.consumer();
    let texts: Vec<(Kind, String)> = case.kinds.iter().enumerate().map(|(i, k)| (*k, text(*k, i))).collect();
    let mut handles: Vec<Pin<Box<dyn Future<Output = Settle> + '_>>> = texts
        .iter()
        .enumerate()
        .map(|(i, (kind, text))| {
            let consumer = &consumer;
            let dead = matches!(kind, Kind::DeadLetter);
            Box::pin(async move { consumer.handle(&format!("m{i}"), text, dead).await })
                as Pin<Box<dyn Future<Output = _>>>
        })
        .collect();
    let mut settled: Vec<Option<Settle>> = vec![None; handles.len()];
    let mut script = case.answers.iter();
    for _ in 0..10_000 {
        for (i, handle) in handles.iter_mut().enumerate() {
            if settled[i].is_none()
                && let Poll::Ready(s) = poll(handle.as_mut())
            {
                settled[i] = Some(s);
            }
        }
        if settled.iter().all(Option::is_some) {
            break;
        }
        // Answer one forward in flight, as the script says (then: all succeed).
        let waiting: Vec<usize> =
            world.answers.borrow().iter().enumerate().filter(|(_, a)| a.is_none()).map(|(i, _)| i).collect();
        assert!(!waiting.is_empty(), "a message waits on nothing");
        let (pick, ok) = script.next().copied().unwrap_or((0, true));
        world.answers.borrow_mut()[waiting[pick % waiting.len()]] = Some(ok);
    }
    drop(handles);
    let out = texts.into_iter().zip(settled).map(|((k, t), s)| (k, t, s.expect("every message settles"))).collect();
    (out, world)
}

fn check(case: &Case) {
    let (settled, world) = run(case);
    // The bound holds at the receiver: never more than the limit in flight.
    let peak = world.started.borrow().iter().map(|(_, n)| *n).max().unwrap_or(0);
    assert!(peak <= LIMIT as usize, "{peak} forwards in flight at once (bound {LIMIT})");
    let requeued: Vec<String> = world.requeued.borrow().iter().map(|(_, t, _)| t.clone()).collect();
    let dead = world.dead.borrow().clone();
    for (kind, text, settle) in &settled {
        let key = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|m| m["idempotency_key"].as_str().map(str::to_string));
        match (kind, settle) {
            (Kind::Garbage | Kind::OtherTopic, s) => {
                assert_eq!(*s, Settle::Retry { delay_secs: None }, "never dropped: {text}");
            }
            (Kind::DeadLetter, Settle::Ack) => {
                assert!(dead.contains(text), "a dead letter acked that the gate's storage does not keep: {text}");
            }
            (Kind::Good, Settle::Ack) => {
                let forwarded = key.as_ref().is_some_and(|k| world.succeeded.borrow().contains(k));
                assert!(forwarded || requeued.contains(text), "acked with no 2xx and no copy on the queue: {text}");
            }
            (_, Settle::Retry { .. }) => {}
        }
    }
    // Every requeue waits at least a second, and at most what a queue takes.
    assert!(world.requeued.borrow().iter().all(|(b, _, d)| b == "LULL_QUEUE" && (1..=43_200).contains(d)));
    assert!(dead.len() <= MAX_DEAD_LETTERS);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, ..ProptestConfig::default() })]

    /// Gate, storage and queue failures never ack an unsettled message, never
    /// drop one, and never break the topic's bound.
    #[test]
    fn faults_on_the_queue_side_lose_nothing_and_keep_the_bound(case in case()) {
        check(&case);
    }
}

#[test]
fn a_message_with_no_room_soon_is_requeued_with_the_gates_delay_not_retried() {
    // Three messages, a bound of 2, forwards never answered while the third waits.
    let case = Case {
        kinds: vec![Kind::Good; 3],
        store_faults: vec![],
        gate_faults: vec![],
        queue_faults: vec![],
        answers: vec![],
    };
    let world: Shared = Rc::default();
    world.now.set(0);
    let parts = Parts::new(&world);
    let consumer = parts.consumer();
    let texts: Vec<String> = case.kinds.iter().enumerate().map(|(i, k)| text(*k, i)).collect();
    let mut first = Box::pin(consumer.handle("a", &texts[0], false));
    let mut second = Box::pin(consumer.handle("b", &texts[1], false));
    assert!(poll(first.as_mut()).is_pending() && poll(second.as_mut()).is_pending());
    let third = poll(Box::pin(consumer.handle("c", &texts[2], false)).as_mut());
    assert_eq!(third, Poll::Ready(Settle::Ack), "no room within the budget: requeued, then acked");
    assert!(world.now.get() + FULL_POLL_MS >= GATE_WAIT_BUDGET_MS, "it waited its budget first");
    assert_eq!(world.requeued.borrow().len(), 1);
    assert_eq!(world.requeued.borrow()[0].1, texts[2], "byte for byte");
    let counters = &world.gate.borrow().clone().unwrap().counters;
    assert_eq!(counters.get("requeued"), Some(&1), "counted in the gate's storage");
    assert_eq!(counters.get("retried"), None, "waiting used up no retry");
}

#[test]
fn dead_letters_are_kept_up_to_the_bound_then_stay_on_their_queue() {
    let world: Shared = Rc::default();
    *world.dead.borrow_mut() = (0..MAX_DEAD_LETTERS - 1).map(|i| format!("old {i}")).collect();
    let parts = Parts::new(&world);
    let consumer = parts.consumer();
    let (last, over) = (text(Kind::DeadLetter, 1), text(Kind::DeadLetter, 2));
    assert_eq!(poll(Box::pin(consumer.handle("a", &last, true)).as_mut()), Poll::Ready(Settle::Ack));
    assert_eq!(world.dead.borrow().len(), MAX_DEAD_LETTERS);
    assert_eq!(world.dead.borrow().last(), Some(&last), "kept byte for byte");
    let refused = poll(Box::pin(consumer.handle("b", &over, true)).as_mut());
    assert_eq!(refused, Poll::Ready(Settle::Retry { delay_secs: None }), "past the bound it stays on its queue");
    assert_eq!(world.dead.borrow().len(), MAX_DEAD_LETTERS, "nothing written past the bound");
    let line = world.logs.borrow().last().cloned().unwrap();
    assert!(line.contains(r#""kept":false"#) && line.contains("dead_letters_full"), "{line}");
}

#[test]
fn a_lost_write_of_the_gate_answers_503_and_grants_nothing_storage_does_not_hold() {
    let world: Shared = Rc::default();
    let topics = Topics::parse(TOPICS).unwrap();
    let object = GateObject::new(FakeGateStore(world.clone()));
    let topic = topics.get("q");
    world.store_faults.borrow_mut().push(true);
    let refused = poll(Box::pin(object.call("q", topic, GateOp::Acquire, 0)).as_mut());
    let Poll::Ready(Err(e)) = refused else { panic!("{refused:?}") };
    assert_eq!((e.code(), e.retry_after_secs()), ("unavailable", Some(1)));
    assert!(world.gate.borrow().is_none(), "nothing stored");
    // Memory was dropped with it: the bound's room is all there.
    for _ in 0..LIMIT {
        let granted = poll(Box::pin(object.call("q", topic, GateOp::Acquire, 0)).as_mut());
        assert!(matches!(granted, Poll::Ready(Ok(GateAnswer::Grant(lull_edge::queue::gate::Grant::Go { .. })))));
    }
    assert_eq!(world.gate.borrow().as_ref().unwrap().gate.in_flight(0), LIMIT as usize, "both leases stored");
}

#[test]
fn the_status_shows_in_flight_bound_counters_and_the_oldest_dead_letters() {
    let world: Shared = Rc::default();
    *world.dead.borrow_mut() = (0..12).map(|i| text(Kind::DeadLetter, i)).collect();
    let topics = Topics::parse(TOPICS).unwrap();
    let object = GateObject::new(FakeGateStore(world.clone()));
    let call = |op: GateOp, now: u64| match poll(Box::pin(object.call("q", topics.get("q"), op, now)).as_mut()) {
        Poll::Ready(answer) => answer,
        Poll::Pending => panic!("the gate object waited"),
    };
    let Ok(GateAnswer::Grant(lull_edge::queue::gate::Grant::Go { lease, .. })) = call(GateOp::Acquire, 10) else {
        panic!()
    };
    call(GateOp::Acquire, 10).unwrap();
    assert_eq!(call(GateOp::Release { lease }, 11), Ok(GateAnswer::Released(true)));
    assert_eq!(call(GateOp::Release { lease }, 11), Ok(GateAnswer::Released(false)), "a lease is released once");
    let counter = lull_edge::queue::gate_object::Counter::Acked;
    assert_eq!(call(GateOp::Count { counter }, 12), Ok(GateAnswer::Counted));
    let Ok(GateAnswer::Status(status)) = call(GateOp::Status, 12) else { panic!() };
    assert_eq!(status["topic"], "q");
    assert_eq!(status["in_flight"], 1);
    assert_eq!(status["forward_concurrency"], LIMIT);
    assert_eq!(status["counters"], serde_json::json!({"acked": 1}));
    assert_eq!(status["dead_letter_count"], 12);
    let shown = status["dead_letters"].as_array().unwrap();
    assert_eq!(shown.len(), lull_edge::queue::gate_object::STATUS_DEAD_LETTERS);
    assert_eq!(shown[0], serde_json::json!({"idempotency_key": "q/k0/x.1", "attempt": 1}));
    let hook = Topics::parse(r#"{"h": {"target": "https://a", "wait_ms": 1}}"#).unwrap();
    let not_queue = poll(Box::pin(object.call("h", hook.get("h"), GateOp::Status, 12)).as_mut());
    assert!(matches!(not_queue, Poll::Ready(Err(e)) if e.code() == "not_found"));
    let unknown = poll(Box::pin(object.call("x", None, GateOp::Acquire, 12)).as_mut());
    assert!(matches!(unknown, Poll::Ready(Err(e)) if e.code() == "unknown_topic"));
}
