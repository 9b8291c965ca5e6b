//! The native fault harness: the key's whole logic ([`KeyObject`]) driven on
//! virtual time with fake storage, alarm and outbound call that fail, or
//! "crash" (drop everything in memory), before and after every write and at
//! every await — the shape of quinn's test `Pair`.
//!
//! Random sequences of events, alarms, deliveries that succeed or fail,
//! flush/cancel/replay/discard, storage faults and crashes; then the faults
//! stop and everything drains. Judged from the system, not from counters the
//! code keeps: the receiver's log (every request it got) and the fake SQLite's
//! rows. After recovery every event that got a `202` is in exactly one
//! delivered window (any number of attempts, one idempotency key) or was
//! cancelled or discarded; no delivery carries a missing event; no snapshot
//! grows with the backlog.
#![cfg(not(target_arch = "wasm32"))]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use lull_core::Seq;
use lull_edge::http::ApiError;
use lull_edge::key::{KeyObject, KeyReply, KeyRequest, MAX_ROW_EVENTS};
use lull_edge::names::Key;
use lull_edge::ports::{
    Bodies, Host, Outbound, Outcome, Outgoing, RowFormat, RowRead, Store, StoreError, Stored, Write,
};
use lull_edge::topic::Topics;
use proptest::prelude::*;

/// What the next storage write (or alarm) does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
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
struct World {
    /// Event rows by their first seq, in the stores' one format.
    events: BTreeMap<u64, FakeRow>,
    snapshot: Option<String>,
    windows: BTreeMap<u64, (u64, bool, String)>,
    dedupe: BTreeMap<u32, (String, u64, String)>,
    alarm: Option<u64>,
    /// Whether the alarm handler running set a new alarm (else its alarm is spent when it ends).
    alarm_replaced: bool,
    /// Failed alarm handlers in a row that the runtime retries (it gives up after [`RUNTIME_ALARM_RETRIES`]).
    alarm_retries: u32,
    now: Cell<u64>,
    random: Cell<u64>,
    commit_fault: Option<Fault>,
    /// The fault and how many `setAlarm` calls pass before it (to reach the
    /// re-arm inside an alarm's failure handling, say).
    alarm_fault: Option<(Fault, u8)>,
    /// How many more `setAlarm` calls fail in a row (storage trouble that lasts).
    alarm_outage: u8,
    crashed: bool,
    /// Every delivery the receiver got: (idempotency key, attempt, body).
    received: Vec<(String, u32, serde_json::Value)>,
    /// Idempotency keys the receiver answered 2xx.
    succeeded: BTreeSet<String>,
    /// The answer to the delivery in flight, once the harness gives it.
    answer: Option<Outcome>,
    largest_snapshot: usize,
    rows_written: u64,
    /// Bytes storage adds to what it reports a window's events weigh (a window from before the byte bound).
    extra_body_bytes: u64,
    /// Events that named a row to reuse that was gone (a row freed twice).
    reuse_misses: u64,
    logs: Vec<String>,
}

/// An event row: when its events were accepted, how many, and their bodies as `RowFormat` packs them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FakeRow {
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

type Shared = Rc<RefCell<World>>;

struct FakeStore(Shared);
struct FakeHost(Shared);
struct FakeOutbound(Shared);

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
        self.0.borrow_mut().received.push((out.idempotency_key, out.attempt, body));
        Pending(self.0.clone())
    }
}

type Object = KeyObject<FakeStore, FakeHost, FakeOutbound>;
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
enum Op {
    Event,
    /// Several events of the key in one request (a batch's share): all or nothing.
    Events(usize),
    Advance(u64),
    /// The armed alarm goes off (the clock moves to it).
    Alarm,
    /// The delivery in flight gets an answer.
    Answer(bool),
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

fn op() -> impl Strategy<Value = Op> {
    let fault = prop_oneof![Just(Fault::Fail), Just(Fault::CrashBefore), Just(Fault::CrashAfter)];
    prop_oneof![
        8 => Just(Op::Event),
        2 => (2..5usize).prop_map(Op::Events),
        4 => (1..120u64).prop_map(Op::Advance),
        4 => Just(Op::Alarm),
        4 => any::<bool>().prop_map(Op::Answer),
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
struct Pair {
    world: Shared,
    topics: Topics,
    key: Key,
    object: Rc<Object>,
    alarm: Option<AlarmRun>,
    next_event: u64,
    /// Event id -> (life, seq), for every event that got a 202.
    acked: BTreeMap<u64, (u32, u64)>,
    /// (life, seq) let go on purpose (cancel, discard), with how.
    let_go: BTreeMap<(u32, u64), &'static str>,
    /// Lives of the key: a collected key comes back with seqs from 1 again.
    life: u32,
    crashes: u32,
    unavailable: u32,
    /// The largest `max_attempts` of every configuration deployed.
    max_attempts: u32,
}

fn poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

impl Pair {
    fn new() -> Pair {
        Pair::with_topics(TOPICS)
    }

    fn with_topics(topics: &str) -> Pair {
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
        KeyObject::new(FakeStore(world.clone()), FakeHost(world.clone()), FakeOutbound(world.clone()))
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
    fn request(&mut self, request: KeyRequest) -> Option<Result<KeyReply, ApiError>> {
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
                matches!(e.code(), "unavailable" | "too_many_pending" | "not_found"),
                "unexpected error {}",
                e.to_json()
            );
            if e.code() == "unavailable" {
                self.unavailable += 1;
            }
        }
        Some(result)
    }

    fn status(&mut self) -> Option<serde_json::Value> {
        match self.request(KeyRequest::Status)? {
            Ok(reply) => Some(reply.body),
            Err(_) => None,
        }
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
    fn step(&mut self, op: &Op) {
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
                if let Some(Ok(reply)) =
                    self.request(KeyRequest::Event { body, idempotency_key: None, events_per_minute: None })
                {
                    assert_eq!(reply.status, 202);
                    self.acked.insert(id, (self.life, reply.body["seq"].as_u64().unwrap()));
                }
            }
            Op::Events(n) => {
                let ids: Vec<u64> = (self.next_event..self.next_event + *n as u64).collect();
                self.next_event += *n as u64;
                let events = ids.iter().map(|id| (format!(r#"{{"n":{id}}}"#), None)).collect();
                let request = KeyRequest::Events { events, events_per_minute: None };
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
            Op::Answer(ok) => {
                let Some(mut fut) = self.alarm.take() else { return };
                {
                    let mut w = self.world.borrow_mut();
                    w.answer = Some(Outcome { ok: *ok, detail: if *ok { "200" } else { "500" }.into() });
                    if *ok && let Some((key, _, _)) = w.received.last().cloned() {
                        w.succeeded.insert(key);
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
    fn drain(&mut self) {
        {
            let mut w = self.world.borrow_mut();
            w.commit_fault = None;
            w.alarm_fault = None;
            w.alarm_outage = 0;
        }
        for _ in 0..10_000 {
            if self.alarm.is_some() {
                self.step(&Op::Answer(true));
                continue;
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
    fn check(&self) {
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
        assert!(w.largest_snapshot < 4_096, "a snapshot of {} bytes: it grows", w.largest_snapshot);
        assert_eq!(w.reuse_misses, 0, "a row was freed twice");
        assert!(w.windows.is_empty(), "backlog rows left: {:?}", w.windows.keys());
    }
}

fn run(ops: &[Op]) -> Pair {
    let mut pair = Pair::new();
    for op in ops {
        pair.step(op);
    }
    pair.drain();
    pair.check();
    pair
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// Faults and crashes at every write and await lose no accepted event,
    /// deliver none twice in different windows, and never send a missing one.
    #[test]
    fn faults_and_crashes_lose_nothing(ops in prop::collection::vec(op(), 1..80)) {
        run(&ops);
    }
}

#[test]
fn a_failed_attempt_logs_one_line_with_its_window_and_fires_and_successes_log_none() {
    let mut pair = Pair::new();
    pair.step(&Op::Event);
    pair.step(&Op::Event);
    pair.step(&Op::Alarm); // quiet period: the window fires, the delivery starts
    pair.step(&Op::Answer(false));
    pair.step(&Op::Alarm); // the retry
    pair.step(&Op::Answer(true));
    let lines: Vec<serde_json::Value> =
        pair.world.borrow().logs.iter().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(!lines.iter().any(|l| l["lull"] == "fire"), "a fire is kept in the timeline only: {lines:?}");
    let delivered: Vec<_> = lines.iter().filter(|l| l["lull"] == "deliver").collect();
    assert_eq!(delivered.len(), 1, "the failed attempt only: {lines:?}");
    let d = delivered[0];
    assert_eq!(
        (&d["window"], &d["attempt"], &d["reason"], &d["count"]),
        (&1.into(), &1.into(), &"quiet".into(), &2.into())
    );
    assert_eq!((&d["delay_ms"], &d["ok"], &d["outcome"]), (&50.into(), &false.into(), &"500".into()), "{d}");
    // Both attempts are in the key's timeline.
    let Some(Ok(reply)) = pair.request(KeyRequest::Timeline { after: None, limit: 100 }) else {
        panic!("the timeline answers")
    };
    let attempts: Vec<_> = reply.body["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["lull"] == "deliver")
        .map(|e| (e["attempt"].clone(), e["ok"].clone()))
        .collect();
    assert_eq!(attempts, [(1.into(), false.into()), (2.into(), true.into())]);
}

#[test]
fn a_crash_mid_delivery_counts_as_an_attempt() {
    let mut pair = Pair::new();
    pair.step(&Op::Event);
    let due = pair.world.borrow().alarm.unwrap();
    pair.step(&Op::Alarm); // quiet period: the window fires, the delivery starts
    assert_eq!(pair.world.borrow().received.len(), 1);
    {
        let w = pair.world.borrow();
        assert!(!w.alarm_replaced, "a delivery sets no alarm of its own");
        assert_eq!(w.alarm, Some(due), "the runtime holds the alarm whose handler delivers");
    }
    pair.step(&Op::Crash);
    pair.step(&Op::Alarm); // the runtime runs it again: the object finds the delivery cut short
    let status = pair.status().unwrap();
    assert_eq!(status["last_delivery"]["outcome"], "interrupted");
    assert_eq!(status["stats"]["failures"], 1);
    pair.drain();
    let received = &pair.world.borrow().received;
    assert_eq!(received.iter().map(|(_, a, _)| *a).collect::<Vec<_>>(), [1, 2], "redelivered as attempt 2");
    assert_eq!(received[0].0, received[1].0, "under the same idempotency key");
}

#[test]
fn a_failed_write_answers_503_and_changes_nothing() {
    let mut pair = Pair::new();
    pair.step(&Op::Event);
    let before = pair.world.borrow().events.clone();
    pair.step(&Op::CommitFault(Fault::Fail));
    let refused = pair
        .request(KeyRequest::Event { body: r#"{"n":99}"#.into(), idempotency_key: None, events_per_minute: None })
        .unwrap()
        .unwrap_err();
    assert_eq!((refused.code(), refused.retry_after_secs()), ("unavailable", Some(1)));
    assert_eq!(pair.world.borrow().events, before, "nothing stored");
    // The next event takes the seq the failed one would have had: memory was reloaded.
    let Some(Ok(next)) =
        pair.request(KeyRequest::Event { body: r#"{"n":5}"#.into(), idempotency_key: None, events_per_minute: None })
    else {
        panic!()
    };
    assert_eq!(next.body["seq"], 2);
    pair.step(&Op::AlarmFault(Fault::Fail, 0));
    let refused = pair.request(KeyRequest::Flush).unwrap().unwrap_err();
    assert_eq!(refused.code(), "unavailable");
    pair.drain();
    let received = &pair.world.borrow().received;
    let events: Vec<_> = received.iter().flat_map(|(_, _, b)| b["events"].as_array().unwrap().clone()).collect();
    assert_eq!(events, [serde_json::json!({"n": 0}), serde_json::json!({"n": 5})]);
}

#[test]
fn the_bound_refuses_events_with_429_and_stores_nothing() {
    let mut pair = Pair::new();
    // The target is down: windows of 3 queue up behind the failing run, then dead-letter.
    for _ in 0..40 {
        pair.step(&Op::Event);
        pair.step(&Op::Alarm);
        pair.step(&Op::Answer(false));
    }
    let status = pair.status().unwrap();
    let pending = status["queued_count"].as_u64().unwrap() + status["dead_letter_count"].as_u64().unwrap();
    assert!(pending >= 5, "{status}");
    let rows = pair.world.borrow().events.len();
    let refused = (0..5)
        .filter_map(|_| {
            pair.request(KeyRequest::Event { body: "{}".into(), idempotency_key: None, events_per_minute: None })
        })
        .filter(|r| matches!(r, Err(e) if e.code() == "too_many_pending" && e.retry_after_secs().is_some()));
    assert!(refused.count() >= 1, "past the bound events are refused");
    assert!(pair.world.borrow().events.len() <= rows + 5);
    pair.drain();
    pair.check();
}

#[test]
fn an_event_writes_one_row_and_a_finished_row_is_reused() {
    let mut pair = Pair::new();
    pair.step(&Op::Event); // the first event also writes the key's first snapshot
    let after_first = pair.world.borrow().rows_written;
    assert_eq!(after_first, 2);
    for _ in 0..2 {
        pair.step(&Op::Event);
    }
    assert_eq!(pair.world.borrow().rows_written, after_first + 2, "one row per event");
    pair.drain();
    let rows_before = pair.world.borrow().events.len();
    for _ in 0..3 {
        pair.step(&Op::Event);
    }
    assert_eq!(pair.world.borrow().events.len(), rows_before, "delivered rows are reused, not added to");
    pair.drain();
    pair.check();
}

#[test]
fn a_producer_retry_with_the_same_idempotency_key_stores_once() {
    let mut pair = Pair::new();
    let send = |pair: &mut Pair, key: &str, n: u64| {
        let body = format!(r#"{{"n":{n}}}"#);
        pair.request(KeyRequest::Event { body, idempotency_key: Some(key.into()), events_per_minute: None })
            .unwrap()
            .unwrap()
    };
    pair.next_event = 2;
    let first = send(&mut pair, "order-1", 0);
    let rows = pair.world.borrow().events.len();
    let again = send(&mut pair, "order-1", 0);
    assert_eq!(again, first, "the first answer, again");
    assert_eq!(pair.world.borrow().events.len(), rows, "nothing stored");
    assert_eq!(pair.world.borrow().dedupe.len(), 1);
    let other = send(&mut pair, "order-2", 1);
    assert_ne!(other.body["seq"], first.body["seq"]);
    pair.step(&Op::Crash);
    assert_eq!(send(&mut pair, "order-1", 0), first, "remembered across a restart");
    pair.world.borrow().now.set(pair.world.borrow().now.get() + 24 * 3_600_000);
    let later = send(&mut pair, "order-1", 0);
    assert_ne!(later.body["seq"], first.body["seq"], "forgotten after dedupe_window_ms");
}

#[test]
fn an_idle_key_is_collected_after_its_retention_and_comes_back_with_a_new_incarnation() {
    let mut pair = Pair::new();
    pair.step(&Op::Event);
    pair.drain();
    let first = pair.status().unwrap();
    assert_eq!(pair.life, 0);
    let armed = pair.world.borrow().alarm.unwrap();
    let retention = pair.topics.get("t").unwrap().retention_ms;
    let last_change = first["last_delivery"]["at"].as_u64().unwrap();
    assert_eq!(armed, last_change + retention, "collected a retention after the last change");
    pair.step(&Op::Alarm);
    assert_eq!(pair.life, 1, "collected");
    assert!(pair.world.borrow().alarm.is_none(), "no alarm left");
    pair.step(&Op::Event);
    pair.drain();
    let received = &pair.world.borrow().received;
    assert_eq!(received.len(), 2);
    let (a, b) = (&received[0].0, &received[1].0);
    assert!(a.ends_with(".1") && b.ends_with(".1"), "window ids start again: {a} {b}");
    assert_ne!(a, b, "but the idempotency key is new");
    pair.check();
}

#[test]
fn an_alarm_whose_work_and_re_arm_both_fail_is_retried_by_the_runtime() {
    let mut pair = Pair::new();
    pair.step(&Op::Event);
    // The arm at the delivery's end (the idle key's collection), and the re-arm after it.
    pair.step(&Op::AlarmOutage(2));
    let before = pair.world.borrow().logs.len();
    pair.step(&Op::Alarm); // `step` asserts that the event still has an alarm
    pair.step(&Op::Answer(true));
    let w = pair.world.borrow();
    assert!(w.logs[before..].iter().any(|l| l.contains(r#""rearm":false"#)), "{:?}", &w.logs[before..]);
    assert_eq!(w.alarm, Some(w.now.get() + 2_000), "the failed handler is the runtime's to retry");
    drop(w);
    pair.drain();
    pair.check();
}

/// Found by the property above: an alarm served a deadline that fired
/// nothing (a spent timer, which let a pending policy in) and wrote no
/// snapshot; events at that same instant then opened a window under the new
/// policy, and after a crash the replay (which replays events, not alarms)
/// put them in a window that never existed: three accepted events were lost.
#[test]
fn a_deadline_served_without_a_fire_is_snapshotted() {
    use Fault::*;
    use Op::*;
    let ops = [
        Event,
        Event,
        Event,
        Event,
        Event,
        Event,
        Event,
        Event,
        Alarm,
        Event,
        Reconfigure(1),
        AlarmFault(Fail, 0),
        CommitFault(CrashAfter),
        Event,
        Alarm,
        CommitFault(Fail),
        Event,
        Alarm,
        Event,
        Event,
        Event,
        Crash,
        Alarm,
        Crash,
    ];
    run(&ops);
}

impl Pair {
    /// Post one event with `body` (and a producer key); the answer, if the object lived.
    fn post(&mut self, body: String, producer: Option<&str>) -> serde_json::Value {
        let request =
            KeyRequest::Event { body, idempotency_key: producer.map(str::to_string), events_per_minute: None };
        let reply = self.request(request).unwrap().unwrap();
        assert_eq!(reply.status, 202);
        reply.body
    }

    fn advance(&mut self, ms: u64) {
        self.step(&Op::Advance(ms));
    }
}

#[test]
fn a_producer_key_reused_after_its_window_is_new_and_its_repeat_is_not_even_after_a_reload() {
    let mut pair = Pair::new();
    let day = 24 * 3_600_000;
    let first = pair.post(r#"{"n":0}"#.into(), Some("order-1"));
    pair.drain();
    pair.advance(day + 1); // past the dedupe window: the key is new again
    let second = pair.post(r#"{"n":1}"#.into(), Some("order-1"));
    assert_ne!(second["seq"], first["seq"]);
    assert_eq!(pair.world.borrow().dedupe.len(), 2, "both rows are in the ring, the older one stale");
    pair.step(&Op::Crash); // the rows come back in no fixed order…
    pair.step(&Op::Alarm); // …to an alarm, which does not know the topic's dedupe window
    let written = pair.world.borrow().rows_written;
    assert_eq!(pair.post(r#"{"n":1}"#.into(), Some("order-1")), second, "a repeat inside the new window");
    assert_eq!(pair.world.borrow().rows_written, written, "stored once");
}

#[test]
fn the_dedupe_ring_wrapped_in_one_millisecond_keeps_its_newest_key_after_a_reload() {
    let mut pair = Pair::new();
    // One more key than the ring holds, all at the same instant: the last takes slot 0 again.
    let slots = lull_edge::key::DEDUPE_SLOTS as u64;
    let mut newest = serde_json::Value::Null;
    for i in 0..=slots {
        pair.next_event = i + 1;
        newest = pair.post(format!(r#"{{"n":{i}}}"#), Some(&format!("p-{i}")));
        if i % 2 == 0 {
            pair.drain(); // keep the backlog within its bound
        }
    }
    pair.step(&Op::Crash);
    // The next key must take slot 1, not slot 0, which holds the newest.
    pair.next_event = slots + 2;
    pair.post(format!(r#"{{"n":{}}}"#, slots + 1), Some("p-next"));
    let written = pair.world.borrow().rows_written;
    assert_eq!(pair.post(format!(r#"{{"n":{slots}}}"#), Some(&format!("p-{slots}"))), newest, "still remembered");
    assert_eq!(pair.world.borrow().rows_written, written, "the repeat wrote nothing");
}

const NEVER_QUIET: &str = r#"{"t": {"target": "http://127.0.0.1:9/hook", "allow_http": true, "wait_ms": 50,
    "payload": "MODE", "max_window_events": 100000}}"#;

/// 20,000 events, 1 ms apart, in one window that never goes quiet: under
/// `last` (or `first`) the key holds a bounded number of event rows whatever
/// the count, crashes included, and the delivery counts every event.
fn a_never_quiet_window_holds_bounded_rows(mode: &str) {
    let mut pair = Pair::with_topics(&NEVER_QUIET.replace("MODE", mode));
    let mut most_rows = 0;
    for i in 0..20_000u64 {
        pair.next_event = i + 1;
        pair.post(format!(r#"{{"n":{i}}}"#), None);
        pair.advance(1);
        if i % 5_000 == 4_999 {
            pair.step(&Op::Crash); // a reload replays what the last snapshot does not cover
        }
        most_rows = most_rows.max(pair.world.borrow().events.len());
    }
    let bound = lull_edge::key::CHECKPOINT_ROWS + 2;
    assert!(most_rows <= bound, "{mode}: {most_rows} event rows at most, bound {bound}");
    let status = pair.status().unwrap();
    assert_eq!(status["open"]["span"]["last"], 20_000, "one window: {status}");
    pair.drain();
    let received = &pair.world.borrow().received;
    assert_eq!(received.len(), 1);
    let body = &received[0].2;
    assert_eq!(body["count"], 20_000);
    let expected = if mode == "last" { 19_999 } else { 0 };
    assert_eq!(body["event"]["n"], expected, "{mode}: the event it carries");
}

#[test]
fn a_never_quiet_last_window_holds_bounded_rows() {
    a_never_quiet_window_holds_bounded_rows("last");
}

#[test]
fn a_never_quiet_first_window_holds_bounded_rows() {
    a_never_quiet_window_holds_bounded_rows("first");
}

#[test]
fn a_window_fires_full_before_an_event_would_take_it_past_its_bytes() {
    let topics = r#"{"t": {"target": "http://127.0.0.1:9/hook", "allow_http": true, "wait_ms": 50, "payload": "all",
        "max_body_bytes": 1000, "max_window_bytes": 1000}}"#;
    let mut pair = Pair::with_topics(topics);
    let event = |n: u64| format!(r#"{{"n":{n},"pad":"{}"}}"#, "x".repeat(380)); // 400 bytes
    let a = pair.post(event(0), None);
    let b = pair.post(event(1), None);
    pair.step(&Op::Crash); // the byte count survives a reload
    pair.next_event = 2;
    let c = pair.post(event(2), None); // 1,200 bytes would pass 1,000: the window fires first
    assert_eq!(a["window"], b["window"]);
    assert_ne!(c["window"], a["window"], "the event opens the next window");
    pair.next_event = 3;
    pair.drain();
    let received = &pair.world.borrow().received;
    let summary: Vec<_> = received.iter().map(|(_, _, b)| (b["reason"].clone(), b["count"].clone())).collect();
    assert_eq!(
        summary,
        [(serde_json::json!("full"), serde_json::json!(2)), (serde_json::json!("quiet"), serde_json::json!(1))]
    );
}

#[test]
fn a_window_too_large_to_build_is_a_failed_attempt_that_dead_letters_never_a_stuck_key() {
    let mut pair = Pair::new();
    pair.world.borrow_mut().extra_body_bytes = lull_edge::topic::MAX_WINDOW_BYTES;
    pair.step(&Op::Event);
    for _ in 0..10 {
        pair.step(&Op::Alarm); // each attempt fails without a request
    }
    let status = pair.status().unwrap();
    assert_eq!(status["dead_letter_count"], 1, "{status}");
    assert!(status["last_delivery"]["outcome"].as_str().unwrap().contains("bytes"), "{status}");
    assert!(pair.world.borrow().received.is_empty(), "nothing was sent");
    pair.world.borrow_mut().extra_body_bytes = 0;
    pair.drain(); // replayed once the window can be built
    pair.check();
}

/// Found by the property above: a window sealed by its bytes is queued by
/// the *next* event; after a crash, its backlog row was restored and the
/// replay of that event queued it again — one copy ran, the other was
/// cancelled, an event both delivered and cancelled.
#[test]
fn a_window_sealed_by_the_next_event_is_queued_once_after_a_reload() {
    use Op::*;
    let ops = [
        Event,
        Reconfigure(1),
        Alarm,
        Event,
        Event,
        Event,
        Reconfigure(3),
        Answer(false),
        Advance(2),
        Event,
        Crash,
        Alarm,
        Answer(false),
        Cancel,
    ];
    run(&ops);
}

/// Under `last`, a window's earlier rows are freed when the next event
/// supersedes them, its last row when it is delivered: each row is freed
/// once (the fake store refuses to reuse a row that is gone), and windows
/// delivered one after the other reuse the same rows.
#[test]
fn last_windows_delivered_one_after_another_reuse_their_rows() {
    let topics = r#"{"t": {"target": "http://127.0.0.1:9/hook", "allow_http": true, "wait_ms": 60000,
        "payload": "last", "max_batch": 10}}"#;
    let mut pair = Pair::with_topics(topics);
    for w in 0..10u64 {
        for i in 0..10u64 {
            let n = w * 10 + i;
            pair.next_event = n + 1;
            pair.post(format!(r#"{{"n":{n}}}"#), None);
            if n % 7 == 6 && w >= 5 {
                pair.step(&Op::Crash);
            }
        }
        pair.step(&Op::Alarm); // the full window fires
        pair.step(&Op::Answer(true));
    }
    let received = &pair.world.borrow().received;
    let last: Vec<_> = received.iter().map(|(_, _, b)| b["event"]["n"].as_u64().unwrap()).collect();
    assert_eq!(last, (0..10).map(|w| w * 10 + 9).collect::<Vec<_>>());
    assert!(pair.world.borrow().events.len() <= 10, "{} event rows", pair.world.borrow().events.len());
    assert_eq!(pair.world.borrow().reuse_misses, 0, "a row was freed twice");
}

/// A topic switched from `last` to `all` while a window is open: the
/// window's superseded rows are gone, so it carries the events it kept, its
/// count says how many it had, and no later event loses its row.
#[test]
fn a_window_switched_from_last_to_all_carries_what_it_kept_and_loses_nothing_after() {
    let topic = |mode: &str| {
        format!(
            r#"{{"t": {{"target": "http://127.0.0.1:9/hook", "allow_http": true, "wait_ms": 60000,
               "payload": "{mode}", "max_batch": 5}}}}"#
        )
    };
    let mut pair = Pair::with_topics(&topic("last"));
    for n in 0..3u64 {
        pair.next_event = n + 1;
        pair.post(format!(r#"{{"n":{n}}}"#), None);
    }
    pair.topics = Topics::parse(&topic("all")).unwrap();
    for n in 3..15u64 {
        pair.next_event = n + 1;
        pair.post(format!(r#"{{"n":{n}}}"#), None);
        if n % 5 == 4 {
            pair.step(&Op::Alarm);
            pair.step(&Op::Answer(true));
        }
    }
    let received = &pair.world.borrow().received;
    let windows: Vec<(u64, Vec<u64>)> = received
        .iter()
        .map(|(_, _, b)| {
            let events = b["events"].as_array().unwrap().iter().map(|e| e["n"].as_u64().unwrap()).collect();
            (b["count"].as_u64().unwrap(), events)
        })
        .collect();
    assert_eq!(windows, [(5, vec![2, 3, 4]), (5, vec![5, 6, 7, 8, 9]), (5, vec![10, 11, 12, 13, 14])]);
}

/// A batch's share for one key is one transaction: when its second event is
/// refused (the pending bound), the first is not stored either, and memory
/// forgets it (the next event takes the seq the first would have had).
#[test]
fn a_batch_refused_midway_stores_none_of_its_events() {
    let topics = r#"{"t": {"target": "http://127.0.0.1:9/hook", "allow_http": true, "wait_ms": 60000,
        "payload": "all", "max_batch": 1, "max_pending_windows": 1,
        "retry": {"max_attempts": 5, "base_ms": 60000, "cap_ms": 60000, "jitter": "none"}}}"#;
    let mut pair = Pair::with_topics(topics);
    pair.step(&Op::Event); // a full window: fires
    pair.step(&Op::Alarm);
    pair.step(&Op::Answer(false)); // its retry is a minute away
    let (rows, written) = (pair.world.borrow().events.len(), pair.world.borrow().rows_written);
    let events = vec![(r#"{"n":1}"#.to_string(), None), (r#"{"n":2}"#.to_string(), None)];
    let refused = pair.request(KeyRequest::Events { events, events_per_minute: None }).unwrap().unwrap_err();
    assert_eq!(refused.code(), "too_many_pending");
    assert_eq!((pair.world.borrow().events.len(), pair.world.borrow().rows_written), (rows, written), "nothing stored");
    pair.next_event = 3;
    let next = pair.post(r#"{"n":3}"#.into(), None);
    assert_eq!(next["seq"], 2, "the refused events left nothing in memory either");
}

const BATCHED: &str = r#"{"t": {"target": "http://127.0.0.1:9/hook", "allow_http": true, "wait_ms": 50,
    "payload": "all", "max_batch": 100}}"#;

/// A key's events of one request share one row: requests of 20 events write
/// one event row each, a crash between them replays every event from the
/// shared rows, and once every event of a row is delivered the row is
/// overwritten by the next request's events, never added to.
#[test]
fn a_requests_events_share_one_row_reused_once_all_are_delivered() {
    let mut pair = Pair::with_topics(BATCHED);
    let send = |pair: &mut Pair, round: u64| {
        let events = (round * 20..round * 20 + 20).map(|n| (format!(r#"{{"n":{n}}}"#), None)).collect();
        let reply = pair.request(KeyRequest::Events { events, events_per_minute: None }).unwrap().unwrap();
        let seqs: Vec<u64> =
            reply.body["accepted"].as_array().unwrap().iter().map(|a| a["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, (round * 20 + 1..=round * 20 + 20).collect::<Vec<_>>());
    };
    for round in 0..10 {
        send(&mut pair, round);
        if round == 4 {
            pair.step(&Op::Crash);
        }
    }
    assert_eq!(pair.world.borrow().events.len(), 10, "one row a request");
    pair.drain();
    for round in 10..20 {
        send(&mut pair, round);
    }
    assert_eq!(pair.world.borrow().events.len(), 10, "delivered rows are overwritten, not added to");
    pair.step(&Op::Crash);
    pair.drain();
    let w = pair.world.borrow();
    let mut delivered: Vec<u64> = w
        .received
        .iter()
        .flat_map(|(_, _, b)| {
            b["events"].as_array().unwrap().iter().map(|e| e["n"].as_u64().unwrap()).collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(w.received.len(), 4, "windows of 100");
    delivered.sort_unstable();
    assert_eq!(delivered, (0..400).collect::<Vec<_>>(), "every event once");
    assert_eq!(w.reuse_misses, 0, "a row was freed twice");
}

/// Under `last`, a never-quiet window fed by requests of 20 events: the rows
/// its superseded events share are freed by the snapshots, so the key holds
/// a bounded number of rows, crashes included, and the delivery carries the last event.
#[test]
fn a_never_quiet_last_window_fed_in_requests_holds_bounded_rows() {
    let mut pair = Pair::with_topics(&NEVER_QUIET.replace("MODE", "last"));
    let mut most_rows = 0;
    for round in 0..500u64 {
        let events = (round * 20..round * 20 + 20).map(|n| (format!(r#"{{"n":{n}}}"#), None)).collect();
        pair.request(KeyRequest::Events { events, events_per_minute: None }).unwrap().unwrap();
        pair.advance(1);
        if round % 150 == 149 {
            pair.step(&Op::Crash);
        }
        most_rows = most_rows.max(pair.world.borrow().events.len());
    }
    let bound = lull_edge::key::CHECKPOINT_ROWS.div_ceil(20) + 3;
    assert!(most_rows <= bound, "{most_rows} event rows at most, bound {bound}");
    pair.drain();
    let received = &pair.world.borrow().received;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].2["count"], 10_000);
    assert_eq!(received[0].2["event"]["n"], 9_999);
}
