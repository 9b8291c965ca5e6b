//! The key side's fault harness, for `tests/faults.rs`: the key's whole logic
//! ([`KeyObject`]) over fakes of all it touches, on virtual time — the shape
//! of quinn's test `Pair`. [`FakeStore`] is the Durable Object's SQLite (event
//! rows, the snapshot, backlog and dedupe rows; a commit is one transaction),
//! [`FakeHost`] the clock, randomness, the alarm and the log, [`FakeOutbound`]
//! the receiver, answered by the harness. A [`Fault`] makes the next write or
//! `setAlarm` fail, or "crash" (drop everything in memory) before or after it;
//! the [`World`] is what survives a crash.
//!
//! [`Pair`] drives the object one [`Op`] at a time ([`op`] draws them for a
//! random run): it serves the alarm as the Workers runtime does (spent when
//! its handler ends unless that set another, a failed one retried) and starts
//! a new object on the same storage after a crash. After each step it checks
//! that a key owing a delivery has an alarm set (or its handler running), and
//! that a request fails only as a client may see (`unavailable`,
//! `too_many_pending`, `not_found`). [`run`] then stops the faults, drains the
//! key and [`Pair::check`]s the receiver's log and the rows: every attempt of
//! a window carries the same window, attempts stay within `max_attempts`, each
//! event travels in one window only and is delivered unless cancelled or
//! discarded, no delivery carries a missing event, no snapshot grows, no row
//! is freed twice, no backlog row is left.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use lull_core::Seq;
use lull_edge::limits::MAX_ROW_EVENTS;
use lull_edge::metrics::{Metrics, Point};
use lull_edge::ports::{
    Bodies, Host, Outbound, Outcome, Outgoing, RowFormat, RowRead, Store, StoreError, Stored, Write,
};
use lull_edge::target::{Admission, DISABLED_RECHECK_MS, Target, TargetState, TargetTerms};
use lull_edge::{ApiError, GateAnswer, GateOp, Gates, Grant, Key, KeyObject, KeyReply, KeyRequest, Topics};
use proptest::prelude::*;

/// What the next storage write (or alarm) does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// It fails; nothing is applied; the object goes on (and answers 503).
    Fail,
    /// The object dies before it is applied.
    CrashBefore,
    /// The object dies right after it is applied.
    CrashAfter,
}

/// Everything that survives a crash: storage, the armed alarm, the clock,
/// the receiver's log, and the faults still to inject.
#[derive(Default)]
pub(crate) struct World {
    /// Event rows by their first seq, in the stores' one format.
    pub(crate) events: BTreeMap<u64, FakeRow>,
    snapshot: Option<String>,
    windows: BTreeMap<u64, (u64, bool, String)>,
    pub(crate) dedupe: BTreeMap<u32, (String, u64, String)>,
    pub(crate) alarm: Option<u64>,
    /// Whether the alarm handler running set a new alarm (else its alarm is spent when it ends).
    pub(crate) alarm_replaced: bool,
    /// Failed alarm handlers in a row that the runtime retries (it gives up after [`RUNTIME_ALARM_RETRIES`]).
    alarm_retries: u32,
    pub(crate) now: Cell<u64>,
    random: Cell<u64>,
    commit_fault: Option<Fault>,
    /// The fault and how many `setAlarm` calls pass before it (to reach the
    /// re-arm inside an alarm's failure handling, say).
    alarm_fault: Option<(Fault, u8)>,
    /// How many more `setAlarm` calls fail in a row (storage trouble that lasts).
    alarm_outage: u8,
    crashed: bool,
    /// Every delivery the receiver got: (idempotency key, attempt, body).
    pub(crate) received: Vec<(String, u32, serde_json::Value)>,
    /// Idempotency keys the receiver answered 2xx.
    succeeded: BTreeSet<String>,
    /// The answer to the delivery in flight, once the harness gives it.
    answer: Option<Outcome>,
    largest_snapshot: usize,
    /// Deliveries marked begun, from the snapshots storage took: (window, attempt, when).
    begun: Vec<(u64, u64, u64)>,
    pub(crate) rows_written: u64,
    /// Every alarm time the key set (`setAlarm` calls that took).
    pub(crate) alarms_set: Vec<u64>,
    /// Bytes storage adds to what it reports a window's events weigh (a window from before the byte bound).
    pub(crate) extra_body_bytes: u64,
    /// Events that named a row to reuse that was gone (a row freed twice).
    pub(crate) reuse_misses: u64,
    pub(crate) logs: Vec<String>,
    /// The topic's object as the fake keeps it: the target's state (lull's own logic), leases granted.
    pub(crate) target: Target,
    leases: u64,
    /// Requests the key made of its topic's object, by operation.
    pub(crate) topic_calls: BTreeMap<&'static str, u64>,
    /// The next request to the topic's object fails.
    topic_fault: bool,
    /// When a request to the topic's object failed: a key that cannot hear the
    /// target's state delivers as if it were active (a topic with no bound).
    blind_at: Vec<u64>,
    /// When each delivery reached the receiver (as `received`).
    pub(crate) received_at: Vec<u64>,
    /// How deliveries were answered: (index in `received`, answer).
    pub(crate) answered: Vec<(usize, Answer)>,
    /// The pauses the target's state went through: (from, until).
    pub(crate) pauses: Vec<(u64, u64)>,
    /// The data points the key wrote.
    pub(crate) points: Vec<Point>,
    /// The counters the topic's object was handed.
    pub(crate) totals: BTreeMap<String, u64>,
    /// What the key told its topic's object of its dead letters: (key, newest time).
    pub(crate) dead_keys_told: Vec<(String, u64)>,
}

/// How the receiver answers a delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// 200.
    Ok,
    /// 500.
    Fail,
    /// 429, with `Retry-After` (ms) or without.
    Throttle(Option<u64>),
    /// 410.
    Gone,
}

impl Answer {
    fn outcome(self) -> Outcome {
        let (status, retry_after_ms) = match self {
            Answer::Ok => (200, None),
            Answer::Fail => (500, None),
            Answer::Throttle(ms) => (429, ms),
            Answer::Gone => (410, None),
        };
        Outcome { ok: status == 200, detail: status.to_string(), status: Some(status), retry_after_ms }
    }
}

/// An event row: when its events were accepted, how many, and their bodies as `RowFormat` packs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FakeRow {
    at: u64,
    n: u64,
    text: String,
    sizes: Option<String>,
}

impl World {
    /// The rows that may hold events `first..=last` (a row begins at most `MAX_ROW_EVENTS - 1` before).
    fn rows_over(&self, first: Seq, last: Seq) -> impl Iterator<Item = (Seq, &FakeRow)> {
        let lowest = first.0.saturating_sub(MAX_ROW_EVENTS as u64 - 1);
        self.events.range(lowest..=last.0).map(|(seq, row)| (Seq(*seq), row))
    }
}

pub(crate) type Shared = Rc<RefCell<World>>;

struct FakeStore(Shared);
struct FakeHost(Shared);
struct FakeOutbound(Shared);
/// The topic's object: its target's state kept by lull's own [`Target`] logic, a lease per grant.
struct FakeTopic(Shared);

impl Gates for FakeTopic {
    async fn ask(&self, _topic: &str, op: GateOp) -> Result<GateAnswer, String> {
        let mut w = self.0.borrow_mut();
        *w.topic_calls.entry(op.name()).or_default() += 1;
        let now = w.now.get();
        if std::mem::take(&mut w.topic_fault) {
            w.blind_at.push(now);
            return Err("topic object: injected failure".into());
        }
        let terms = TargetTerms::default();
        let before = w.target.state;
        let answer = match op {
            GateOp::Target => GateAnswer::Targeted { target: w.target.view() },
            GateOp::Report { outcome } => {
                w.target.answered(now, outcome.verdict(), outcome.status, &outcome.detail, &terms);
                GateAnswer::Targeted { target: w.target.view() }
            }
            GateOp::Acquire { .. } => match w.target.admit(now, 15_000) {
                Admission::Go | Admission::Probe => {
                    w.leases += 1;
                    GateAnswer::Grant(Grant::Go { lease: w.leases, expires_at: now + 15_000 })
                }
                Admission::Hold { until } => {
                    GateAnswer::Grant(Grant::Wait { retry_at: until.unwrap_or(now + DISABLED_RECHECK_MS) })
                }
            },
            GateOp::Release { outcome, .. } => {
                if let Some(f) = outcome {
                    w.target.answered(now, f.verdict(), f.status, &f.detail, &terms);
                }
                GateAnswer::Released { released: true, target: Some(w.target.view()) }
            }
            GateOp::DeadKey { key, at } => {
                w.dead_keys_told.push((key, at));
                GateAnswer::Counted { ok: true }
            }
            GateOp::Tally { counts } => {
                lull_edge::metrics::add_up(&mut w.totals, &counts);
                GateAnswer::Counted { ok: true }
            }
            other => return Err(format!("the key asked its topic's object {other:?}")),
        };
        if let TargetState::Paused { until } = w.target.state
            && before != w.target.state
        {
            w.pauses.push((now, until));
        }
        Ok(answer)
    }
}

impl Store for FakeStore {
    fn load(&self) -> Result<Stored, StoreError> {
        let w = self.0.borrow();
        Ok(Stored {
            snapshot: w.snapshot.clone(),
            events: w
                .events
                .iter()
                .map(|(seq, r)| RowFormat::events(Seq(*seq), r.at, r.n, r.text.len() as u64, r.sizes.as_deref()))
                .collect::<Result<Vec<Vec<_>>, _>>()?
                .concat(),
            windows: {
                let mut rows: Vec<_> = w
                    .windows
                    .iter()
                    .map(|(win, (ord, dead, json))| lull_edge::ports::WindowRow {
                        window: *win,
                        ord: *ord,
                        dead: *dead,
                        json: json.clone(),
                    })
                    .collect();
                rows.sort_by_key(|r| r.ord);
                rows
            },
            // Like SQLite without ORDER BY: no order to rely on (here, the ring's slots backwards).
            dedupe: w
                .dedupe
                .iter()
                .rev()
                .map(|(slot, (key, at, reply))| lull_edge::ports::DedupeRow {
                    slot: *slot,
                    key: key.clone(),
                    at: *at,
                    reply: reply.clone(),
                })
                .collect(),
        })
    }

    fn commit(&self, writes: Vec<Write>) -> Result<u64, StoreError> {
        let mut w = self.0.borrow_mut();
        match w.commit_fault.take() {
            Some(Fault::Fail) => return Err(StoreError("injected write failure".into())),
            Some(Fault::CrashBefore) => {
                w.crashed = true;
                return Err(StoreError("crashed before the write".into()));
            }
            Some(Fault::CrashAfter) => w.crashed = true,
            None => {}
        }
        // Like SQLite in a transaction: check every statement, then apply them all.
        let mut next = (w.events.clone(), w.snapshot.clone(), w.windows.clone(), w.dedupe.clone());
        let mut rows = 0;
        for write in writes {
            rows += 1;
            match write {
                Write::Events { first, at, bodies, reuse } => {
                    // Like SqlStore: a reused row that is gone (freed twice) is an insert.
                    if let Some(old) = reuse
                        && next.0.remove(&old.0).is_none()
                    {
                        w.reuse_misses += 1;
                    }
                    assert!(!bodies.is_empty() && bodies.len() <= MAX_ROW_EVENTS, "a row of {} events", bodies.len());
                    let (text, sizes) = RowFormat::pack(&bodies);
                    let row = FakeRow { at, n: bodies.len() as u64, text, sizes };
                    assert!(next.0.insert(first.0, row).is_none(), "row {} written twice", first.0);
                }
                Write::Snapshot(json) => {
                    w.largest_snapshot = w.largest_snapshot.max(json.len());
                    let started = |json: &str| {
                        let state: serde_json::Value = serde_json::from_str(json).unwrap();
                        let started = &state["state"]["started"];
                        started[0].as_u64().zip(started[1].as_u64())
                    };
                    if let Some((window, attempt)) = started(&json)
                        && next.1.as_deref().and_then(started) != Some((window, attempt))
                    {
                        let now = w.now.get();
                        w.begun.push((window, attempt, now));
                    }
                    next.1 = Some(json);
                }
                Write::Window(row) => {
                    next.2.insert(row.window, (row.ord, row.dead, row.json));
                }
                Write::ForgetWindow(window) => {
                    assert!(next.2.remove(&window).is_some(), "forgot window {window}, which has no row");
                }
                Write::Dedupe(d) => {
                    next.3.insert(d.slot, (d.key, d.at, d.reply));
                }
            }
        }
        (w.events, w.snapshot, w.windows, w.dedupe) = next;
        w.rows_written += rows;
        if w.crashed {
            return Err(StoreError("crashed after the write".into()));
        }
        Ok(rows)
    }

    fn bodies(&self, first: Seq, last: Seq, limit: u64) -> Result<Bodies, StoreError> {
        let w = self.0.borrow();
        let rows = w.rows_over(first, last).map(|(seq, r)| RowRead {
            first: seq,
            n: r.n,
            bytes: r.text.len() as u64,
            sizes: r.sizes.as_deref(),
            text: Some(&r.text),
        });
        // Storage that reports more bytes than it holds: a window from before the byte bound.
        let read = RowFormat::read(rows, first, last, limit.saturating_sub(w.extra_body_bytes))?;
        Ok(match read.ok_or_else(|| StoreError("every text was given".into()))? {
            Bodies::TooLarge(bytes) => Bodies::TooLarge(bytes + w.extra_body_bytes),
            read => read,
        })
    }

    fn event_rows(&self) -> Result<u64, StoreError> {
        Ok(self.0.borrow().events.len() as u64)
    }

    fn size(&self) -> u64 {
        let w = self.0.borrow();
        let events: usize = w.events.values().map(|r| r.text.len() + 16).sum();
        (events + w.snapshot.as_ref().map_or(0, String::len)) as u64
    }

    async fn erase(&self) -> Result<(), StoreError> {
        let mut w = self.0.borrow_mut();
        w.events.clear();
        w.snapshot = None;
        w.windows.clear();
        w.dedupe.clear();
        w.alarm = None;
        Ok(())
    }
}

impl Metrics for FakeHost {
    fn point(&self, point: Point) {
        self.0.borrow_mut().points.push(point);
    }
}

impl Host for FakeHost {
    fn now(&self) -> u64 {
        self.0.borrow().now.get()
    }

    fn random(&self) -> u64 {
        let w = self.0.borrow();
        w.random.set(w.random.get().wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407));
        w.random.get()
    }

    async fn set_alarm(&self, at: u64) -> Result<(), StoreError> {
        let mut w = self.0.borrow_mut();
        let fault = match w.alarm_fault.take() {
            Some((fault, 0)) => Some(fault),
            Some((fault, pass)) => {
                w.alarm_fault = Some((fault, pass - 1));
                None
            }
            None if w.alarm_outage > 0 => {
                w.alarm_outage -= 1;
                Some(Fault::Fail)
            }
            None => None,
        };
        match fault {
            Some(Fault::Fail) => Err(StoreError("injected alarm failure".into())),
            Some(Fault::CrashBefore) => {
                w.crashed = true;
                Err(StoreError("crashed before setAlarm".into()))
            }
            Some(Fault::CrashAfter) => {
                w.alarm = Some(at);
                w.alarm_replaced = true;
                w.crashed = true;
                Err(StoreError("crashed after setAlarm".into()))
            }
            None => {
                w.alarm = Some(at);
                w.alarm_replaced = true;
                w.alarms_set.push(at);
                Ok(())
            }
        }
    }

    fn log(&self, line: &str) {
        self.0.borrow_mut().logs.push(line.to_string());
    }
}

/// The delivery in flight: ready once the harness puts an answer in the world.
struct Pending(Shared);

impl Future for Pending {
    type Output = Outcome;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Outcome> {
        match self.0.borrow_mut().answer.take() {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending,
        }
    }
}

impl Outbound for FakeOutbound {
    fn send(&self, out: Outgoing) -> impl Future<Output = Outcome> {
        let body: serde_json::Value = serde_json::from_str(&out.body).unwrap();
        let mut w = self.0.borrow_mut();
        let now = w.now.get();
        w.received_at.push(now);
        w.received.push((out.idempotency_key, out.attempt, body));
        drop(w);
        Pending(self.0.clone())
    }
}

type Object = KeyObject<FakeStore, FakeHost, FakeOutbound, FakeTopic>;
type AlarmRun = Pin<Box<dyn Future<Output = Result<(), ApiError>>>>;

/// Like the Workers runtime: a failed alarm handler that set no new alarm is
/// retried after 2 s, doubling, at most this many times; then the alarm is deleted.
const RUNTIME_ALARM_RETRIES: u32 = 6;

const TOPICS: &str = r#"{"t": {"target": "http://127.0.0.1:9/hook", "allow_http": true, "wait_ms": 50, "max_wait_ms": 200,
    "payload": "all", "max_batch": 3, "max_pending_windows": 6,
    "retry": {"max_attempts": 2, "base_ms": 20, "cap_ms": 40}}}"#;

/// Other settings the operator may switch the topic to (timing, retry, a window's bytes).
const RECONFIGURED: [&str; 3] = [
    r#"{"t": {"target": "http://127.0.0.1:9/hook", "allow_http": true, "wait_ms": 120, "payload": "all", "max_batch": 5,
        "max_pending_windows": 6, "leading": true, "retry": {"max_attempts": 3, "base_ms": 5, "cap_ms": 10}}}"#,
    r#"{"t": {"target": "http://127.0.0.1:9/hook", "allow_http": true, "wait_ms": 10, "max_wait_ms": 30, "payload": "all",
        "max_pending_windows": 6, "retry": {"max_attempts": 1, "base_ms": 0, "cap_ms": 0}}}"#,
    r#"{"t": {"target": "http://127.0.0.1:9/hook", "allow_http": true, "wait_ms": 50, "max_wait_ms": 200,
        "payload": "all", "max_batch": 4, "max_pending_windows": 6, "max_body_bytes": 16, "max_window_bytes": 24,
        "retry": {"max_attempts": 2, "base_ms": 20, "cap_ms": 40}}}"#,
];

/// One step of a random run.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    Event,
    /// Several events of the key in one request (a batch's share): all or nothing.
    Events(usize),
    Advance(u64),
    /// The armed alarm goes off (the clock moves to it).
    Alarm,
    /// The delivery in flight gets an answer.
    Answer(Answer),
    /// The next request to the topic's object fails.
    TopicFault,
    /// An operator resumes the topic's target.
    Resume,
    Flush,
    Cancel,
    ReplayAll,
    Discard,
    Status,
    /// The object dies (memory dropped, storage kept).
    Crash,
    CommitFault(Fault),
    /// A fault at the `setAlarm` after this many more pass.
    AlarmFault(Fault, u8),
    /// The next this many `setAlarm` calls fail.
    AlarmOutage(u8),
    /// The operator deploys other settings (0: the first ones).
    Reconfigure(usize),
}

pub(crate) fn op() -> impl Strategy<Value = Op> {
    let fault = prop_oneof![Just(Fault::Fail), Just(Fault::CrashBefore), Just(Fault::CrashAfter)];
    prop_oneof![
        8 => Just(Op::Event),
        2 => (2..5usize).prop_map(Op::Events),
        4 => (1..120u64).prop_map(Op::Advance),
        4 => Just(Op::Alarm),
        4 => prop_oneof![
            3 => Just(Answer::Ok),
            2 => Just(Answer::Fail),
            1 => prop::option::of(0..200u64).prop_map(Answer::Throttle),
            1 => Just(Answer::Gone),
        ]
        .prop_map(Op::Answer),
        1 => Just(Op::TopicFault),
        1 => Just(Op::Resume),
        1 => Just(Op::Flush),
        1 => Just(Op::Cancel),
        1 => Just(Op::ReplayAll),
        1 => Just(Op::Discard),
        1 => Just(Op::Status),
        1 => Just(Op::Crash),
        2 => fault.clone().prop_map(Op::CommitFault),
        2 => (fault, 0..3u8).prop_map(|(f, pass)| Op::AlarmFault(f, pass)),
        1 => (1..4u8).prop_map(Op::AlarmOutage),
        1 => (0..=RECONFIGURED.len()).prop_map(Op::Reconfigure),
    ]
}

/// The harness: the world, the live object, and the alarm handler in progress.
pub(crate) struct Pair {
    pub(crate) world: Shared,
    pub(crate) topics: Topics,
    key: Key,
    object: Rc<Object>,
    alarm: Option<AlarmRun>,
    pub(crate) next_event: u64,
    /// Event id -> (life, seq), for every event that got a 202.
    acked: BTreeMap<u64, (u32, u64)>,
    /// (life, seq) let go on purpose (cancel, discard), with how.
    let_go: BTreeMap<(u32, u64), &'static str>,
    /// Lives of the key: a collected key comes back with seqs from 1 again.
    pub(crate) life: u32,
    crashes: u32,
    unavailable: u32,
    /// The largest `max_attempts` of every configuration deployed.
    max_attempts: u32,
}

fn poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

impl Pair {
    pub(crate) fn new() -> Pair {
        Pair::with_topics(TOPICS)
    }

    pub(crate) fn with_topics(topics: &str) -> Pair {
        let world: Shared = Rc::default();
        world.borrow().now.set(1_000_000);
        world.borrow().random.set(7);
        let topics = Topics::parse(topics).unwrap();
        let object = Rc::new(Self::object(&world));
        Pair {
            world,
            topics,
            key: Key::from_path_segment("k").unwrap(),
            object,
            alarm: None,
            next_event: 0,
            acked: BTreeMap::new(),
            let_go: BTreeMap::new(),
            life: 0,
            crashes: 0,
            unavailable: 0,
            max_attempts: 2,
        }
    }

    fn object(world: &Shared) -> Object {
        // A new object runs in a new isolate: its copy of target states starts empty.
        let (store, host, outbound, topic) =
            (FakeStore(world.clone()), FakeHost(world.clone()), FakeOutbound(world.clone()), FakeTopic(world.clone()));
        KeyObject::new(store, host, outbound, topic, Rc::default())
    }

    /// If the object died during the last step, start a new one on the same storage.
    fn after_step(&mut self) -> bool {
        let crashed = std::mem::take(&mut self.world.borrow_mut().crashed);
        if crashed {
            self.alarm = None;
            self.world.borrow_mut().answer = None;
            self.object = Rc::new(Self::object(&self.world));
            self.crashes += 1;
        }
        crashed
    }

    /// Serve one request to completion (requests never wait for a delivery).
    pub(crate) fn request(&mut self, request: KeyRequest) -> Option<Result<KeyReply, ApiError>> {
        let object = self.object.clone();
        let topic = self.topics.get("t").unwrap().clone();
        let key = self.key.clone();
        let mut fut = Box::pin(async move { object.request(&topic, &key, request).await });
        let Poll::Ready(result) = poll(fut.as_mut()) else { panic!("a request waited") };
        drop(fut);
        if self.after_step() {
            return None; // the client never got an answer
        }
        if let Err(e) = &result {
            assert!(
                matches!(
                    e.code(),
                    "unavailable" | "too_many_pending" | "not_found" | "too_many_events" | "idempotency_key_reused"
                ),
                "unexpected error {}",
                e.to_json()
            );
            if e.code() == "unavailable" {
                self.unavailable += 1;
            }
        }
        Some(result)
    }

    pub(crate) fn status(&mut self) -> Option<serde_json::Value> {
        match self.request(KeyRequest::Status)? {
            Ok(reply) => Some(reply.body),
            Err(_) => None,
        }
    }

    /// Post one event with `body` (and a producer key); the answer, if the object lived.
    pub(crate) fn post(&mut self, body: String, producer: Option<&str>) -> serde_json::Value {
        let request = KeyRequest::Event {
            body,
            idempotency_key: producer.map(str::to_string),
            events_per_minute: None,
            holder: None,
        };
        let reply = self.request(request).unwrap().unwrap();
        assert_eq!(reply.status, 202);
        reply.body
    }

    pub(crate) fn advance(&mut self, ms: u64) {
        self.step(&Op::Advance(ms));
    }

    /// Seqs of every event the key holds that `cancel` drops (the open window, queued non-replays).
    fn cancellable(status: &serde_json::Value) -> Vec<u64> {
        let mut seqs = Vec::new();
        let mut span = |s: &serde_json::Value| {
            let (first, last) = (s["first"].as_u64().unwrap(), s["last"].as_u64().unwrap());
            seqs.extend(first..=last);
        };
        if !status["open"].is_null() {
            span(&status["open"]["span"]);
        }
        assert!(status["queued"].as_array().unwrap().len() == status["queued_count"].as_u64().unwrap() as usize);
        for q in status["queued"].as_array().unwrap() {
            if q["reason"] != "replay" {
                span(&q["span"]);
            }
        }
        seqs
    }

    /// After polling the alarm handler: keep it if it waits; if it ended,
    /// spend its alarm, or have the runtime retry it if it failed.
    fn alarm_step(&mut self, fut: AlarmRun, done: Poll<Result<(), ApiError>>) {
        let collected = self.world.borrow().logs.last().is_some_and(|l| l.contains(r#""lull":"collected""#));
        if collected {
            let w = self.world.borrow();
            assert!(w.events.is_empty() && w.snapshot.is_none() && w.windows.is_empty() && w.dedupe.is_empty());
            drop(w);
            self.world.borrow_mut().logs.push("(the key's next life)".into());
            self.life += 1;
        }
        if self.after_step() {
            return;
        }
        let Poll::Ready(result) = done else {
            self.alarm = Some(fut);
            return;
        };
        let mut w = self.world.borrow_mut();
        if w.alarm_replaced {
            // The alarm the handler set runs next (a failed handler is not retried).
            w.alarm_retries = 0;
        } else if result.is_ok() || w.alarm_retries == RUNTIME_ALARM_RETRIES {
            w.alarm = None;
            w.alarm_retries = 0;
        } else {
            w.alarm = Some(w.now.get() + (2_000 << w.alarm_retries));
            w.alarm_retries += 1;
        }
    }

    /// One step, then the invariant every step must leave behind.
    pub(crate) fn step(&mut self, op: &Op) {
        self.apply(op);
        self.assert_work_has_an_alarm(op);
    }

    /// Accepted events the key still owes a delivery, read from the receiver's
    /// log and the stored rows (no call to the object, which would reload and re-arm).
    fn owed(&self) -> Vec<u64> {
        let w = self.world.borrow();
        let delivered: BTreeSet<u64> = w
            .received
            .iter()
            .filter(|(key, _, _)| w.succeeded.contains(key))
            .flat_map(|(_, _, body)| body["events"].as_array().into_iter().flatten().filter_map(|e| e["n"].as_u64()))
            .collect();
        // A dead letter waits for an operator, not for the alarm.
        let dead: Vec<(u64, u64)> = w
            .windows
            .values()
            .filter(|(_, dead, _)| *dead)
            .map(|(_, _, json)| {
                let d: serde_json::Value = serde_json::from_str(json).unwrap();
                (d["span"]["first"].as_u64().unwrap(), d["span"]["last"].as_u64().unwrap())
            })
            .collect();
        self.acked
            .iter()
            .filter(|(id, (life, seq))| {
                *life == self.life
                    && !delivered.contains(id)
                    && !self.let_go.contains_key(&(*life, *seq))
                    && !dead.iter().any(|(first, last)| (first..=last).contains(&seq))
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// A key that owes a delivery always has an alarm (or its handler running).
    fn assert_work_has_an_alarm(&self, after: &Op) {
        let owed = self.owed();
        assert!(
            owed.is_empty() || self.world.borrow().alarm.is_some(),
            "after {after:?}: events {owed:?} are owed a delivery and no alarm is set"
        );
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Event => {
                let id = self.next_event;
                self.next_event += 1;
                let body = format!(r#"{{"n":{id}}}"#);
                if let Some(Ok(reply)) = self.request(KeyRequest::Event {
                    body,
                    idempotency_key: None,
                    events_per_minute: None,
                    holder: None,
                }) {
                    assert_eq!(reply.status, 202);
                    self.acked.insert(id, (self.life, reply.body["seq"].as_u64().unwrap()));
                }
            }
            Op::Events(n) => {
                let ids: Vec<u64> = (self.next_event..self.next_event + *n as u64).collect();
                self.next_event += *n as u64;
                let events = ids.iter().map(|id| (format!(r#"{{"n":{id}}}"#), None)).collect();
                let request = KeyRequest::Events { events, events_per_minute: None, holder: None };
                if let Some(Ok(reply)) = self.request(request) {
                    assert_eq!(reply.status, 202);
                    let accepted = reply.body["accepted"].as_array().unwrap();
                    assert_eq!(accepted.len(), ids.len(), "an answer per event");
                    for (id, a) in ids.iter().zip(accepted) {
                        self.acked.insert(*id, (self.life, a["seq"].as_u64().unwrap()));
                    }
                }
            }
            Op::Advance(ms) => {
                let w = self.world.borrow();
                w.now.set(w.now.get() + ms);
            }
            Op::Alarm => {
                if self.alarm.is_some() {
                    return; // one alarm handler at a time
                }
                // Like workerd: the alarm is spent when its handler ends, unless
                // the handler set another; a handler cut short by a crash runs again.
                let Some(at) = self.world.borrow().alarm else { return };
                {
                    let mut w = self.world.borrow_mut();
                    w.now.set(w.now.get().max(at));
                    w.alarm_replaced = false;
                }
                let object = self.object.clone();
                let topics = self.topics.clone();
                let mut fut: AlarmRun = Box::pin(async move { object.alarm(&topics).await });
                let done = poll(fut.as_mut());
                self.alarm_step(fut, done);
            }
            Op::Answer(answer) => {
                let Some(mut fut) = self.alarm.take() else { return };
                {
                    let mut w = self.world.borrow_mut();
                    w.answer = Some(answer.outcome());
                    if let Some((key, _, _)) = w.received.last().cloned() {
                        if *answer == Answer::Ok {
                            w.succeeded.insert(key);
                        }
                        let index = w.received.len() - 1;
                        w.answered.push((index, *answer));
                    }
                }
                let done = poll(fut.as_mut());
                self.alarm_step(fut, done);
            }
            Op::Flush => drop(self.request(KeyRequest::Flush)),
            Op::Cancel => {
                let Some(before) = self.status() else { return };
                let logged = self.world.borrow().logs.len();
                match self.request(KeyRequest::Cancel) {
                    // What it dropped, from the worker's log (deadlines already due fire first).
                    Some(Ok(_)) => {
                        let lines: Vec<serde_json::Value> = self.world.borrow().logs[logged..]
                            .iter()
                            .map(|l| serde_json::from_str(l).unwrap())
                            .filter(|l: &serde_json::Value| l["lull"] == "cancel")
                            .collect();
                        for line in lines {
                            let (first, last) = (line["seqs"][0].as_u64().unwrap(), line["seqs"][1].as_u64().unwrap());
                            for seq in first..=last {
                                self.let_go.insert((self.life, seq), "cancelled");
                            }
                        }
                    }
                    Some(Err(_)) => {}
                    // No answer (the object died): it may or may not have dropped them.
                    None => {
                        for seq in Self::cancellable(&before) {
                            self.let_go.insert((self.life, seq), "maybe cancelled");
                        }
                    }
                }
            }
            Op::ReplayAll => drop(self.request(KeyRequest::ReplayAll)),
            Op::Discard => {
                let Some(before) = self.status() else { return };
                let Some(dead) = before["dead_letters"].as_array().and_then(|d| d.first()).cloned() else { return };
                let window = lull_core::WindowId(dead["window"].as_u64().unwrap());
                if !matches!(self.request(KeyRequest::Discard { window }), Some(Err(_))) {
                    let (first, last) =
                        (dead["span"]["first"].as_u64().unwrap(), dead["span"]["last"].as_u64().unwrap());
                    for seq in first..=last {
                        self.let_go.insert((self.life, seq), "discarded");
                    }
                }
            }
            Op::Status => drop(self.status()),
            Op::TopicFault => self.world.borrow_mut().topic_fault = true,
            Op::Resume => {
                let mut w = self.world.borrow_mut();
                let now = w.now.get();
                // A pause an operator ends, ends now.
                if let TargetState::Paused { until } = w.target.state
                    && let Some(pause) = w.pauses.last_mut().filter(|p| p.1 == until)
                {
                    pause.1 = now.min(until);
                }
                w.target.resume(now);
            }
            Op::Crash => {
                self.world.borrow_mut().crashed = true;
                self.after_step();
            }
            Op::CommitFault(f) => self.world.borrow_mut().commit_fault = Some(*f),
            Op::AlarmFault(f, pass) => self.world.borrow_mut().alarm_fault = Some((*f, *pass)),
            Op::AlarmOutage(calls) => self.world.borrow_mut().alarm_outage = *calls,
            Op::Reconfigure(i) => {
                self.topics = Topics::parse([TOPICS].iter().chain(&RECONFIGURED).nth(*i).unwrap()).unwrap();
                let retry = self.topics.get("t").unwrap().policy.config().retry;
                self.max_attempts = self.max_attempts.max(retry.max_attempts);
            }
        }
    }

    /// No more faults: deliver everything (dead letters replayed) until the key is idle.
    pub(crate) fn drain(&mut self) {
        {
            let mut w = self.world.borrow_mut();
            w.commit_fault = None;
            w.alarm_fault = None;
            w.alarm_outage = 0;
            w.topic_fault = false;
        }
        for _ in 0..10_000 {
            if self.alarm.is_some() {
                self.step(&Op::Answer(Answer::Ok));
                continue;
            }
            if self.world.borrow().target.state == TargetState::Disabled {
                // An operator resumes a disabled target; its held windows go.
                self.step(&Op::Resume);
            }
            self.assert_work_has_an_alarm(&Op::Status);
            let status = self.status().expect("no faults now");
            if status["dead_letter_count"].as_u64().unwrap() > 0 {
                self.step(&Op::ReplayAll);
                continue;
            }
            if status["state"] == "idle" {
                // Only the alarm that collects the key is left.
                return;
            }
            assert!(self.world.borrow().alarm.is_some(), "nothing armed, yet the key is not idle: {status}");
            self.step(&Op::Alarm);
        }
        panic!("the key never drained");
    }

    /// The properties, judged from the receiver's log and the stored rows.
    pub(crate) fn check(&self) {
        let w = self.world.borrow();
        // The first successful delivery of each idempotency key.
        let mut windows: BTreeMap<String, (u32, serde_json::Value)> = BTreeMap::new();
        let mut attempts: HashMap<String, Vec<u32>> = HashMap::new();
        for (key, attempt, body) in &w.received {
            attempts.entry(key.clone()).or_default().push(*attempt);
            if let Some((_, first)) = windows.get(key) {
                let strip = |b: &serde_json::Value| {
                    let mut b = b.clone();
                    b.as_object_mut().unwrap().remove("reason");
                    b
                };
                assert_eq!(strip(first), strip(body), "{key}: every attempt carries the same window");
            } else {
                windows.insert(key.clone(), (*attempt, body.clone()));
            }
        }
        // Attempts count from 1 (again after a replay) up to the largest
        // max_attempts the topic had (a run keeps the one it started with).
        for (key, tries) in &attempts {
            assert!(tries.iter().all(|a| (1..=self.max_attempts).contains(a)), "{key}: attempts {tries:?}");
        }
        // Each event travels in one window only (whatever its attempts' fates)…
        let mut sent_in: BTreeMap<u64, String> = BTreeMap::new();
        for (key, (_, body)) in &windows {
            let events = body["events"].as_array().unwrap();
            assert_eq!(events.len() as u64, body["count"].as_u64().unwrap(), "{key}: a delivery carries every event");
            for e in events {
                let id = e["n"].as_u64().unwrap_or_else(|| panic!("{key}: a missing event: {body}"));
                assert!(id < self.next_event, "{key}: an event never posted");
                if let Some(other) = sent_in.insert(id, key.clone()) {
                    panic!("event {id} sent in two windows: {other} and {key}");
                }
            }
        }
        // …and is delivered when an attempt of that window got a 2xx.
        let delivered: BTreeMap<u64, String> =
            sent_in.into_iter().filter(|(_, key)| w.succeeded.contains(key)).collect();
        for (id, seq) in &self.acked {
            match (delivered.contains_key(id), self.let_go.get(seq)) {
                // A 2xx whose outcome could not be written leaves the window to
                // fail and be dead-lettered (at least once): it may be discarded.
                (true, None) | (false, Some(_)) | (true, Some(&("discarded" | "maybe cancelled"))) => {}
                (true, Some(how)) => panic!("event {id} (seq {seq:?}) was {how} and delivered"),
                (false, None) => {
                    panic!("event {id} (seq {seq:?}) got a 202 and was never delivered")
                }
            }
        }
        // No delivery reached the receiver during a pause (the key itself was told of each).
        for (at, (key, attempt, _)) in w.received_at.iter().zip(&w.received) {
            // A failed fetch leaves the isolate without the state for a period: it delivers as if active.
            if w.blind_at.iter().any(|b| (*b..b + lull_edge::target::TARGET_STALE_MS).contains(at)) {
                continue;
            }
            for (from, until) in &w.pauses {
                assert!(
                    !(from < at && at < until),
                    "{key} attempt {attempt} sent at {at}, inside the pause {from}..{until}"
                );
            }
        }
        // A throttled (or gone) try spends no attempt: once the key recorded it
        // (its log line, between that try and the next), the window's next try is the same attempt.
        let lines = |keep: fn(&serde_json::Value) -> bool| -> Vec<(u64, u64, u64)> {
            w.logs
                .iter()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .filter(|line| line["lull"] == "deliver" && keep(line))
                .map(|l| (l["window"].as_u64().unwrap(), l["attempt"].as_u64().unwrap(), l["at"].as_u64().unwrap()))
                .collect()
        };
        let throttles = lines(|l| !l["throttled_until"].is_null());
        // A try begun and cut short before it was sent counts as failed (found at load): it is not throttled.
        // The load's line is lost when the object dies again before it is written; the begun is in storage.
        let interrupted = lines(|l| l["outcome"] == "interrupted");
        for (i, answer) in &w.answered {
            let (key, attempt, body) = &w.received[*i];
            let Some((j, (_, next, _))) = w.received.iter().enumerate().skip(i + 1).find(|(_, (k, _, _))| k == key)
            else {
                continue;
            };
            let (sent, next_sent) = (w.received_at[*i], w.received_at[j]);
            let window = body["window"].as_u64().unwrap();
            let recorded = throttles
                .iter()
                .any(|(wi, a, at)| *wi == window && *a == u64::from(*attempt) && (sent..next_sent).contains(at))
                && !interrupted.iter().any(|(wi, _, at)| *wi == window && (sent..=next_sent).contains(at))
                && !w
                    .begun
                    .iter()
                    .any(|(wi, a, at)| *wi == window && *a == u64::from(*attempt) && sent < *at && *at <= next_sent);
            if matches!(answer, Answer::Throttle(_) | Answer::Gone) && recorded {
                assert_eq!(next, attempt, "{key}: the try after a throttle of attempt {attempt}");
            }
        }
        assert!(w.largest_snapshot < 4_096, "a snapshot of {} bytes: it grows", w.largest_snapshot);
        assert_eq!(w.reuse_misses, 0, "a row was freed twice");
        assert!(w.windows.is_empty(), "backlog rows left: {:?}", w.windows.keys());
    }
}

pub(crate) fn run(ops: &[Op]) -> Pair {
    let mut pair = Pair::new();
    for op in ops {
        pair.step(op);
    }
    pair.drain();
    pair.check();
    pair
}
