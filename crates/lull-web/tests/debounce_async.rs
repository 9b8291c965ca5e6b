//! `debounceAsync` in Chromium: every caller settles with its window's outcome.
#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use support::lull;

use js_sys::{Array, Function, Promise, Reflect};
use support::{CLOCK_SLACK_MS, Schedule, block, call, method, object, one_window, retrying, sleep, timed, until};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// An async function taking `ms` to answer `"r" + x`, honouring its AbortSignal,
/// logging starts and aborts to the returned array.
fn slow(ms: u32) -> (Function, Array) {
    let (f, log, _) = slow_holding(ms, &[]);
    (f, log)
}

/// [`slow`], but the runs for the arguments in `held` answer only when the
/// test calls `release(x)` on the third value: "still in flight" by
/// construction, not by a timer outlasting the test's sleep. Each log entry's
/// `performance.now()` is in the log's `times` property.
fn slow_holding(ms: u32, held: &[i32]) -> (Function, Array, Function) {
    let log = Array::new();
    let held: Array = held.iter().map(|x| JsValue::from(*x)).collect();
    let make = Function::new_with_args(
        "log, ms, held",
        "log.times = [];
        const note = (entry) => { log.push(entry); log.times.push(performance.now()); };
        const gates = new Map();
        const f = (x, signal) => new Promise((resolve, reject) => {
            note('start ' + x);
            const end = () => { note('end ' + x); resolve('r' + x); };
            const t = held.includes(x) ? (gates.set(x, end), undefined) : setTimeout(end, ms);
            signal.addEventListener('abort', () => { clearTimeout(t); gates.delete(x); note('abort ' + x); reject(signal.reason); });
        });
        const release = (x) => { const end = gates.get(x); gates.delete(x); end(); };
        return [f, release];",
    );
    let made: Array = make.call3(&JsValue::NULL, &log, &ms.into(), &held).unwrap().unchecked_into();
    (made.get(0).unchecked_into(), log, made.get(1).unchecked_into())
}

/// When each entry of a [`slow_holding`] log was made.
fn times(log: &Array) -> Vec<f64> {
    let times: Array = Reflect::get(log, &"times".into()).unwrap().unchecked_into();
    times.iter().map(|t| t.as_f64().unwrap()).collect()
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
    lull::debounce_async(func.clone().into(), wait.into(), opts).unwrap()
}

#[wasm_bindgen_test]
async fn every_caller_of_a_window_gets_its_result() {
    retrying(|| async {
        let (f, calls) = slow(10);
        let d = debounce_async(&f, 30, JsValue::UNDEFINED);
        let mut at = Vec::new();
        let mut promises = Vec::new();
        for x in 1..=3 {
            let (p, when) = timed(|| promise(call(&d, &[x.into()])));
            promises.push(p);
            at.push(when);
        }
        if let Err(why) = one_window(&at, 30.0) {
            method(&d, "cancel", &[]);
            return Schedule::Broke(why);
        }
        for p in promises {
            assert_eq!(p.await.unwrap(), "r3");
        }
        assert_eq!(log(&calls), ["start 3", "end 3"], "one run, with the last arguments");
        let (started, last) = (times(&calls)[0], at[2].0);
        assert!(started >= last - CLOCK_SLACK_MS + 30.0, "ran {:.1} ms after the last call", started - last);
        Schedule::Held
    })
    .await;
}

#[wasm_bindgen_test]
async fn after_a_blocked_event_loop_each_window_runs_with_its_own_arguments() {
    // A call after the deadline starts a new window; the old one still runs
    // with its own last arguments, and its callers get that result (DESIGN.md).
    let f = Function::new_with_args("x", "return 'r' + x;");
    let d = debounce_async(&f, 20, JsValue::UNDEFINED);
    let first = promise(call(&d, &[1.into()]));
    block(60.0); // the timer is overdue but cannot run
    let second = promise(call(&d, &[2.into()]));
    assert_eq!(first.await.unwrap(), "r1");
    assert_eq!(second.await.unwrap(), "r2");
}

#[wasm_bindgen_test]
async fn a_rejection_reaches_every_caller_of_the_window() {
    retrying(|| async {
        let f = Function::new_with_args("x", "return Promise.reject(new Error('down ' + x));");
        let d = debounce_async(&f, 30, JsValue::UNDEFINED);
        let (p1, at1) = timed(|| promise(call(&d, &[1.into()])));
        let (p2, at2) = timed(|| promise(call(&d, &[2.into()])));
        if let Err(why) = one_window(&[at1, at2], 30.0) {
            method(&d, "cancel", &[]);
            return Schedule::Broke(why);
        }
        for p in [p1, p2] {
            let error = p.await.unwrap_err();
            assert_eq!(Reflect::get(&error, &"message".into()).unwrap(), "down 2");
        }
        Schedule::Held
    })
    .await;
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
    // Run 1 answers only when released, so it is in flight when call 2 comes.
    let (f, calls, _release) = slow_holding(5, &[1]);
    let d = debounce_async(&f, 10, JsValue::UNDEFINED);
    let first = promise(call(&d, &[1.into()]));
    until("run 1 to start", || log(&calls) == ["start 1"]).await;
    let second = promise(call(&d, &[2.into()]));
    assert_eq!(second.await.unwrap(), "r2");
    assert_eq!(error_name(&first.await.unwrap_err()), "AbortError");
    assert_eq!(log(&calls), ["start 1", "abort 1", "start 2", "end 2"], "the run got an AbortSignal");
}

#[wasm_bindgen_test]
async fn queue_mode_runs_the_next_window_after_the_current_one() {
    // Run 1 answers only when released: calls 2 and 3 come while it is in flight.
    let (f, calls, release) = slow_holding(5, &[1]);
    let d = debounce_async(&f, 10, object(&[("mode", "queue".into())]));
    let first = promise(call(&d, &[1.into()]));
    until("run 1 to start", || log(&calls) == ["start 1"]).await;
    let second = promise(call(&d, &[2.into()]));
    let third = promise(call(&d, &[3.into()]));
    // Past the next window's deadline (its timer was armed first, so it has
    // gone off by now): the window waits for run 1 instead of starting.
    sleep(50).await;
    assert_eq!(log(&calls), ["start 1"], "never two runs at once");
    release.call1(&JsValue::NULL, &1.into()).unwrap();
    assert_eq!(first.await.unwrap(), "r1");
    assert_eq!(second.await.unwrap(), "r3");
    assert_eq!(third.await.unwrap(), "r3");
    assert_eq!(log(&calls), ["start 1", "end 1", "start 3", "end 3"], "the next window ran after run 1");
}

#[wasm_bindgen_test]
fn a_bad_mode_is_a_type_error() {
    let (f, _) = slow(1);
    let error = lull::debounce_async(f.into(), 5.into(), object(&[("mode", "race".into())])).unwrap_err();
    assert_eq!(error_name(&error), "TypeError");
}

/// `mode: "queue"` with `timeout`: a run whose promise never settles is over
/// after `timeout` (its callers reject with a `TimeoutError`, its signal
/// aborts), and the window queued behind it runs — nothing pins the debouncer.
#[wasm_bindgen_test]
async fn a_run_that_never_settles_times_out_and_frees_the_queue() {
    let (f, log, _release) = slow_holding(5, &[1]); // run 1 is held: it never settles on its own
    let options = object(&[("mode", "queue".into()), ("timeout", 60.into())]);
    let d = lull::debounce_async(f.into(), 0.into(), options).unwrap();
    let started = support::now(); // no later than the run's start
    let first = promise(call(&d, &[1.into()]));
    method(&d, "flush", &[]);
    let second = promise(call(&d, &[2.into()])); // queued behind the held run
    let error = first.await.unwrap_err();
    assert_eq!(error_name(&error), "TimeoutError");
    assert!(support::now() - started >= 60.0 - CLOCK_SLACK_MS, "not before the timeout");
    assert_eq!(second.await.unwrap(), "r2", "the queued window ran after the timeout");
    let entries: Vec<String> = log.iter().map(|e| e.as_string().unwrap()).collect();
    assert_eq!(entries, ["start 1", "abort 1", "start 2", "end 2"], "the timed-out run's signal aborted");
    assert!(!method(&d, "pending", &[]).as_bool().unwrap());
    let bad = lull::debounce_async(Function::new_no_args("").into(), 0.into(), object(&[("timeout", "soon".into())]));
    assert!(bad.is_err(), "a timeout that is not a number of ms is refused");
    let zero = lull::debounce_async(Function::new_no_args("").into(), 0.into(), object(&[("timeout", 0.into())]));
    let message = Reflect::get(&zero.expect_err("refused"), &"message".into()).unwrap();
    assert_eq!(message, "lull: run_timeout must be at least 1 ms");
}
