//! `debounce` and `throttle`: lodash-compatible, synchronous callbacks.
//!
//! The hot path: the latest call's `this`, arguments and result stay in a JS
//! slot (see `syncSlot` in the glue), so a call crosses into wasm once, with
//! the time; the engine decides, and the slot is invoked only when it fires.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use js_sys::{Function, Reflect};
use lull_core::{Action, Debouncer, Policy};
use wasm_bindgen::prelude::*;

use crate::hide::HideHook;
use crate::js;
use crate::options::{self, TimingOptions};
use crate::shared::{self, Driver, Shell};

struct State {
    engine: Debouncer,
    /// The JS slot: the latest call, and the calls kept under the horizon.
    slot: JsValue,
    /// The slot's `takeKept()`: how many calls it kept (the last at `keptAt`).
    take_kept: Function,
    /// The slot's `horizon(until, room)`: where calls may be kept next.
    set_horizon: Function,
    /// The slot's `invoke(run)`: runs the function with the latest call (returns
    /// whether it threw), or lets the call go.
    invoke: Function,
    /// The slot's `take()`: the error the function threw.
    take_error: Function,
    shell: Shell<State>,
    _hide: Option<HideHook>,
}

impl Drop for State {
    fn drop(&mut self) {
        crate::live::dropped();
    }
}

/// Invoke the slot for each fire (the function may call back in: no borrow is
/// held), then follow the deadline. Returns whether the function threw.
fn pump(rc: &Rc<RefCell<State>>, incoming: Option<lull_core::Seq>) -> bool {
    let mut threw = false;
    // Whether a fire covers the call being made (else it is an older window's).
    let fresh = |last: lull_core::Seq| incoming.is_some_and(|seq| last >= seq);
    loop {
        let action = rc.borrow_mut().engine.poll_action();
        let Some(action) = action else { break };
        let (run, window, fresh) = match action {
            Action::Fire(fire) => (true, Some(fire.window), fresh(fire.span.last)),
            Action::Dropped(dropped) => (false, None, fresh(dropped.span.last)),
            Action::DeadLettered(_) | Action::RetryScheduled { .. } | Action::TimedOut { .. } | Action::Queued(_) => {
                continue;
            }
        };
        if let Some(window) = window {
            // A synchronous run ends with the call that makes it, whatever it
            // throws (lodash rethrows too): the slot is free while it runs, so a
            // `flush()` inside the function runs the call made inside it at once.
            let _ = rc.borrow_mut().engine.run_succeeded(window, js::now());
        }
        let invoke = rc.borrow().invoke.clone();
        threw |= invoke
            .call2(&JsValue::UNDEFINED, &run.into(), &fresh.into())
            .ok()
            .and_then(|t| t.as_bool())
            .unwrap_or(false);
    }
    let mut s = rc.borrow_mut();
    shared::follow(rc, &mut s, false);
    let (until, room) = s.engine.horizon().map_or((-1.0, 0.0), |h| (h.until as f64, h.events as f64));
    let _ = s.set_horizon.call2(&JsValue::UNDEFINED, &until.into(), &room.into());
    threw
}

impl Driver for State {
    type Engine = Debouncer;

    fn pump(rc: &Rc<RefCell<Self>>) -> Result<(), JsValue> {
        if !pump(rc, None) {
            return Ok(());
        }
        let take = rc.borrow().take_error.clone();
        Err(take.call0(&JsValue::UNDEFINED).unwrap_or_else(|e| e))
    }

    fn parts(&mut self) -> (&mut Debouncer, &mut Shell<Self>) {
        (&mut self.engine, &mut self.shell)
    }

    fn catch_up(&mut self) {
        let kept = self.take_kept.call0(&JsValue::UNDEFINED).ok().and_then(|k| k.as_f64()).unwrap_or(0.0);
        if kept >= 1.0 {
            let at = Reflect::get(&self.slot, &"keptAt".into()).ok().and_then(|t| t.as_f64()).unwrap_or(0.0);
            self.engine.recorded(kept as u64, js::millis(at));
        }
    }
}

/// The driver behind a debounced function (see `debounce`).
#[wasm_bindgen(skip_typescript)]
pub struct Debounced {
    state: Rc<RefCell<State>>,
}

#[wasm_bindgen]
impl Debounced {
    /// One call at `now` (`performance.now()`), in the same turn of the event
    /// loop as the previous one or not; the glue put `this` and the arguments
    /// in the slot. Returns whether the function threw (the glue rethrows).
    pub fn call(&self, now: f64, same_turn: bool) -> bool {
        let accepted = {
            let mut state = shared::caught_up(&self.state);
            let now = js::millis(now);
            if same_turn { state.engine.event_in_turn(now) } else { state.engine.event(now) }
        };
        pump(&self.state, Some(accepted.seq))
    }

    /// Drop the pending call, disarm the timer.
    pub fn cancel(&self, now: f64) {
        shared::caught_up(&self.state).engine.cancel(js::millis(now));
        pump(&self.state, None);
    }

    /// Run the pending call now. Returns whether the function threw.
    pub fn flush(&self, now: f64) -> bool {
        shared::caught_up(&self.state).engine.flush(js::millis(now));
        pump(&self.state, None)
    }

    /// Whether a call is pending (a timer is armed).
    pub fn pending(&self) -> bool {
        self.state.borrow().engine.pending()
    }
}

fn make(func: Function, policy: Policy, flush_on_hide: bool) -> Result<Function, JsValue> {
    let slot = js::sync_slot(&func);
    let invoke: Function = Reflect::get(&slot, &"invoke".into())?.into();
    let take_error: Function = Reflect::get(&slot, &"take".into())?.into();
    let take_kept: Function = Reflect::get(&slot, &"takeKept".into())?.into();
    let set_horizon: Function = Reflect::get(&slot, &"horizon".into())?.into();
    let state = Rc::new_cyclic(|weak: &Weak<RefCell<State>>| {
        RefCell::new(State {
            engine: Debouncer::new(policy, crate::seed()),
            slot: slot.clone(),
            take_kept,
            set_horizon,
            invoke,
            take_error,
            shell: Shell::new(weak),
            _hide: shared::hide_hook(flush_on_hide, weak),
        })
    });
    crate::live::created();
    Ok(js::sync_callable(Debounced { state }.into(), &slot))
}

/// lodash's `debounce(func, wait, { leading, trailing, maxWait })`, plus
/// `flushOnHide`. Returns a function with `cancel()`, `flush()`, `pending()`.
#[wasm_bindgen(skip_typescript)]
pub fn debounce(func: JsValue, wait: JsValue, options: JsValue) -> Result<Function, JsValue> {
    let func = options::function(func, "func")?;
    let opts = TimingOptions::read(&options)?;
    let config = options::debounce_policy(options::wait(&wait), &opts);
    make(func, options::build(config)?, opts.flush_on_hide)
}

/// lodash's `throttle(func, wait, { leading, trailing })`, plus `flushOnHide`.
#[wasm_bindgen(skip_typescript)]
pub fn throttle(func: JsValue, wait: JsValue, options: JsValue) -> Result<Function, JsValue> {
    let func = options::function(func, "func")?;
    let opts = TimingOptions::read(&options)?;
    let config = options::throttle_policy(options::lodash_wait(&wait), &opts);
    make(func, options::build(config)?, opts.flush_on_hide)
}
