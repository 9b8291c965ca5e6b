//! `debounceKeyed`: one timer for many keys (per-field autosave, per-row sync).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use js_sys::{Array, Function, Reflect};
use lull_core::{Action, Keyed, WindowId};
use wasm_bindgen::prelude::*;

use crate::hide::HideHook;
use crate::js;
use crate::options::{self, TimingOptions};
use crate::shared::{self, Driver, Shell};

struct State {
    engine: Keyed<String>,
    func: Function,
    /// Per key: the key as given, and the latest call's `this` and arguments.
    calls: HashMap<(String, WindowId), (JsValue, JsValue, Array)>,
    shell: Shell<State>,
    _hide: Option<HideHook>,
}

impl Drop for State {
    fn drop(&mut self) {
        crate::live::dropped();
    }
}

impl Driver for State {
    type Engine = Keyed<String>;

    /// Call the function for each fire as `fn(key, ...args)`; then follow the deadline.
    fn pump(rc: &Rc<RefCell<Self>>) -> Result<(), JsValue> {
        let mut error = None;
        loop {
            let action = rc.borrow_mut().engine.poll_action();
            let Some((key, action)) = action else { break };
            match action {
                Action::Fire(fire) => {
                    let (func, call) = {
                        let mut s = rc.borrow_mut();
                        (s.func.clone(), s.calls.remove(&(key.clone(), fire.window)))
                    };
                    if let Some((given, this, args)) = call {
                        args.unshift(&given);
                        if let Err(thrown) = Reflect::apply(&func, &this, &args) {
                            // The first error goes to the caller; a later one is reported, never lost.
                            match error {
                                None => error = Some(thrown),
                                Some(_) => js::report_later(&thrown),
                            }
                        }
                    }
                    let _ = rc.borrow_mut().engine.run_succeeded(&key, fire.window, js::now());
                }
                Action::Dropped(dropped) => {
                    rc.borrow_mut().calls.remove(&(key.clone(), dropped.window));
                }
                Action::DeadLettered(_)
                | Action::RetryScheduled { .. }
                | Action::TimedOut { .. }
                | Action::Queued(_) => {}
            }
        }
        let mut s = rc.borrow_mut();
        shared::follow(rc, &mut s, false);
        error.map_or(Ok(()), Err)
    }

    fn parts(&mut self) -> (&mut Keyed<String>, &mut Shell<Self>) {
        (&mut self.engine, &mut self.shell)
    }
}

/// The driver behind a function made by `debounceKeyed`.
#[wasm_bindgen(skip_typescript)]
pub struct KeyedDebounced {
    state: Rc<RefCell<State>>,
}

/// Keys are strings or numbers (numbers as their string form, like object keys).
fn key_of(key: &JsValue) -> Result<String, JsValue> {
    if let Some(s) = key.as_string() {
        return Ok(s);
    }
    match key.as_f64() {
        Some(n) => Ok(js_sys::Number::from(n).to_string_with_radix(10)?.into()),
        None => Err(js::type_error("a key must be a string or a number")),
    }
}

#[wasm_bindgen]
impl KeyedDebounced {
    /// One call `(key, ...args)`: debounced per key.
    pub fn call(&self, this: JsValue, args: Array) -> Result<(), JsValue> {
        let given = args.shift();
        let key = key_of(&given)?;
        {
            let mut s = self.state.borrow_mut();
            let accepted = s.engine.event(key.clone(), js::now());
            // The latest call of each window (an older window of the key may still be due).
            s.calls.insert((key, accepted.window), (given, this, args));
        }
        State::pump(&self.state)
    }

    /// Drop the pending call of `key`, or of every key.
    pub fn cancel(&self, key: JsValue) -> Result<(), JsValue> {
        self.on_key_or_all(&key, Keyed::cancel, Keyed::cancel_all)
    }

    /// Run the pending call of `key`, or of every key, now.
    pub fn flush(&self, key: JsValue) -> Result<(), JsValue> {
        self.on_key_or_all(&key, Keyed::flush, Keyed::flush_all)
    }

    /// Forget `key`: drop its pending call (as `cancel`) and what it learned
    /// (an adaptive wait starts again). Idle adaptive keys are also forgotten
    /// on their own past `lull_core::MAX_IDLE_KEYS`, the one idle longest first.
    pub fn remove(&self, key: JsValue) -> Result<(), JsValue> {
        let key = key_of(&key)?;
        self.state.borrow_mut().engine.cancel(&key, js::now());
        let result = State::pump(&self.state);
        self.state.borrow_mut().engine.remove(&key);
        result
    }

    /// Whether `key` (or any key) has a call pending.
    pub fn pending(&self, key: JsValue) -> Result<bool, JsValue> {
        let s = self.state.borrow();
        if key.is_undefined() {
            return Ok(s.engine.keys().any(|k| s.engine.pending(k)));
        }
        Ok(s.engine.pending(&key_of(&key)?))
    }
}

impl KeyedDebounced {
    /// Apply `one` to `key`, or `all` to every key when `key` is `undefined`; then pump.
    fn on_key_or_all(
        &self,
        key: &JsValue,
        one: fn(&mut Keyed<String>, &String, u64),
        all: fn(&mut Keyed<String>, u64),
    ) -> Result<(), JsValue> {
        {
            let mut s = self.state.borrow_mut();
            if key.is_undefined() {
                all(&mut s.engine, js::now());
            } else {
                one(&mut s.engine, &key_of(key)?, js::now());
            }
        }
        State::pump(&self.state)
    }
}

/// `debounceKeyed(fn, wait, { leading, trailing, maxWait, flushOnHide })`:
/// `f(key, ...args)` debounces per key, with one timer for all keys; `fn` is
/// called as `fn(key, ...latestArgs)`. `cancel(key?)`, `flush(key?)`, `pending(key?)`,
/// `remove(key)`.
#[wasm_bindgen(js_name = debounceKeyed, skip_typescript)]
pub fn debounce_keyed(func: JsValue, wait: JsValue, options: JsValue) -> Result<Function, JsValue> {
    let func = options::function(func, "func")?;
    let opts = TimingOptions::read(&options)?;
    let config = options::debounce_policy(options::wait(&wait), &opts);
    let policy = options::build(config)?;
    let state = Rc::new_cyclic(|weak: &Weak<RefCell<State>>| {
        RefCell::new(State {
            engine: Keyed::new(policy, crate::seed()),
            func,
            calls: HashMap::new(),
            shell: Shell::new(weak),
            _hide: shared::hide_hook(opts.flush_on_hide, weak),
        })
    });
    crate::live::created();
    let methods = Array::of4(&"cancel".into(), &"flush".into(), &"pending".into(), &"remove".into());
    Ok(js::callable(KeyedDebounced { state }.into(), methods))
}
