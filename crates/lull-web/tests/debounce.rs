//! `debounce` / `throttle` through the JS API, in Chromium with real timers:
//! the core's lodash semantics table, lifetimes, `flushOnHide`, bad options.
#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use js_sys::{Array, Reflect};
use support::{block, call, collect_garbage, method, object, recorder, sleep, thrown};
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn debounce(r: &support::Recorder, wait: u32, opts: JsValue) -> js_sys::Function {
    lull_web::debounce(r.func.clone().into(), wait.into(), opts).unwrap()
}

fn pending(d: &js_sys::Function) -> bool {
    method(d, "pending", &[]).as_bool().unwrap()
}

#[wasm_bindgen_test]
async fn a_burst_runs_once_with_the_last_arguments_after_the_quiet_period() {
    let r = recorder();
    let d = debounce(&r, 50, JsValue::UNDEFINED);
    for i in 0..5 {
        call(&d, &[i.into()]);
        sleep(10).await;
    }
    assert_eq!(r.count(), 0, "nothing before the quiet period");
    assert!(pending(&d));
    sleep(120).await;
    assert_eq!(r.firsts(), [4.0]);
    assert!(!pending(&d));
}

#[wasm_bindgen_test]
async fn this_and_every_argument_reach_the_function() {
    let seen =
        js_sys::Function::new_with_args("a, b", "globalThis.__lullSeen = [this && this.name, a, b]; return a + b;");
    let d = lull_web::debounce(seen.into(), 0.into(), object(&[("leading", true.into())])).unwrap();
    let this = object(&[("name", "ctx".into())]);
    let result = d.call2(&this, &2.into(), &3.into()).unwrap();
    assert_eq!(result, 5);
    let recorded: Array = Reflect::get(&js_sys::global(), &"__lullSeen".into()).unwrap().into();
    assert_eq!(recorded.to_vec(), vec![JsValue::from("ctx"), 2.into(), 3.into()]);
}

#[wasm_bindgen_test]
async fn leading_and_trailing_with_one_call_runs_once() {
    let r = recorder();
    let d = debounce(&r, 30, object(&[("leading", true.into())]));
    assert_eq!(call(&d, &[1.into()]), 1, "lodash returns the leading result");
    sleep(100).await;
    assert_eq!(r.firsts(), [1.0]);
}

#[wasm_bindgen_test]
async fn trailing_runs_only_if_called_again() {
    let r = recorder();
    let d = debounce(&r, 30, object(&[("leading", true.into())]));
    call(&d, &[1.into()]);
    assert_eq!(call(&d, &[2.into()]), 1, "the previous result while waiting");
    sleep(100).await;
    assert_eq!(r.firsts(), [1.0, 2.0]);
}

#[wasm_bindgen_test]
async fn max_wait_runs_inside_a_call_in_a_tight_loop() {
    let r = recorder();
    let d = debounce(&r, 20, object(&[("maxWait", 60.into())]));
    // A synchronous loop: no timer can run, calls keep coming for 150 ms.
    let start = support::now();
    let mut i = 0;
    while support::now() - start < 150.0 {
        call(&d, &[i.into()]);
        i += 1;
    }
    assert!(r.count() >= 2, "maxWait fired inside calls: {}", r.count());
    sleep(100).await;
    let firsts = r.firsts();
    assert_eq!(*firsts.last().unwrap(), f64::from(i - 1), "the trailing run has the last call");
}

#[wasm_bindgen_test]
async fn cancel_drops_the_pending_call() {
    let r = recorder();
    let d = debounce(&r, 30, JsValue::UNDEFINED);
    call(&d, &[1.into()]);
    method(&d, "cancel", &[]);
    assert!(!pending(&d));
    sleep(80).await;
    assert_eq!(r.count(), 0);
}

#[wasm_bindgen_test]
async fn flush_runs_now_and_disarms() {
    let r = recorder();
    let d = throttle(&r, 40);
    call(&d, &[1.into()]); // leading
    call(&d, &[2.into()]);
    assert_eq!(method(&d, "flush", &[]), 2);
    assert_eq!(r.firsts(), [1.0, 2.0]);
    assert!(!pending(&d), "flush disarms (lodash#4648 leaves the timer armed)");
    sleep(100).await;
    assert_eq!(r.count(), 2);
}

fn throttle(r: &support::Recorder, wait: u32) -> js_sys::Function {
    lull_web::throttle(r.func.clone().into(), wait.into(), JsValue::UNDEFINED).unwrap()
}

#[wasm_bindgen_test]
async fn throttle_runs_at_most_once_per_wait() {
    let r = recorder();
    let d = throttle(&r, 50);
    for i in 0..30 {
        call(&d, &[i.into()]);
        sleep(10).await;
    }
    sleep(120).await;
    let runs = r.calls.borrow().iter().map(|(t, _)| *t).collect::<Vec<_>>();
    assert!((5..=10).contains(&runs.len()), "~300 ms at one run per 50 ms: {}", runs.len());
    for pair in runs.windows(2) {
        assert!(pair[1] - pair[0] >= 45.0, "runs {} ms apart", pair[1] - pair[0]);
    }
    assert_eq!(*r.firsts().last().unwrap(), 29.0, "the last call runs on the trailing edge");
}

#[wasm_bindgen_test]
async fn a_call_after_a_blocked_event_loop_starts_a_new_burst() {
    let r = recorder();
    let d = debounce(&r, 20, object(&[("leading", true.into())]));
    call(&d, &[1.into()]);
    block(60.0); // the timer is overdue but cannot run
    call(&d, &[2.into()]);
    assert_eq!(r.firsts(), [1.0, 2.0], "lodash#6003 would fold call 2 into the old burst");
    sleep(60).await;
    assert_eq!(r.count(), 2);
}

#[wasm_bindgen_test]
async fn a_pending_call_runs_even_if_the_caller_let_go() {
    let r = recorder();
    {
        let d = debounce(&r, 20, JsValue::UNDEFINED);
        call(&d, &[7.into()]);
    }
    collect_garbage().await;
    sleep(50).await;
    assert_eq!(r.firsts(), [7.0]);
}

#[wasm_bindgen_test]
async fn idle_debouncers_are_freed_when_unreachable() {
    collect_garbage().await;
    let before = lull_web::live_objects();
    let r = recorder();
    for i in 0..50 {
        let d = debounce(&r, 5, object(&[("flushOnHide", true.into())]));
        call(&d, &[i.into()]);
    }
    assert_eq!(lull_web::live_objects(), before + 50);
    sleep(60).await; // all ran: idle
    assert_eq!(r.count(), 50);
    collect_garbage().await;
    assert_eq!(lull_web::live_objects(), before, "every state (timer closure, listeners) was freed");
}

#[wasm_bindgen_test]
async fn flush_on_hide_runs_pending_work_when_the_page_hides() {
    let r = recorder();
    let d = debounce(&r, 10_000, object(&[("flushOnHide", true.into())]));
    call(&d, &["draft".into()]);
    let window = web_sys::window().unwrap();
    window.dispatch_event(&web_sys::Event::new("pagehide").unwrap()).unwrap();
    assert_eq!(r.count(), 1);
    assert!(!pending(&d));
}

#[wasm_bindgen_test]
fn bad_options_throw_clear_type_errors() {
    let r = recorder();
    let f = || r.func.clone().into();
    assert_eq!(
        thrown(|| lull_web::debounce(f(), (-5).into(), JsValue::UNDEFINED).map(Into::into)),
        "TypeError: lull: `wait` must be a finite number of milliseconds from 0 to 9007199254740991"
    );
    assert_eq!(
        thrown(|| lull_web::debounce(f(), "soon".into(), JsValue::UNDEFINED).map(Into::into)),
        "TypeError: lull: `wait` must be a number of milliseconds"
    );
    assert!(
        thrown(|| lull_web::debounce(f(), 5.into(), object(&[("leading", "yes".into())])).map(Into::into))
            .starts_with("TypeError: lull: debounce options:")
    );
    assert_eq!(
        thrown(|| lull_web::debounce(5.into(), 5.into(), JsValue::UNDEFINED).map(Into::into)),
        "TypeError: lull: `func` must be a function"
    );
    // Unknown keys are ignored, like lodash; a small maxWait is raised to wait.
    let ok = lull_web::debounce(f(), 5.into(), object(&[("colour", "blue".into()), ("maxWait", 1.into())]));
    assert!(ok.is_ok());
}

#[wasm_bindgen_test]
async fn an_error_thrown_by_the_function_reaches_the_caller() {
    let boom = js_sys::Function::new_with_args("x", "if (x === 'bad') throw new RangeError('bad ' + x); return x;");
    let d = lull_web::debounce(boom.into(), 0.into(), object(&[("leading", true.into())])).unwrap();
    let error = d.call1(&JsValue::UNDEFINED, &"bad".into()).unwrap_err();
    assert_eq!(Reflect::get(&error, &"name".into()).unwrap(), "RangeError");
    sleep(10).await;
    assert_eq!(call(&d, &["good".into()]), "good", "the debouncer still works after a throw");
}

#[wasm_bindgen_test]
async fn flush_on_hide_runs_pending_work_when_the_tab_is_hidden() {
    let r = recorder();
    let d = debounce(&r, 10_000, object(&[("flushOnHide", true.into())]));
    call(&d, &["draft".into()]);
    let document = web_sys::window().unwrap().document().unwrap();
    // Make the page report itself hidden, as a tab switch would.
    let hide = js_sys::Function::new_with_args(
        "doc",
        "Object.defineProperty(doc, 'visibilityState', { configurable: true, get: () => 'hidden' });",
    );
    hide.call1(&JsValue::NULL, &document).unwrap();
    document.dispatch_event(&web_sys::Event::new("visibilitychange").unwrap()).unwrap();
    js_sys::Reflect::delete_property(&document, &"visibilityState".into()).unwrap();
    assert_eq!(r.firsts().len(), 1);
    assert!(!pending(&d));
    // A visibilitychange to visible does nothing.
    call(&d, &["more".into()]);
    document.dispatch_event(&web_sys::Event::new("visibilitychange").unwrap()).unwrap();
    assert_eq!(r.count(), 1);
    method(&d, "cancel", &[]);
}
