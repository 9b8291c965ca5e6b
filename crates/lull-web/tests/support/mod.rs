//! Helpers for the browser tests: real timers, a recording function.
#![allow(dead_code)]

use std::cell::RefCell;
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

/// Each recorded call: when (ms) and its arguments.
pub type Calls = Rc<RefCell<Vec<(f64, Vec<JsValue>)>>>;

/// A JS function that records each call's arguments (and `this`) and returns its first argument.
pub struct Recorder {
    pub func: Function,
    pub calls: Calls,
    _closure: Closure<dyn FnMut(Array) -> JsValue>,
}

pub fn recorder() -> Recorder {
    let calls: Calls = Rc::default();
    let log = calls.clone();
    let closure = Closure::new(move |args: Array| {
        log.borrow_mut().push((now(), args.to_vec()));
        args.get(0)
    });
    // Collect variadic arguments into one array for the Rust closure.
    let wrap = Function::new_with_args("inner", "return function (...args) { return inner(args); }");
    let func: Function = wrap.call1(&JsValue::NULL, closure.as_ref()).unwrap().unchecked_into();
    Recorder { func, calls, _closure: closure }
}

impl Recorder {
    pub fn count(&self) -> usize {
        self.calls.borrow().len()
    }

    /// The first argument of every call, as numbers.
    pub fn firsts(&self) -> Vec<f64> {
        self.calls.borrow().iter().map(|(_, args)| args[0].as_f64().unwrap_or(f64::NAN)).collect()
    }
}

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
