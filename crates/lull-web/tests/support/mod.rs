//! Helpers for the browser tests: real timers, a recording function, and
//! lodash's rules as an oracle over the times that actually happened.
//!
//! Real timers on a loaded machine run late, and a test's `sleep(10)` may take
//! 60 ms. So no test here assumes its schedule held: it records when each call
//! was made and when each run happened, and judges the runs by lodash's rules
//! applied to those times ([`check`]); it waits for an outcome by polling
//! ([`until`]) with a bound of seconds; and where it needs one particular
//! schedule it detects that the schedule broke and tries again ([`retrying`]).
#![allow(dead_code)]

use std::cell::RefCell;
use std::future::Future;
use std::ops::Range;
use std::rc::Rc;

use js_sys::{Array, Function, Promise, Reflect};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// Wait `ms` on a real timer.
pub async fn sleep(ms: u32) {
    let promise = Promise::new(&mut |resolve, _| {
        let global = js_sys::global();
        let set_timeout: Function = Reflect::get(&global, &"setTimeout".into()).unwrap().unchecked_into();
        set_timeout.call2(&global, &resolve, &ms.into()).unwrap();
    });
    JsFuture::from(promise).await.unwrap();
}

pub fn now() -> f64 {
    let performance = Reflect::get(&js_sys::global(), &"performance".into()).unwrap();
    let now: Function = Reflect::get(&performance, &"now".into()).unwrap().unchecked_into();
    now.call0(&performance).unwrap().as_f64().unwrap()
}

/// Run `f`, with when it began and ended (`performance.now()`).
pub fn timed<R>(f: impl FnOnce() -> R) -> (R, (f64, f64)) {
    let start = now();
    let result = f();
    (result, (start, now()))
}

/// Whether calls meant to share a window of `wait` ms (each as `(began, ended)`)
/// may have been `wait` apart for the engine (the machine held the thread):
/// then the schedule the test needs broke.
pub fn one_window(calls: &[(f64, f64)], wait: f64) -> Result<(), String> {
    match calls.windows(2).map(|w| w[1].1 - w[0].0).find(|gap| *gap >= wait - CLOCK_SLACK_MS) {
        Some(gap) => Err(format!("calls meant for one {wait} ms window were up to {gap:.1} ms apart")),
        None => Ok(()),
    }
}

/// A watch on the event loop: a chain of short timers noting the longest gap
/// between two of them — how long timers were held up, at worst, while it ran.
pub struct Lag(js_sys::Object);

pub fn watch_lag() -> Lag {
    let start = Function::new_no_args(
        "const lag = { worst: 0, stop: false };
        let last = performance.now();
        const tick = () => {
            const now = performance.now();
            lag.worst = Math.max(lag.worst, now - last);
            last = now;
            if (!lag.stop) setTimeout(tick, 2);
        };
        setTimeout(tick, 2);
        return lag;",
    );
    Lag(start.call0(&JsValue::NULL).unwrap().unchecked_into())
}

impl Lag {
    /// The longest gap so far between two ticks (ms; a tick is due every 2–4 ms).
    pub fn worst(&self) -> f64 {
        Reflect::get(&self.0, &"worst".into()).unwrap().as_f64().unwrap()
    }
}

impl Drop for Lag {
    fn drop(&mut self) {
        Reflect::set(&self.0, &"stop".into(), &true.into()).unwrap();
    }
}

/// How long [`until`] waits for an outcome before the test fails: far beyond
/// any deadline in these tests, so only a product that never delivers hits it.
pub const PATIENCE_MS: f64 = 5_000.0;

/// Poll (every 5 ms, on a real timer) until `done`, at most [`PATIENCE_MS`].
pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = now();
    while !done() {
        assert!(now() - start < PATIENCE_MS, "still waiting after {PATIENCE_MS} ms: {what}");
        sleep(5).await;
    }
}

/// Whether a schedule a test needs actually happened.
pub enum Schedule {
    /// It did, and the test made its assertions.
    Held,
    /// The machine broke it (why); the assertions that need it were not made.
    Broke(String),
}

/// How often [`retrying`] tries a schedule.
pub const ATTEMPTS: usize = 4;

/// Run `attempt` (each time on fresh state) until its schedule holds, at most
/// [`ATTEMPTS`] times; every retry is logged, and a schedule that never holds
/// fails the test (it is never silently passed).
pub async fn retrying<F: Future<Output = Schedule>>(mut attempt: impl FnMut() -> F) {
    let mut reasons = Vec::new();
    for n in 1..=ATTEMPTS {
        match attempt().await {
            Schedule::Held => return,
            Schedule::Broke(why) => {
                wasm_bindgen_test::console_log!("attempt {n}/{ATTEMPTS}: the schedule broke ({why}); retrying");
                reasons.push(why);
            }
        }
    }
    panic!("the schedule broke in all {ATTEMPTS} attempts: {reasons:?}");
}

// ---- recording ------------------------------------------------------------

/// Each run of the recorded function: when (ms) and its arguments.
pub type Runs = Rc<RefCell<Vec<(f64, Vec<JsValue>)>>>;

/// A call the test made through [`Recorder::call`]: when (`performance.now()`
/// just before and just after it) and which runs (indices into `runs`) happened inside it.
#[derive(Clone, Debug)]
pub struct Call {
    pub at: f64,
    pub end: f64,
    pub runs: Range<usize>,
}

/// A JS function that records each run's arguments (and `this`) and returns
/// its first argument; and, through [`Recorder::call`], the calls the test made.
pub struct Recorder {
    pub func: Function,
    pub runs: Runs,
    pub calls: RefCell<Vec<Call>>,
    _closure: Closure<dyn FnMut(Array) -> JsValue>,
}

pub fn recorder() -> Recorder {
    let runs: Runs = Rc::default();
    let log = runs.clone();
    let closure = Closure::new(move |args: Array| {
        log.borrow_mut().push((now(), args.to_vec()));
        args.get(0)
    });
    // Collect variadic arguments into one array for the Rust closure.
    let wrap = Function::new_with_args("inner", "return function (...args) { return inner(args); }");
    let func: Function = wrap.call1(&JsValue::NULL, closure.as_ref()).unwrap().unchecked_into();
    Recorder { func, runs, calls: RefCell::default(), _closure: closure }
}

impl Recorder {
    pub fn count(&self) -> usize {
        self.runs.borrow().len()
    }

    /// The first argument of every run, as numbers.
    pub fn firsts(&self) -> Vec<f64> {
        self.runs.borrow().iter().map(|(_, args)| args[0].as_f64().unwrap_or(f64::NAN)).collect()
    }

    /// Call `f` with `args`, recording when and which runs happened inside the call.
    pub fn call(&self, f: &Function, args: &[JsValue]) -> JsValue {
        let at = now();
        let before = self.count();
        let result = call(f, args);
        self.calls.borrow_mut().push(Call { at, end: now(), runs: before..self.count() });
        result
    }

    /// Call `f` with the call's index as its one argument (what [`Recorder::check`] expects).
    pub fn call_numbered(&self, f: &Function) -> JsValue {
        let n = self.calls.borrow().len();
        self.call(f, &[(n as f64).into()])
    }

    /// [`check`] the runs against the calls made with [`Recorder::call_numbered`].
    pub fn check(&self, rules: Rules) -> Result<(), String> {
        let calls = self.calls.borrow();
        let at: Vec<(f64, f64)> = calls.iter().map(|c| (c.at, c.end)).collect();
        let runs: Vec<Run> = self
            .runs
            .borrow()
            .iter()
            .enumerate()
            .map(|(i, (t, args))| Run {
                at: *t,
                // A run without arguments is nobody's: no call index matches it.
                arg: args.first().and_then(JsValue::as_f64).map_or(usize::MAX, |n| n as usize),
                during: calls.iter().position(|c| c.runs.contains(&i)),
            })
            .collect();
        check(rules, &at, &runs)
    }
}

// ---- the oracle -------------------------------------------------------------

/// lodash's `debounce(func, wait, { maxWait, leading, trailing })`, in ms.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    pub wait: f64,
    pub max_wait: Option<f64>,
    pub leading: bool,
    pub trailing: bool,
    /// Every call is made in one turn of the event loop (a synchronous loop):
    /// no timer could run between them, so a call never finds a passed
    /// deadline served first — lodash's own rule, with no lull difference.
    pub one_turn: bool,
}

impl Rules {
    /// lodash's defaults: trailing only.
    pub fn debounce(wait: f64) -> Self {
        Rules { wait, max_wait: None, leading: false, trailing: true, one_turn: false }
    }

    /// lodash's throttle: leading and trailing, `maxWait = wait`.
    pub fn throttle(wait: f64) -> Self {
        Rules { wait, max_wait: Some(wait), leading: true, trailing: true, one_turn: false }
    }
}

/// A run as recorded: when (`performance.now()` inside the function), whose
/// arguments (the index of the call that made them), and inside which call
/// (index), if it happened inside one.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub at: f64,
    pub arg: usize,
    pub during: Option<usize>,
}

/// How much earlier than our reading the engine may have read the clock for
/// the same moment: it floors `performance.now()` to whole ms, and the glue
/// refreshes its reading once per `Date.now()` millisecond (so ≤ 1 ms old);
/// plus Chromium's 0.1 ms coarsening of `performance.now()`.
pub const CLOCK_SLACK_MS: f64 = 2.5;
/// How much later than our reading after the fact the engine's may be (coarsening).
const JITTER_MS: f64 = 0.5;

/// The engine's reading of a moment we know only to lie in `[lo, hi]`.
type When = (f64, f64);

fn plus((lo, hi): When, ms: f64) -> When {
    (lo + ms, hi + ms)
}

fn earlier(a: When, b: When) -> When {
    (a.0.min(b.0), a.1.min(b.1))
}

fn later(a: When, b: When) -> When {
    (a.0.max(b.0), a.1.max(b.1))
}

/// Whether `a > b` for the engine: certainly, certainly not, or either.
fn past(a: When, b: When) -> &'static [bool] {
    if a.0 > b.1 {
        &[true]
    } else if a.1 <= b.0 {
        &[false]
    } else {
        &[true, false]
    }
}

/// Whether `a >= b` for the engine: certainly, certainly not, or either.
fn reached(a: When, b: When) -> &'static [bool] {
    if a.0 >= b.1 {
        &[true]
    } else if a.1 < b.0 {
        &[false]
    } else {
        &[true, false]
    }
}

/// lodash's state: `lastCallTime`, `lastInvokeTime`, when the timer is due
/// (`timerId`; lazy: a call never moves it later), `lastArgs`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Model {
    last: Option<When>,
    anchor: When,
    timer: Option<When>,
    open: Option<usize>,
}

impl Rules {
    /// When lodash's `shouldInvoke` turns true (`timerExpired` re-arms for it).
    fn due(&self, m: &Model) -> When {
        let quiet = m.last.map_or((f64::NEG_INFINITY, f64::NEG_INFINITY), |l| plus(l, self.wait));
        self.max_wait.map_or(quiet, |max| earlier(quiet, plus(m.anchor, max)))
    }

    /// lodash's `shouldInvoke(now)`.
    fn should_invoke(&self, m: &Model, now: When) -> &'static [bool] {
        if m.last.is_none() { &[true] } else { reached(now, self.due(m)) }
    }

    /// A run at `now` from the timer (or from the deadline check after a run
    /// inside a call): lodash's `timerExpired` → `trailingEdge`, if allowed.
    fn expiry(&self, m: &Model, now: When, arg: usize) -> Option<Model> {
        let timer = m.timer?;
        let allowed = self.trailing && m.open == Some(arg) && reached(now, later(timer, self.due(m))).contains(&true);
        allowed.then_some(Model { anchor: now, timer: None, open: None, ..*m })
    }

    /// What a call at `now` (index `j`) can do to `m` — lull's expiry of an
    /// overdue timer, then lodash's `debounced()` — with the runs it makes:
    /// one entry per outcome the recorded times allow.
    fn call(&self, m: Model, j: usize, now: When) -> Vec<(Model, Vec<usize>)> {
        let mut expired = Vec::new();
        let passed = |t| if self.one_turn { &[false][..] } else { past(now, t) };
        for &overdue in m.timer.map_or(&[false][..], passed) {
            if !overdue {
                expired.push((m, Vec::new()));
                continue;
            }
            for &invoking in self.should_invoke(&m, now) {
                if invoking {
                    // trailingEdge
                    let mut ran = Vec::new();
                    let mut m = m;
                    if let Some(arg) = m.open.filter(|_| self.trailing) {
                        ran.push(arg);
                        m.anchor = now;
                    }
                    expired.push((Model { timer: None, open: None, ..m }, ran));
                } else {
                    expired.push((Model { timer: Some(self.due(&m)), ..m }, Vec::new()));
                }
            }
        }
        let mut out = Vec::new();
        for (m, ran) in expired {
            for &invoking in self.should_invoke(&m, now) {
                let mut m = Model { last: Some(now), open: Some(j), ..m };
                let mut ran = ran.clone();
                if invoking && m.timer.is_none() {
                    // leadingEdge
                    m.anchor = now;
                    m.timer = Some(plus(now, self.wait));
                    if self.leading {
                        ran.push(j);
                        m.open = None;
                    }
                } else if invoking && self.max_wait.is_some() {
                    // "Handle invocations in a tight loop."
                    m.anchor = now;
                    m.timer = Some(plus(now, self.wait));
                    ran.push(j);
                    m.open = None;
                } else {
                    m.timer = Some(m.timer.map_or(plus(now, self.wait), |t| earlier(t, plus(now, self.wait))));
                }
                if !out.contains(&(m, ran.clone())) {
                    out.push((m, ran));
                }
            }
        }
        out
    }
}

/// Check `runs` against lodash's debounce over the calls as they happened
/// (`calls[i]`: when call `i` began and ended), with lull's deliberate
/// difference: a call after an overdue deadline ends the old window first (its
/// trailing run happens inside that call) and starts a new one.
///
/// Timers may run late, so a run from a timer may come any time after its
/// deadline, but never before it; the runs inside a call are exactly what
/// lodash's rules give for that call's time (plus deadlines that passed while
/// the call was held up). At the end no call may be left unrun (with
/// `trailing`): check only once the debouncer is no longer pending. The
/// engine's clock and ours differ by a little ([`CLOCK_SLACK_MS`]); a
/// stalled thread can make it differ more, so every moment is known only as
/// the interval our readings allow, and where that is too wide to tell both
/// outcomes are followed and the runs decide.
pub fn check(rules: Rules, calls: &[(f64, f64)], runs: &[Run]) -> Result<(), String> {
    judge(rules, calls, runs).map_err(|(e, near)| format!("{e}\n{}", timeline(calls, runs, near)))
}

/// The calls and runs around call `near`, relative to the first call, for a failure message.
fn timeline(calls: &[(f64, f64)], runs: &[Run], near: usize) -> String {
    let t0 = calls.first().map_or(0.0, |c| c.0);
    let from = near.saturating_sub(4);
    let to = (near + 2).min(calls.len());
    let lo = calls.get(from).map_or(f64::NEG_INFINITY, |c| c.0);
    let hi = calls.get(to).map_or(f64::INFINITY, |c| c.0);
    let mut lines = Vec::new();
    for (j, (start, end)) in calls.iter().enumerate().take(to).skip(from) {
        lines.push((start, format!("  call {j}: {:.2}..{:.2} ms", start - t0, end - t0)));
    }
    for r in runs.iter().filter(|r| r.at >= lo && r.at < hi) {
        let inside = r.during.map_or("from a timer".to_string(), |j| format!("inside call {j}"));
        lines.push((&r.at, format!("  run with call {}'s arguments at {:.2} ms, {inside}", r.arg, r.at - t0)));
    }
    lines.sort_by(|a, b| a.0.total_cmp(b.0));
    lines.into_iter().map(|(_, l)| l).collect::<Vec<_>>().join("\n")
}

fn judge(rules: Rules, calls: &[(f64, f64)], runs: &[Run]) -> Result<(), (String, usize)> {
    let t0 = calls.first().map_or(0.0, |c| c.0);
    let ms = |t: f64| format!("+{:.1} ms", t - t0);
    let mut states = vec![Model { last: None, anchor: (0.0, 0.0), timer: None, open: None }];
    let mut next = 0;
    // The last moment we read before the engine's next reading.
    let mut prev = f64::NEG_INFINITY;
    let expire = |states: Vec<Model>, prev: f64, run: &Run| -> Vec<Model> {
        let now = (prev - CLOCK_SLACK_MS, run.at + JITTER_MS);
        let mut after: Vec<Model> = Vec::new();
        for m in states.iter().filter_map(|m| rules.expiry(m, now, run.arg)) {
            if !after.contains(&m) {
                after.push(m);
            }
        }
        after
    };
    for (j, (start, end)) in calls.iter().copied().enumerate().chain([(calls.len(), (f64::INFINITY, f64::INFINITY))]) {
        // Runs from the timer, before this call.
        while let Some(run) = runs.get(next).filter(|r| r.during.is_none() && r.at < start) {
            states = expire(states, prev, run);
            if states.is_empty() {
                let e = format!(
                    "run #{next} at {} with call {}'s arguments (call made at {}) breaks lodash's rules {rules:?}",
                    ms(run.at),
                    run.arg,
                    calls.get(run.arg).map_or("?".into(), |c| ms(c.0)),
                );
                return Err((e, j));
            }
            prev = run.at;
            next += 1;
        }
        if j == calls.len() {
            break;
        }
        // The call: the engine read the clock after `start`, before its first run.
        let inside: Vec<Run> = runs[next..].iter().take_while(|r| r.during == Some(j)).copied().collect();
        let now = (start - CLOCK_SLACK_MS, inside.first().map_or(end, |r| r.at) + JITTER_MS);
        let seen: Vec<usize> = inside.iter().map(|r| r.arg).collect();
        let mut expected = Vec::new();
        let mut after: Vec<Model> = Vec::new();
        for m in &states {
            for (m, ran) in rules.call(*m, j, now) {
                if !seen.starts_with(&ran) {
                    if !expected.contains(&ran) {
                        expected.push(ran);
                    }
                    continue;
                }
                // A run waits for the one before it to return (the run slot), and
                // lodash's `lastInvokeTime` is when the last one started.
                let mut m = m;
                if let Some(last) = ran.len().checked_sub(1) {
                    m.anchor = (now.0, inside[last].at + JITTER_MS);
                }
                // Runs after lodash's: deadlines that passed while the call was held up.
                let mut now_states = vec![m];
                let mut prev = inside.get(ran.len().wrapping_sub(1)).map_or(start, |r| r.at);
                for run in &inside[ran.len()..] {
                    now_states = expire(now_states, prev, run);
                    prev = run.at;
                }
                if now_states.is_empty() && !expected.contains(&ran) {
                    expected.push(ran);
                }
                for m in now_states {
                    if !after.contains(&m) {
                        after.push(m);
                    }
                }
            }
        }
        if after.is_empty() {
            let gap =
                if j > 0 { format!(", {:.1} ms after call {}", start - calls[j - 1].0, j - 1) } else { String::new() };
            let e = format!(
                "call {j} at {}{gap} ran calls {seen:?}; lodash's rules {rules:?} give one of {expected:?}",
                ms(start)
            );
            return Err((e, j));
        }
        states = after;
        next += inside.len();
        prev = end;
    }
    if let Some(run) = runs.get(next) {
        return Err((format!("run #{next} at {} is out of order: {run:?}", ms(run.at)), calls.len()));
    }
    if rules.trailing && states.iter().all(|m| m.open.is_some()) {
        let mut open = states.iter().filter_map(|m| m.open).collect::<Vec<_>>();
        open.dedup();
        return Err((format!("call {open:?} never ran (no trailing run after the last call)"), calls.len()));
    }
    Ok(())
}

// ---- JS helpers -------------------------------------------------------------

/// Call a JS function with arguments.
pub fn call(f: &Function, args: &[JsValue]) -> JsValue {
    f.apply(&JsValue::UNDEFINED, &args.iter().collect::<Array>()).unwrap()
}

/// Call a method of a JS object.
pub fn method(target: &JsValue, name: &str, args: &[JsValue]) -> JsValue {
    let f: Function = Reflect::get(target, &name.into()).unwrap().unchecked_into();
    f.apply(target, &args.iter().collect::<Array>()).unwrap()
}

/// A plain JS object from (key, value) pairs.
pub fn object(pairs: &[(&str, JsValue)]) -> JsValue {
    let o = js_sys::Object::new();
    for (k, v) in pairs {
        Reflect::set(&o, &(*k).into(), v).unwrap();
    }
    o.into()
}

/// `lodash.debounce` itself (npm `lodash.debounce` 4.0.8, installed with the
/// web tooling by `cargo xtask setup`), for tests that run one script against
/// lodash and lull-web side by side.
pub fn lodash_debounce() -> Function {
    const SOURCE: &str = include_str!("../../../../tests/web/node_modules/lodash.debounce/index.js");
    let exports: JsValue = js_sys::Object::new().into();
    let module = object(&[("exports", exports.clone())]);
    Function::new_with_args("module, exports", SOURCE).call2(&JsValue::UNDEFINED, &module, &exports).unwrap();
    Reflect::get(&module, &"exports".into()).unwrap().unchecked_into()
}

/// End the current turn of the event loop without letting a timer run: what a
/// page sees when a long task ends and the browser runs an input task before
/// the overdue timer (lodash#6003). Microtasks run; timers do not.
pub async fn end_turn() {
    JsFuture::from(Promise::resolve(&JsValue::UNDEFINED)).await.unwrap();
}

/// Catch what lull-web reports (`reportError`: window `error` events) while it
/// lives, keeping each error's message; the events are not let through.
pub struct Reported(Function);

pub fn catch_reported() -> Reported {
    let on_error =
        Function::new_with_args("e", "e.preventDefault(); (globalThis.__lullReported ||= []).push(e.error?.message);");
    Reflect::set(&js_sys::global(), &"__lullReported".into(), &Array::new()).unwrap();
    let add: Function = Reflect::get(&js_sys::global(), &"addEventListener".into()).unwrap().unchecked_into();
    add.call2(&JsValue::UNDEFINED, &"error".into(), &on_error).unwrap();
    Reported(on_error)
}

impl Reported {
    pub fn messages(&self) -> Vec<String> {
        let list: Array = Reflect::get(&js_sys::global(), &"__lullReported".into()).unwrap().unchecked_into();
        list.iter().map(|m| m.as_string().unwrap_or_default()).collect()
    }
}

impl Drop for Reported {
    fn drop(&mut self) {
        let remove: Function = Reflect::get(&js_sys::global(), &"removeEventListener".into()).unwrap().unchecked_into();
        let _ = remove.call2(&JsValue::UNDEFINED, &"error".into(), &self.0);
    }
}

/// Busy-wait: the event loop is blocked, no timer can run.
pub fn block(ms: f64) {
    let until = now() + ms;
    while now() < until {}
}

/// Run a full garbage collection (Chromium started with `--js-flags=--expose-gc`),
/// then let finalizers run.
pub async fn collect_garbage() {
    let gc: Function = Reflect::get(&js_sys::global(), &"gc".into()).unwrap().unchecked_into();
    for _ in 0..5 {
        gc.call0(&JsValue::UNDEFINED).unwrap();
        sleep(20).await;
    }
}

/// The error a call threw.
pub fn thrown(f: impl FnOnce() -> Result<JsValue, JsValue>) -> String {
    let error = f().expect_err("it throws");
    let message = Reflect::get(&error, &"message".into()).unwrap().as_string().unwrap();
    let name = Reflect::get(&error, &"name".into()).unwrap().as_string().unwrap();
    format!("{name}: {message}")
}

/// The package under test, as built: `cargo xtask test browser` builds it and
/// bundles it into `tests/pkg/lull.js` (not committed), which the test
/// runner's server serves (it serves the crate's directory beside its own files).
pub mod lull {
    use js_sys::Function;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen(raw_module = "/tests/pkg/lull.js")]
    extern "C" {
        #[wasm_bindgen(catch)]
        pub fn debounce(func: JsValue, wait: JsValue, options: JsValue) -> Result<Function, JsValue>;

        #[wasm_bindgen(catch)]
        pub fn throttle(func: JsValue, wait: JsValue, options: JsValue) -> Result<Function, JsValue>;

        #[wasm_bindgen(catch, js_name = debounceAsync)]
        pub fn debounce_async(func: JsValue, wait: JsValue, options: JsValue) -> Result<Function, JsValue>;

        #[wasm_bindgen(catch, js_name = debounceKeyed)]
        pub fn debounce_keyed(func: JsValue, wait: JsValue, options: JsValue) -> Result<Function, JsValue>;

        /// A search box bound by `bindSearch`.
        pub type SearchBinding;

        #[wasm_bindgen(catch, js_name = bindSearch)]
        pub fn bind_search(input: JsValue, options: JsValue) -> Result<SearchBinding, JsValue>;

        #[wasm_bindgen(method)]
        pub fn destroy(this: &SearchBinding);

        #[wasm_bindgen(method)]
        pub fn flush(this: &SearchBinding);

        #[wasm_bindgen(method)]
        pub fn cancel(this: &SearchBinding);

        #[wasm_bindgen(method)]
        pub fn pending(this: &SearchBinding) -> bool;

        /// Engines held by live drivers (a leak check).
        #[wasm_bindgen(js_name = liveObjects)]
        pub fn live_objects() -> u32;
    }
}
