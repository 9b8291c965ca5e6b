//! Property tests: random policies and random traces (events, punctual and
//! late timers, flush, cancel, runs that succeed, fail or hang, replays,
//! refused calls, time going backwards) checked against a small reference
//! model of the contract, plus determinism and snapshot/restore.
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::collections::{BTreeMap, BTreeSet, HashMap};

use lull_core::{
    Accepted, Action, Adaptive, Debouncer, DropCause, Fire, JitterMode, Keyed, Overlap, PolicyConfig, Reason, Retry,
    Span, Wait, WindowId,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Event,
    /// An event whose `now` is earlier than the clock (a wall-clock jump back).
    EventBackwards(u64),
    /// An event in the same turn of the event loop as the previous call:
    /// deadlines passed meanwhile are left to the timer.
    EventInTurn,
    /// Time passes and every deadline is served on time.
    Advance(u64),
    /// Time passes with the event loop blocked: no deadline is served.
    Stall(u64),
    Flush,
    Cancel,
    Succeed,
    Fail,
    /// Replay the oldest dead letter.
    Replay,
    /// Calls naming windows the engine does not hold: refused, no change.
    Junk(u64),
    /// The operator changes the key's policy.
    SetPolicy(PolicyConfig),
    /// Up to this many events before the horizon, one by one; a twin engine
    /// gets them all at once with `recorded`.
    UnderHorizon(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => Just(Op::Event),
        2 => (0..500u64).prop_map(Op::EventBackwards),
        6 => Just(Op::EventInTurn),
        25 => prop_oneof![Just(0u64), 1..50u64, 50..400u64, 400..3_000u64].prop_map(Op::Advance),
        5 => (1..400u64).prop_map(Op::Stall),
        4 => Just(Op::Flush),
        3 => Just(Op::Cancel),
        10 => Just(Op::Succeed),
        6 => Just(Op::Fail),
        2 => Just(Op::Replay),
        2 => any::<u64>().prop_map(Op::Junk),
        2 => policy().prop_map(Op::SetPolicy),
        4 => (1..12u64).prop_map(Op::UnderHorizon),
    ]
}

fn policy() -> impl Strategy<Value = PolicyConfig> {
    let wait = prop_oneof![
        3 => (0..200u64).prop_map(Wait::Fixed),
        1 => (0..60u64, 0..300u64, 0..=100u64, 1..400u32).prop_map(|(min, extra, at, factor)| {
            let max = min + extra;
            Wait::Auto(Adaptive { factor_percent: factor, min_ms: min, max_ms: max, initial_ms: min + extra * at / 100 })
        }),
    ];
    (
        wait,
        prop::option::of(0..300u64),
        any::<bool>(),
        prop::bool::weighted(0.85),
        prop::option::weighted(0.3, 1..6u64),
        prop::bool::weighted(0.25),
        (1..5u32, 0..100u64, 0..300u64, prop::bool::weighted(0.3)),
        prop::option::weighted(0.3, 1..600u64),
    )
        .prop_map(
            |(wait, extra, leading, trailing, max_batch, supersede, (attempts, base, more, exact), timeout)| {
                PolicyConfig {
                    max_wait: extra.map(|e| wait.longest() + e),
                    wait,
                    leading,
                    trailing,
                    max_batch,
                    overlap: if supersede { Overlap::Supersede } else { Overlap::Queue },
                    retry: Retry {
                        jitter: if exact { JitterMode::None } else { JitterMode::Full },
                        ..Retry::backoff(attempts, base, base + more)
                    },
                    run_timeout: timeout,
                }
            },
        )
}

/// The reference model: what the contract says may happen, checked action by action.
struct Model {
    /// The policy in force, as the model has seen the engine adopt it.
    config: PolicyConfig,
    /// The policy last set: the engine must adopt it once no window is open.
    latest: PolicyConfig,
    /// The policy each window opened under.
    window_config: HashMap<WindowId, PolicyConfig>,
    /// The policy the run holding the slot started under.
    run_config: PolicyConfig,
    /// The harness's time.
    now: u64,
    /// The latest time the engine was given (it counts earlier times as this).
    clock: u64,
    next_seq: u64,
    outstanding: BTreeSet<u64>,
    joined: HashMap<u64, WindowId>,
    windows: HashMap<WindowId, Span>,
    /// The run holding the slot: window, in flight (vs backoff), attempt, fired at.
    running: Option<(WindowId, bool, u32, u64)>,
    dead: BTreeMap<WindowId, Span>,
    replays: BTreeSet<WindowId>,
    /// Windows waiting for the slot, as `Action::Queued` announced them.
    queued: HashMap<WindowId, (Span, Reason)>,
    slot_freed_at: Option<u64>,
    stalls: Vec<(u64, u64)>,
    cancelling: bool,
}

impl Model {
    fn new(config: PolicyConfig) -> Self {
        Model {
            latest: config.clone(),
            run_config: config.clone(),
            window_config: HashMap::new(),
            config,
            now: 0,
            clock: 0,
            next_seq: 1,
            outstanding: BTreeSet::new(),
            joined: HashMap::new(),
            windows: HashMap::new(),
            running: None,
            dead: BTreeMap::new(),
            replays: BTreeSet::new(),
            queued: HashMap::new(),
            slot_freed_at: None,
            stalls: Vec::new(),
            cancelling: false,
        }
    }

    /// The time an engine call at `t` takes effect.
    fn tell(&mut self, t: u64) -> u64 {
        self.clock = self.clock.max(t);
        self.clock
    }

    /// An event accepted by `engine`: a new window opened under the policy in force now.
    fn accepted(&mut self, a: Accepted, engine: &Debouncer) {
        self.window_config.entry(a.window).or_insert_with(|| engine.policy().config().clone());
        assert_eq!(a.seq.0, self.next_seq, "seqs are consecutive");
        self.next_seq += 1;
        self.outstanding.insert(a.seq.0);
        self.joined.insert(a.seq.0, a.window);
    }

    /// The policy `window` opened under (recorded at its first event).
    fn of(&self, window: WindowId) -> &PolicyConfig {
        &self.window_config[&window]
    }

    /// After an engine call: a policy change is only ever the latest one set,
    /// taken with no window open (but the one `fresh`, the call's own event,
    /// opened under it); a pending change is the latest one.
    fn observe_policy(&mut self, engine: &Debouncer, fresh: Option<u64>) {
        let in_force = engine.policy().config();
        if *in_force != self.config {
            assert_eq!(*in_force, self.latest, "only the latest policy is adopted");
            let open: Vec<u64> = self
                .outstanding
                .iter()
                .copied()
                .filter(|s| Some(*s) != fresh && !self.queued.contains_key(&self.joined[s]))
                .collect();
            assert!(open.is_empty(), "policy changed with events {open:?} in an open window");
            self.config = in_force.clone();
        }
        match engine.pending_policy() {
            Some(p) => assert!(*p.config() == self.latest && self.latest != self.config, "pending is the latest"),
            None => assert_eq!(self.config, self.latest, "nothing pending: the latest is in force"),
        }
    }

    fn cover(&mut self, window: WindowId, span: &Span) {
        assert_eq!(span.count(), span.last.0 - span.first.0 + 1);
        for seq in span.first.0..=span.last.0 {
            assert!(self.outstanding.remove(&seq), "seq {seq} covered twice or never accepted");
            assert_eq!(self.joined[&seq], window, "seq {seq} fired in a window it did not join");
        }
    }

    fn stalled_during(&self, from: u64, to: u64) -> bool {
        self.stalls.iter().any(|(a, b)| *a < to && *b > from)
    }

    fn check(&mut self, action: &Action) {
        match *action {
            Action::Fire(fire) => {
                let mut first = !matches!(fire.reason, Reason::Retry | Reason::Replay);
                if let Some((span, reason)) = self.queued.remove(&fire.window) {
                    assert_eq!(
                        (fire.span, fire.reason, fire.attempt),
                        (span, reason, 1),
                        "a queued window fires as queued"
                    );
                    first = false;
                }
                if fire.reason != Reason::Retry {
                    // A run takes the terms in force when it starts: a window
                    // firing as it closes, its own.
                    self.run_config = if first { self.of(fire.window).clone() } else { self.config.clone() };
                }
                self.fire(fire)
            }
            Action::Queued(q) => {
                if q.reason != Reason::Replay {
                    assert_eq!(self.of(q.window).overlap, Overlap::Queue, "windows queue only for a singleton slot");
                    assert!(self.running.is_some(), "queued with the slot free");
                }
                assert!(self.queued.insert(q.window, (q.span, q.reason)).is_none(), "queued twice");
            }
            Action::Dropped(d) => {
                self.queued.remove(&d.window);
                match d.cause {
                    DropCause::Cancelled => assert!(self.cancelling, "a drop without cancel"),
                    DropCause::NoTrailingEdge => {
                        assert!(!self.of(d.window).trailing, "dropped with trailing on")
                    }
                }
                self.cover(d.window, &d.span);
            }
            Action::TimedOut { window, attempt } => {
                let (w, in_flight, a, fired_at) = self.running.expect("a run timed out");
                assert!(in_flight && w == window && a == attempt);
                let timeout = self.run_config.run_timeout.expect("only with run_timeout");
                assert!(self.clock >= fired_at + timeout, "timed out early");
            }
            Action::RetryScheduled { window, attempt, at } => {
                let (w, _, a, _) = self.running.expect("retry of a run");
                let retry = self.run_config.retry;
                assert!(w == window && attempt == a + 1 && attempt <= retry.max_attempts, "the run keeps its retry");
                assert!(at >= self.clock && at - self.clock <= retry.ceiling(a), "backoff out of range");
                if retry.jitter == JitterMode::None {
                    assert_eq!(at - self.clock, retry.ceiling(a), "no jitter: exactly the ceiling");
                }
                self.running = Some((w, false, a, self.clock));
            }
            Action::DeadLettered(d) => {
                let (w, _, a, _) = self.running.take().expect("dead letter of a run");
                assert!(w == d.window && a == d.attempts && a == self.run_config.retry.max_attempts);
                assert_eq!(self.windows[&w], d.span);
                self.dead.insert(w, d.span);
                self.slot_freed_at = Some(self.clock);
            }
        }
    }

    fn fire(&mut self, fire: Fire) {
        assert_eq!(fire.at, self.clock, "fires happen now");
        let config = self.of(fire.window).clone();
        if let Some(m) = config.max_batch {
            assert!(fire.span.count() <= m, "window over max_batch");
        }
        match fire.reason {
            Reason::Retry => {
                let (w, in_flight, a, _) = self.running.expect("retry of a run");
                assert!(w == fire.window && !in_flight && fire.attempt == a + 1, "retry out of turn");
                assert_eq!(self.windows[&w], fire.span, "a retry covers the same events");
                self.running = Some((w, true, fire.attempt, self.clock));
                return;
            }
            Reason::Replay => {
                assert!(self.replays.remove(&fire.window), "replay of a window not asked for");
                assert_eq!(self.windows[&fire.window], fire.span);
            }
            _ => {
                assert_eq!(fire.attempt, 1);
                assert!(self.windows.insert(fire.window, fire.span).is_none(), "window fired twice");
                self.cover(fire.window, &fire.span);
                self.check_timing(&fire);
            }
        }
        let previous = self.running.map(|(w, ..)| w);
        match config.overlap {
            Overlap::Queue => assert_eq!(previous, None, "two runs at once"),
            Overlap::Supersede => assert_eq!(fire.supersedes, previous, "supersedes names the running window"),
        }
        self.running = Some((fire.window, true, 1, self.clock));
    }

    fn check_timing(&self, fire: &Fire) {
        let config = self.of(fire.window);
        let waited_for_slot = self.slot_freed_at == Some(fire.at);
        let late_driver = self.stalled_during(fire.span.first_at, fire.at);
        if waited_for_slot || late_driver {
            return;
        }
        if let Some(m) = config.max_wait {
            assert!(fire.at <= fire.span.first_at + m, "bounded delay broken: {fire:?}");
        }
        match (fire.reason, config.wait) {
            (Reason::Quiet, Wait::Fixed(wait)) => {
                assert_eq!(fire.at, fire.span.last_at + wait, "quiet fires exactly `wait` after the last event")
            }
            (Reason::Leading, _) => {
                assert!(fire.span.count() == 1 && fire.at == fire.span.first_at, "leading fires its first event")
            }
            _ => {}
        }
    }
}

/// Drives an engine through `ops`, checking every action against the model.
/// With `restore`, the engine goes through a JSON snapshot before each op.
fn run(config: &PolicyConfig, ops: &[Op], restore: bool) -> Vec<(u64, Action)> {
    let mut engine = Debouncer::new(config.clone().build().expect("valid policy"), 99);
    let mut model = Model::new(config.clone());
    let mut log = Vec::new();
    let drain = |engine: &mut Debouncer, model: &mut Model, log: &mut Vec<(u64, Action)>| {
        while let Some(action) = engine.poll_action() {
            model.check(&action);
            log.push((model.now, action));
        }
    };
    let serve_until = |engine: &mut Debouncer, model: &mut Model, log: &mut Vec<(u64, Action)>, t: u64| {
        while let Some(deadline) = engine.next_deadline().filter(|d| *d <= t) {
            model.now = model.now.max(deadline);
            let t = model.tell(model.now);
            engine.handle_timeout(t);
            drain(engine, model, log);
            model.observe_policy(engine, None);
        }
        model.now = model.now.max(t);
    };
    for op in ops {
        if restore {
            engine = serde_json::from_str(&serde_json::to_string(&engine).unwrap()).unwrap();
        }
        model.cancelling = false;
        let mut fresh = None;
        match *op {
            Op::Event => {
                let a = engine.event(model.tell(model.now));
                model.accepted(a, &engine);
                fresh = Some(a.seq.0);
            }
            Op::EventInTurn => {
                let a = engine.event_in_turn(model.tell(model.now));
                model.accepted(a, &engine);
                fresh = Some(a.seq.0);
            }
            Op::EventBackwards(back) => {
                let t = model.tell(model.now.saturating_sub(back));
                // Placed before `now`: its deadlines are served late, like after a stall.
                model.stalls.push((t, model.now));
                let a = engine.event(t);
                model.accepted(a, &engine);
                fresh = Some(a.seq.0);
            }
            Op::Advance(dt) => {
                let target = model.now + dt;
                serve_until(&mut engine, &mut model, &mut log, target);
            }
            Op::Stall(dt) => {
                model.stalls.push((model.now, model.now + dt));
                model.now += dt;
            }
            Op::Flush => engine.flush(model.tell(model.now)),
            Op::Cancel => {
                model.cancelling = true;
                engine.cancel(model.tell(model.now));
            }
            Op::Succeed | Op::Fail => {
                let Some((window, true, _, fired_at)) = model.running else {
                    continue;
                };
                model.tell(model.now);
                let expired = model.run_config.run_timeout.is_some_and(|t| fired_at + t < model.now);
                let result = if matches!(op, Op::Succeed) {
                    engine.run_succeeded(window, model.now)
                } else {
                    engine.run_failed(window, model.now)
                };
                assert_eq!(result.is_ok(), !expired, "in-flight check: {result:?}");
                if result.is_err() {
                    continue;
                }
                if matches!(op, Op::Succeed) {
                    model.running = None;
                    model.slot_freed_at = Some(model.now);
                }
            }
            Op::Replay => {
                let Some((&window, _)) = model.dead.iter().next() else {
                    continue;
                };
                model.dead.remove(&window);
                model.replays.insert(window);
                engine.replay(window, model.tell(model.now)).expect("a dead letter replays");
            }
            Op::Junk(n) => {
                let before = serde_json::to_string(&engine).unwrap();
                let stranger = WindowId(1_000_000 + n % 1_000_000);
                assert!(engine.run_succeeded(stranger, model.now).is_err());
                assert!(engine.run_failed(stranger, model.now).is_err());
                assert!(engine.replay(stranger, model.now).is_err());
                assert!(engine.discard(stranger).is_err());
                assert_eq!(serde_json::to_string(&engine).unwrap(), before, "a refused call changed the state");
            }
            Op::UnderHorizon(n) => {
                let Some(horizon) = engine.horizon() else { continue };
                let start = model.now.max(model.clock);
                if start >= horizon.until {
                    continue;
                }
                let k = n.min(horizon.events);
                let times: Vec<u64> = (0..k).map(|i| start + i * (horizon.until - 1 - start) / k.max(2)).collect();
                let mut twin = engine.clone();
                let deadline = engine.next_deadline();
                for &t in &times {
                    let before = log.len();
                    let a = engine.event(model.tell(t));
                    model.accepted(a, &engine);
                    drain(&mut engine, &mut model, &mut log);
                    assert_eq!(log.len(), before, "an event under the horizon fired nothing");
                    assert_eq!(engine.next_deadline(), deadline, "an event under the horizon moved no deadline");
                    model.now = model.now.max(t);
                }
                let last = twin.recorded(k, *times.last().unwrap()).unwrap();
                assert_eq!(last.seq, engine.last_seq());
                assert_eq!(twin, engine, "handing them in at once is the same");
            }
            Op::SetPolicy(ref next) => {
                engine.set_policy(next.clone().build().expect("valid policy"), model.tell(model.now));
                model.latest = next.clone();
            }
        }
        drain(&mut engine, &mut model, &mut log);
        model.observe_policy(&engine, fresh);
    }
    // Settle: end every run well, replay every dead letter, let every window fire.
    for _ in 0..10_000 {
        match model.running {
            Some((_, true, _, fired_at)) if model.run_config.run_timeout.is_some_and(|t| fired_at + t < model.now) => {
                // Timed out while the loop was blocked: serve that first.
                let t = model.tell(model.now);
                engine.handle_timeout(t);
                drain(&mut engine, &mut model, &mut log);
            }
            Some((window, true, ..)) => {
                engine.run_succeeded(window, model.tell(model.now)).expect("in flight");
                model.running = None;
                model.slot_freed_at = Some(model.now);
                drain(&mut engine, &mut model, &mut log);
            }
            Some((_, false, ..)) => {
                let t = engine.next_deadline().expect("a retry is armed");
                serve_until(&mut engine, &mut model, &mut log, t);
            }
            None => {
                if let Some((&window, _)) = model.dead.iter().next() {
                    model.dead.remove(&window);
                    model.replays.insert(window);
                    engine.replay(window, model.tell(model.now)).expect("replays");
                    drain(&mut engine, &mut model, &mut log);
                } else if let Some(t) = engine.next_deadline() {
                    serve_until(&mut engine, &mut model, &mut log, t);
                } else {
                    break;
                }
            }
        }
    }
    assert!(model.running.is_none() && engine.next_deadline().is_none(), "settled");
    assert_eq!(*engine.policy().config(), model.latest, "a policy set is in force once every burst is over");
    assert!(model.outstanding.is_empty(), "events lost: {:?}", model.outstanding);
    assert!(!engine.pending());
    let stats = engine.stats();
    assert_eq!(stats.events, model.next_seq - 1);
    assert_eq!(stats.windows + stats.cancelled + stats.dropped, stats.events - stats.coalesced);
    log
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// No event lost, each covered exactly once, bounded delay, never two runs,
    /// retries and replays well-formed, refused calls change nothing; and the
    /// same trace with a snapshot/restore before every step gives the same log.
    #[test]
    fn engine_keeps_the_contract(config in policy(), ops in prop::collection::vec(op(), 1..80)) {
        let plain = run(&config, &ops, false);
        let again = run(&config, &ops, false);
        prop_assert_eq!(&plain, &again, "deterministic");
        let restored = run(&config, &ops, true);
        prop_assert_eq!(&plain, &restored, "snapshot/restore changes nothing");
    }
}

#[derive(Clone, Debug)]
enum KeyOp {
    Event(u8),
    Advance(u64),
    Flush(u8),
    Cancel(u8),
}

fn key_op() -> impl Strategy<Value = KeyOp> {
    prop_oneof![
        5 => (0..4u8).prop_map(KeyOp::Event),
        4 => (0..400u64).prop_map(KeyOp::Advance),
        1 => (0..4u8).prop_map(KeyOp::Flush),
        1 => (0..4u8).prop_map(KeyOp::Cancel),
    ]
}

/// What a key saw, with window ids and seqs left out (a group numbers windows
/// across keys, and a forgotten key starts its seqs again).
type Seen = Vec<(u64, Reason, u64, u64, u64)>;

fn seen(fire: &Fire) -> (u64, Reason, u64, u64, u64) {
    (fire.at, fire.reason, fire.span.count(), fire.span.first_at, fire.span.last_at)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// A `Keyed` group behaves, key by key, exactly like separate `Debouncer`s.
    #[test]
    fn keyed_equals_one_debouncer_per_key(config in policy(), ops in prop::collection::vec(key_op(), 1..80)) {
        let config = PolicyConfig { retry: Retry::NONE, run_timeout: None, ..config };
        let policy = config.build().expect("valid");
        let mut group: Keyed<u8> = Keyed::new(policy.clone(), 1);
        let mut singles: Vec<Debouncer> = (0..4).map(|_| Debouncer::new(policy.clone(), 1)).collect();
        let mut by_group: BTreeMap<u8, Seen> = BTreeMap::new();
        let mut by_single: BTreeMap<u8, Seen> = BTreeMap::new();
        let mut now = 0;
        fn drain_group(g: &mut Keyed<u8>, now: u64, out: &mut BTreeMap<u8, Seen>) {
            while let Some((key, action)) = g.poll_action() {
                if let Action::Fire(fire) = action {
                    out.entry(key).or_default().push(seen(&fire));
                    g.run_succeeded(&key, fire.window, now).expect("in flight");
                }
            }
        }
        fn drain_single(key: u8, d: &mut Debouncer, now: u64, out: &mut BTreeMap<u8, Seen>) {
            while let Some(action) = d.poll_action() {
                if let Action::Fire(fire) = action {
                    out.entry(key).or_default().push(seen(&fire));
                    d.run_succeeded(fire.window, now).expect("in flight");
                }
            }
        }
        for op in ops {
            match op {
                KeyOp::Event(k) => {
                    group.event(k, now);
                    singles[k as usize].event(now);
                }
                KeyOp::Flush(k) => {
                    group.flush(&k, now);
                    singles[k as usize].flush(now);
                }
                KeyOp::Cancel(k) => {
                    group.cancel(&k, now);
                    singles[k as usize].cancel(now);
                }
                KeyOp::Advance(dt) => {
                    let target = now + dt;
                    // One timer for the whole group...
                    let mut t = now;
                    while let Some(d) = group.next_deadline().filter(|d| *d <= target) {
                        t = t.max(d);
                        group.handle_timeout(t);
                        drain_group(&mut group, t, &mut by_group);
                    }
                    // ...and one per separate debouncer.
                    for (k, single) in singles.iter_mut().enumerate() {
                        let mut t = now;
                        while let Some(d) = single.next_deadline().filter(|d| *d <= target) {
                            t = t.max(d);
                            single.handle_timeout(t);
                            drain_single(k as u8, single, t, &mut by_single);
                        }
                    }
                    now = target;
                }
            }
            drain_group(&mut group, now, &mut by_group);
            for (k, single) in singles.iter_mut().enumerate() {
                drain_single(k as u8, single, now, &mut by_single);
            }
        }
        prop_assert_eq!(by_group, by_single);
    }
}

#[derive(Clone, Debug)]
enum AnyCall {
    Event(u64),
    Timeout(u64),
    Flush(u64),
    Cancel(u64),
    Succeeded(u64, u64),
    Failed(u64, u64),
    Replay(u64, u64),
    Discard(u64),
    Restore,
}

fn any_call() -> impl Strategy<Value = AnyCall> {
    let time = prop_oneof![0..10_000u64, any::<u64>(), Just(u64::MAX), (u64::MAX - 1_000)..=u64::MAX];
    let window = 0..12u64;
    prop_oneof![
        time.clone().prop_map(AnyCall::Event),
        time.clone().prop_map(AnyCall::Timeout),
        time.clone().prop_map(AnyCall::Flush),
        time.clone().prop_map(AnyCall::Cancel),
        (window.clone(), time.clone()).prop_map(|(w, t)| AnyCall::Succeeded(w, t)),
        (window.clone(), time.clone()).prop_map(|(w, t)| AnyCall::Failed(w, t)),
        (window.clone(), time).prop_map(|(w, t)| AnyCall::Replay(w, t)),
        window.prop_map(AnyCall::Discard),
        Just(AnyCall::Restore),
    ]
}

/// Any policy, including the largest durations.
fn any_policy() -> impl Strategy<Value = PolicyConfig> {
    let huge = lull_core::MAX_DURATION_MS;
    (policy(), prop::option::of(prop_oneof![Just(huge), (huge - 10)..=huge])).prop_map(move |(config, big)| match big {
        Some(big) => PolicyConfig {
            wait: Wait::Fixed(big / 2),
            max_wait: config.max_wait.map(|_| big),
            retry: Retry { cap_ms: big, ..config.retry },
            run_timeout: config.run_timeout.map(|_| big),
            ..config
        },
        None => config,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, ..ProptestConfig::default() })]

    /// Fuzz-style: arbitrary calls at arbitrary times in any order (time going
    /// backwards, u64::MAX, windows that do not exist) never panic, never hang,
    /// and `next_deadline` is always honoured by `handle_timeout`.
    #[test]
    fn no_input_sequence_panics(config in any_policy(), calls in prop::collection::vec(any_call(), 1..60)) {
        let policy = config.build().expect("valid");
        let mut engine = Debouncer::new(policy.clone(), 5);
        let mut group: Keyed<u8> = Keyed::new(policy, 5);
        for (i, call) in calls.iter().enumerate() {
            let key = (i % 3) as u8;
            match *call {
                AnyCall::Event(t) => {
                    engine.event(t);
                    group.event(key, t);
                }
                AnyCall::Timeout(t) => {
                    engine.handle_timeout(t);
                    group.handle_timeout(t);
                }
                AnyCall::Flush(t) => {
                    engine.flush(t);
                    group.flush(&key, t);
                }
                AnyCall::Cancel(t) => {
                    engine.cancel(t);
                    group.cancel(&key, t);
                }
                AnyCall::Succeeded(w, t) => {
                    let _ = engine.run_succeeded(WindowId(w), t);
                    let _ = group.run_succeeded(&key, WindowId(w), t);
                }
                AnyCall::Failed(w, t) => {
                    let _ = engine.run_failed(WindowId(w), t);
                    let _ = group.run_failed(&key, WindowId(w), t);
                }
                AnyCall::Replay(w, t) => {
                    let _ = engine.replay(WindowId(w), t);
                    let _ = group.replay(&key, WindowId(w), t);
                }
                AnyCall::Discard(w) => {
                    let _ = engine.discard(WindowId(w));
                    let _ = group.discard(&key, WindowId(w));
                }
                AnyCall::Restore => {
                    engine = serde_json::from_str(&serde_json::to_string(&engine).unwrap()).unwrap();
                    group = serde_json::from_str(&serde_json::to_string(&group).unwrap()).unwrap();
                }
            }
            while engine.poll_action().is_some() {}
            while group.poll_action().is_some() {}
            // Serving the deadline moves it past the time it was served at.
            if let Some(d) = engine.next_deadline() {
                engine.handle_timeout(d);
                prop_assert!(engine.next_deadline().is_none_or(|next| next > d || d == u64::MAX));
            }
            if let Some(d) = group.next_deadline() {
                group.handle_timeout(d);
                prop_assert!(group.next_deadline().is_none_or(|next| next > d || d == u64::MAX));
            }
        }
    }
}
