//! `debounceAsync`: a promise per call; every caller of a window gets that window's outcome.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use js_sys::{Array, Function, Promise, Reflect};
use lull_core::{Action, Debouncer, Overlap, Policy, WindowId};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::AbortSignal;

use crate::hide::HideHook;
use crate::js;
use crate::options::{self, TimingOptions};
use crate::shared::{self, Driver, InFlight, Shell};

type Settle = (Function, Function);

/// Callers by the window they joined. At most a few windows have callers at
/// once (the open one, one running, maybe one due), so a list beats a map.
#[derive(Default)]
struct Waiters(Vec<(WindowId, Vec<Settle>)>);

impl Waiters {
    fn push(&mut self, window: WindowId, settle: Settle) {
        match self.0.iter_mut().find(|(w, _)| *w == window) {
            Some((_, callers)) => callers.push(settle),
            None => self.0.push((window, vec![settle])),
        }
    }

    fn take(&mut self, window: WindowId) -> Vec<Settle> {
        match self.0.iter().position(|(w, _)| *w == window) {
            Some(at) => self.0.swap_remove(at).1,
            None => Vec::new(),
        }
    }
}

struct State {
    engine: Debouncer,
    func: Function,
    call: Vec<(WindowId, JsValue, Array)>,
    /// Callers waiting for their window's outcome: (resolve, reject).
    waiters: Waiters,
    /// The run in flight.
    running: Option<InFlight>,
    /// `opts.signal`, if given: aborting it cancels.
    signal: Option<(AbortSignal, Closure<dyn FnMut()>)>,
    shell: Shell<State>,
    _hide: Option<HideHook>,
}

impl Drop for State {
    fn drop(&mut self) {
        if let Some((signal, listener)) = &self.signal {
            let _ = signal.remove_event_listener_with_callback("abort", listener.as_ref().unchecked_ref());
        }
        crate::live::dropped();
    }
}

/// The driver behind a function made by `debounceAsync`.
#[wasm_bindgen(skip_typescript)]
pub struct AsyncDebounced {
    state: Rc<RefCell<State>>,
}

fn reject_all(waiters: Vec<Settle>, error: &JsValue) {
    for (_, reject) in waiters {
        let _ = reject.call1(&JsValue::UNDEFINED, error);
    }
}

impl Driver for State {
    type Engine = Debouncer;

    fn pump(rc: &Rc<RefCell<Self>>) -> Result<(), JsValue> {
        pump(rc);
        Ok(())
    }

    fn parts(&mut self) -> (&mut Debouncer, &mut Shell<Self>) {
        (&mut self.engine, &mut self.shell)
    }
}

/// Carry out the engine's actions, then follow its deadline. User code runs
/// with no borrow held.
fn pump(rc: &Rc<RefCell<State>>) {
    loop {
        let action = rc.borrow_mut().engine.poll_action();
        let Some(action) = action else { break };
        match action {
            Action::Fire(fire) => start(rc, fire.window, fire.supersedes),
            Action::Dropped(dropped) => {
                let waiters = {
                    let mut s = rc.borrow_mut();
                    s.call.retain(|(w, _, _)| *w != dropped.window);
                    s.waiters.take(dropped.window)
                };
                reject_all(waiters, &js::abort_error("lull: cancelled"));
            }
            Action::DeadLettered(letter) => {
                // The callers already got the error; a page keeps no dead letters.
                let _ = rc.borrow_mut().engine.discard(letter.window);
            }
            Action::TimedOut { window, .. } => {
                // A run that did not settle in time: its callers reject, its
                // signal aborts, and the next window may run (it cannot pin the queue).
                let (run, waiters) = {
                    let mut s = rc.borrow_mut();
                    (s.running.take_if(|r| r.window == window), s.waiters.take(window))
                };
                let error = js::timeout_error("lull: the run did not settle within `timeout`");
                if let Some(run) = run {
                    run.abort(&error);
                }
                reject_all(waiters, &error);
            }
            Action::RetryScheduled { .. } | Action::Queued(_) => {}
        }
    }
    let mut s = rc.borrow_mut();
    let running = s.running.is_some();
    shared::follow(rc, &mut s, running);
}

/// Run `window` with the latest call's arguments plus a fresh `AbortSignal`.
fn start(rc: &Rc<RefCell<State>>, window: WindowId, supersedes: Option<WindowId>) {
    let (run, signal) = InFlight::start(window);
    let (func, this, args, stale) = {
        let mut s = rc.borrow_mut();
        let stale = supersedes.and_then(|old| {
            let run = s.running.take_if(|r| r.window == old)?;
            Some((run, s.waiters.take(old)))
        });
        let (this, args) = match s.call.iter().position(|(w, _, _)| *w == window) {
            Some(at) => {
                let (_, this, args) = s.call.swap_remove(at);
                (this, args)
            }
            None => (JsValue::UNDEFINED, Array::new()),
        };
        s.running = Some(run);
        (s.func.clone(), this, args, stale)
    };
    if let Some((old, waiters)) = stale {
        let error = js::abort_error("lull: superseded by a newer run");
        old.abort(&error);
        reject_all(waiters, &error);
    }
    if let Some(signal) = &signal {
        args.push(signal);
    }
    shared::await_run(rc, window, Reflect::apply(&func, &this, &args), finish);
}

/// A run settled: settle its callers, unless a newer run superseded it.
fn finish(rc: &Rc<RefCell<State>>, window: WindowId, outcome: Result<JsValue, JsValue>) {
    let waiters = {
        let mut s = rc.borrow_mut();
        if s.running.take_if(|r| r.window == window).is_none() {
            return; // superseded: its callers were already rejected
        }
        shared::end_run(&mut s.engine, window, &outcome);
        s.waiters.take(window)
    };
    for (resolve, reject) in waiters {
        let _ = match &outcome {
            Ok(value) => resolve.call1(&JsValue::UNDEFINED, value),
            Err(error) => reject.call1(&JsValue::UNDEFINED, error),
        };
    }
    pump(rc);
}

impl AsyncDebounced {
    fn new(func: Function, policy: Policy, flush_on_hide: bool, signal: Option<AbortSignal>) -> Self {
        let state = Rc::new_cyclic(|weak: &Weak<RefCell<State>>| {
            let on_abort = weak.clone();
            let signal = signal.map(|signal| {
                let listener: Closure<dyn FnMut()> = Closure::new(move || {
                    shared::upgrade_then(&on_abort, |rc| {
                        rc.borrow_mut().engine.cancel(js::now());
                        pump(rc);
                        Ok(())
                    })
                });
                let _ = signal.add_event_listener_with_callback("abort", listener.as_ref().unchecked_ref());
                (signal, listener)
            });
            RefCell::new(State {
                engine: Debouncer::new(policy, crate::seed()),
                func,
                call: Vec::new(),
                waiters: Waiters::default(),
                running: None,
                signal,
                shell: Shell::new(weak),
                _hide: shared::hide_hook(flush_on_hide, weak),
            })
        });
        crate::live::created();
        AsyncDebounced { state }
    }
}

#[wasm_bindgen]
impl AsyncDebounced {
    /// One call: a promise of the outcome of the window it joins.
    pub fn call(&self, this: JsValue, args: Array) -> Promise {
        let mut settle = None;
        let promise = Promise::new(&mut |resolve, reject| settle = Some((resolve, reject)));
        let Some((resolve, reject)) = settle else {
            return promise;
        };
        let aborted = self.state.borrow().signal.as_ref().filter(|(s, _)| s.aborted()).map(|(s, _)| s.reason());
        if let Some(reason) = aborted {
            let _ = reject.call1(&JsValue::UNDEFINED, &reason);
            return promise;
        }
        {
            let mut s = self.state.borrow_mut();
            let accepted = s.engine.event(js::now());
            // The latest call of each window (an older window may still be due).
            s.call.retain(|(w, _, _)| *w != accepted.window);
            s.call.push((accepted.window, this, args));
            s.waiters.push(accepted.window, (resolve, reject));
        }
        pump(&self.state);
        promise
    }

    /// Reject the callers of the window not yet run with an `AbortError`.
    pub fn cancel(&self) {
        self.state.borrow_mut().engine.cancel(js::now());
        pump(&self.state);
    }

    /// Run the pending window now; its callers settle with its outcome.
    pub fn flush(&self) {
        self.state.borrow_mut().engine.flush(js::now());
        pump(&self.state);
    }

    /// Whether a window waits or a run is going.
    pub fn pending(&self) -> bool {
        let s = self.state.borrow();
        s.engine.pending() || s.running.is_some()
    }
}

/// `debounceAsync(fn, wait, { leading, trailing, maxWait, mode, timeout, signal, flushOnHide })`.
///
/// `fn` receives the latest call's arguments and then an `AbortSignal`,
/// aborted when a newer run supersedes it (`mode: "latest"`, the default);
/// with `mode: "queue"` a newer run waits for it instead. With `timeout` (ms),
/// a run that has not settled by then is over: its callers reject with a
/// `TimeoutError` and its signal aborts, so a promise that never settles cannot
/// hold the queue.
#[wasm_bindgen(js_name = debounceAsync, skip_typescript)]
pub fn debounce_async(func: JsValue, wait: JsValue, options: JsValue) -> Result<Function, JsValue> {
    let func = options::function(func, "func")?;
    let timing = TimingOptions::read(&options)?;
    let mode = options::get(&options, "mode")?.map(|m| m.as_string().unwrap_or_default());
    let overlap = match mode.as_deref() {
        None | Some("latest") => Overlap::Supersede,
        Some("queue") => Overlap::Queue,
        Some(_) => return Err(js::type_error("`mode` must be \"latest\" or \"queue\"")),
    };
    let signal = options::get(&options, "signal")?
        .filter(|s| !s.is_null())
        .map(|s| s.dyn_into::<AbortSignal>().map_err(|_| js::type_error("`signal` must be an AbortSignal")))
        .transpose()?;
    let mut config = options::debounce_policy(options::wait(&wait), &timing);
    config.overlap = overlap;
    config.run_timeout = options::duration(&options, "timeout")?;
    let driver = AsyncDebounced::new(func, options::build(config)?, timing.flush_on_hide, signal);
    let methods = Array::of3(&"cancel".into(), &"flush".into(), &"pending".into());
    Ok(js::callable(driver.into(), methods))
}
