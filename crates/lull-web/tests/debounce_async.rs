//! `debounceAsync` in Chromium: every caller settles with its window's outcome.
#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use js_sys::{Array, Function, Promise, Reflect};
use support::{call, method, object, sleep};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// An async function taking `ms` to answer `"r" + x`, honouring its AbortSignal,
/// logging starts and aborts to the returned array.
fn slow(ms: u32) -> (Function, Array) {
    let log = Array::new();
    let make = Function::new_with_args(
        "log, ms",
        "return (x, signal) => new Promise((resolve, reject) => {
            log.push('start ' + x);
            const t = setTimeout(() => { log.push('end ' + x); resolve('r' + x); }, ms);
            signal.addEventListener('abort', () => { clearTimeout(t); log.push('abort ' + x); reject(signal.reason); });
        });",
    );
    (make.call2(&JsValue::NULL, &log, &ms.into()).unwrap().unchecked_into(), log)
}

fn promise(value: JsValue) -> JsFuture {
    JsFuture::from(value.unchecked_into::<Promise>())
}

fn error_name(error: &JsValue) -> String {
    Reflect::get(error, &"name".into()).unwrap().as_string().unwrap_or_default()
}

fn log(log: &Array) -> Vec<String> {
    log.iter().map(|v| v.as_string().unwrap()).collect()
}

fn debounce_async(func: &Function, wait: u32, opts: JsValue) -> Function {
    lull_web::debounce_async(func.clone().into(), wait.into(), opts).unwrap()
}

#[wasm_bindgen_test]
async fn every_caller_of_a_window_gets_its_result() {
    let (f, calls) = slow(10);
    let d = debounce_async(&f, 30, JsValue::UNDEFINED);
    let p1 = promise(call(&d, &[1.into()]));
    let p2 = promise(call(&d, &[2.into()]));
    let p3 = promise(call(&d, &[3.into()]));
    assert_eq!(p1.await.unwrap(), "r3");
    assert_eq!(p2.await.unwrap(), "r3");
    assert_eq!(p3.await.unwrap(), "r3");
    assert_eq!(log(&calls), ["start 3", "end 3"], "one run, with the last arguments");
}

#[wasm_bindgen_test]
async fn a_rejection_reaches_every_caller_of_the_window() {
    let f = Function::new_with_args("x", "return Promise.reject(new Error('down ' + x));");
    let d = debounce_async(&f, 10, JsValue::UNDEFINED);
    let p1 = promise(call(&d, &[1.into()]));
    let p2 = promise(call(&d, &[2.into()]));
    for p in [p1, p2] {
        let error = p.await.unwrap_err();
        assert_eq!(Reflect::get(&error, &"message".into()).unwrap(), "down 2");
    }
    // A synchronous throw rejects too.
    let f = Function::new_with_args("", "throw new TypeError('sync');");
    let d = debounce_async(&f, 0, JsValue::UNDEFINED);
    assert_eq!(error_name(&promise(call(&d, &[])).await.unwrap_err()), "TypeError");
}

#[wasm_bindgen_test]
async fn cancel_rejects_pending_callers_with_an_abort_error() {
    let (f, calls) = slow(10);
    let d = debounce_async(&f, 30, JsValue::UNDEFINED);
    let p = promise(call(&d, &[1.into()]));
    method(&d, "cancel", &[]);
    assert_eq!(error_name(&p.await.unwrap_err()), "AbortError");
    sleep(60).await;
    assert!(log(&calls).is_empty());
    assert!(!method(&d, "pending", &[]).as_bool().unwrap());
}

#[wasm_bindgen_test]
async fn flush_settles_pending_callers_now() {
    let (f, _) = slow(5);
    let d = debounce_async(&f, 10_000, JsValue::UNDEFINED);
    let p = promise(call(&d, &[9.into()]));
    method(&d, "flush", &[]);
    assert_eq!(p.await.unwrap(), "r9");
}

#[wasm_bindgen_test]
async fn an_abort_signal_option_cancels() {
    let (f, calls) = slow(5);
    let controller = web_sys::AbortController::new().unwrap();
    let d = debounce_async(&f, 30, object(&[("signal", controller.signal().into())]));
    let p = promise(call(&d, &[1.into()]));
    controller.abort();
    assert_eq!(error_name(&p.await.unwrap_err()), "AbortError");
    let later = promise(call(&d, &[2.into()]));
    assert_eq!(error_name(&later.await.unwrap_err()), "AbortError", "calls after the abort reject at once");
    sleep(60).await;
    assert!(log(&calls).is_empty());
}

#[wasm_bindgen_test]
async fn latest_wins_aborts_the_stale_run_and_rejects_its_callers() {
    let (f, calls) = slow(100);
    let d = debounce_async(&f, 10, JsValue::UNDEFINED);
    let first = promise(call(&d, &[1.into()]));
    sleep(40).await; // run 1 is in flight
    let second = promise(call(&d, &[2.into()]));
    assert_eq!(second.await.unwrap(), "r2");
    assert_eq!(error_name(&first.await.unwrap_err()), "AbortError");
    assert_eq!(log(&calls), ["start 1", "abort 1", "start 2", "end 2"], "the run got an AbortSignal");
}

#[wasm_bindgen_test]
async fn queue_mode_runs_the_next_window_after_the_current_one() {
    let (f, calls) = slow(60);
    let d = debounce_async(&f, 10, object(&[("mode", "queue".into())]));
    let first = promise(call(&d, &[1.into()]));
    sleep(30).await; // run 1 is in flight
    let second = promise(call(&d, &[2.into()]));
    let third = promise(call(&d, &[3.into()]));
    assert_eq!(first.await.unwrap(), "r1");
    assert_eq!(second.await.unwrap(), "r3");
    assert_eq!(third.await.unwrap(), "r3");
    assert_eq!(log(&calls), ["start 1", "end 1", "start 3", "end 3"], "never two runs at once");
}

#[wasm_bindgen_test]
fn a_bad_mode_is_a_type_error() {
    let (f, _) = slow(1);
    let error = lull_web::debounce_async(f.into(), 5.into(), object(&[("mode", "race".into())])).unwrap_err();
    assert_eq!(error_name(&error), "TypeError");
}
