//! `debounce` and `throttle`: lodash-compatible, synchronous callbacks.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use js_sys::{Array, Function, Reflect};
use lull_core::{Action, Debouncer, Policy};
use wasm_bindgen::prelude::*;

use crate::hide::HideHook;
use crate::js;
use crate::options::{self, TimingOptions};
use crate::shared::{self, Driver};
use crate::timer::Timer;

struct State {
    engine: Debouncer,
    func: Function,
    /// The latest call's `this` and arguments, until a fire uses them.
    call: Option<(JsValue, Array)>,
    result: JsValue,
    timer: Timer,
    _hide: Option<HideHook>,
    /// Set while a timer is armed: a pending call runs even if the caller let go.
    keepalive: Option<Rc<RefCell<State>>>,
}

impl Drop for State {
    fn drop(&mut self) {
        crate::live::dropped();
    }
}

impl Driver for State {
    /// Call the function for each fire (it may call back in: no borrow is
    /// held), then follow the deadline.
    fn pump(rc: &Rc<RefCell<Self>>) -> Result<(), JsValue> {
        let mut error = None;
        loop {
            let action = rc.borrow_mut().engine.poll_action();
            let Some(action) = action else { break };
            match action {
                Action::Fire(fire) => {
                    let (func, (this, args)) = {
                        let mut s = rc.borrow_mut();
                        (s.func.clone(), s.call.take().unwrap_or((JsValue::UNDEFINED, Array::new())))
                    };
                    let outcome = Reflect::apply(&func, &this, &args);
                    let mut s = rc.borrow_mut();
                    match outcome {
                        Ok(value) => s.result = value,
                        Err(thrown) => error = error.or(Some(thrown)),
                    }
                    // A synchronous call has ended, whatever it threw (lodash rethrows too).
                    let _ = s.engine.run_succeeded(fire.window, js::now());
                }
                Action::Dropped(_) => rc.borrow_mut().call = None,
                Action::DeadLettered(_) | Action::RetryScheduled { .. } | Action::TimedOut { .. } => {}
            }
        }
        let mut s = rc.borrow_mut();
        let deadline = s.engine.next_deadline();
        s.keepalive = shared::follow(rc, &mut s, deadline, false);
        error.map_or(Ok(()), Err)
    }

    fn timer(&mut self) -> &mut Timer {
        &mut self.timer
    }

    fn deadline_reached(&mut self, now: u64) {
        self.engine.handle_timeout(now);
    }

    fn flush_all(&mut self, now: u64) {
        self.engine.flush(now);
    }
}

/// The driver behind a debounced function (see `debounce`).
#[wasm_bindgen(skip_typescript)]
pub struct Debounced {
    state: Rc<RefCell<State>>,
}

impl Debounced {
    fn new(func: Function, policy: Policy, flush_on_hide: bool) -> Debounced {
        let state = Rc::new_cyclic(|weak: &Weak<RefCell<State>>| {
            RefCell::new(State {
                engine: Debouncer::new(policy, crate::seed()),
                func,
                call: None,
                result: JsValue::UNDEFINED,
                timer: shared::timer(weak),
                _hide: shared::hide_hook(flush_on_hide, weak),
                keepalive: None,
            })
        });
        crate::live::created();
        Debounced { state }
    }
}

#[wasm_bindgen]
impl Debounced {
    /// One call: `this` and the arguments are kept for the fire; returns the
    /// latest result (lodash's return value).
    pub fn call(&self, this: JsValue, args: Array) -> Result<JsValue, JsValue> {
        {
            let mut s = self.state.borrow_mut();
            s.call = Some((this, args));
            s.engine.event(js::now());
        }
        State::pump(&self.state)?;
        Ok(self.state.borrow().result.clone())
    }

    /// Drop the pending call, disarm the timer.
    pub fn cancel(&self) -> Result<(), JsValue> {
        self.state.borrow_mut().engine.cancel(js::now());
        State::pump(&self.state)
    }

    /// Run the pending call now; returns the latest result.
    pub fn flush(&self) -> Result<JsValue, JsValue> {
        self.state.borrow_mut().engine.flush(js::now());
        State::pump(&self.state)?;
        Ok(self.state.borrow().result.clone())
    }

    /// Whether a call is pending (a timer is armed).
    pub fn pending(&self) -> bool {
        self.state.borrow().engine.pending()
    }
}

fn wrap(driver: Debounced) -> Function {
    js::callable(driver.into(), Array::of3(&"cancel".into(), &"flush".into(), &"pending".into()))
}

/// lodash's `debounce(func, wait, { leading, trailing, maxWait })`, plus
/// `flushOnHide`. Returns a function with `cancel()`, `flush()`, `pending()`.
#[wasm_bindgen(skip_typescript)]
pub fn debounce(func: JsValue, wait: JsValue, options: JsValue) -> Result<Function, JsValue> {
    let func = options::function(func, "func")?;
    let opts: TimingOptions = options::read(&options, "debounce options")?;
    let config = options::debounce_policy(options::wait(&wait)?, &opts)?;
    Ok(wrap(Debounced::new(func, options::build(config)?, opts.flush_on_hide)))
}

/// lodash's `throttle(func, wait, { leading, trailing })`, plus `flushOnHide`.
#[wasm_bindgen(skip_typescript)]
pub fn throttle(func: JsValue, wait: JsValue, options: JsValue) -> Result<Function, JsValue> {
    let func = options::function(func, "func")?;
    let opts: TimingOptions = options::read(&options, "throttle options")?;
    let config = options::throttle_policy(options::millis(&wait, "wait")?, &opts);
    Ok(wrap(Debounced::new(func, options::build(config)?, opts.flush_on_hide)))
}
