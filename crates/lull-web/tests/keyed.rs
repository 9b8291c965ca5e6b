//! `debounceKeyed` in Chromium: per-key debounce behind one timer.
#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use support::lull;

use support::{Rules, Run, block, call, method, recorder, until};
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
async fn each_key_runs_once_with_its_own_last_arguments() {
    let r = recorder();
    let save = lull::debounce_keyed(r.func.clone().into(), 40.into(), JsValue::UNDEFINED).unwrap();
    let made: [(JsValue, &str); 4] =
        [("title".into(), "a"), ("body".into(), "x"), ("title".into(), "ab"), (7.into(), "seven")];
    for (key, value) in &made {
        r.call(&save, &[key.clone(), (*value).into()]);
    }
    assert!(method(&save, "pending", &["title".into()]).as_bool().unwrap());
    until("every key to settle", || !method(&save, "pending", &[]).as_bool().unwrap()).await;
    // Per key, lodash's rules over that key's calls as they were made: one run
    // with its last value — two for "title", had the machine held the thread
    // 40 ms between its calls.
    let calls = r.calls.borrow();
    let runs = r.runs.borrow();
    let name = |k: &JsValue| format!("{k:?}");
    let keys = ["JsValue(\"title\")", "JsValue(\"body\")", "JsValue(7)"];
    assert!(runs.iter().all(|(_, args)| keys.contains(&name(&args[0]).as_str())), "only these keys ran");
    for key in keys {
        let mine: Vec<usize> = (0..made.len()).filter(|i| name(&made[*i].0) == key).collect();
        let at: Vec<(f64, f64)> = mine.iter().map(|i| (calls[*i].at, calls[*i].end)).collect();
        let key_runs: Vec<Run> = runs
            .iter()
            .enumerate()
            .filter(|(_, (_, args))| name(&args[0]) == key)
            .map(|(n, (t, args))| {
                let value = args[1].as_string().unwrap();
                let made_by = mine.iter().position(|i| made[*i].1 == value).expect("a value this key was called with");
                Run { at: *t, arg: made_by, during: mine.iter().position(|i| calls[*i].runs.contains(&n)) }
            })
            .collect();
        if let Err(e) = support::check(Rules::debounce(40.0), &at, &key_runs) {
            panic!("key {key}: {e}");
        }
        let last = made[*mine.last().unwrap()].1;
        assert_eq!(
            runs.iter().rev().find(|(_, args)| name(&args[0]) == key).map(|(_, args)| args[1].as_string().unwrap()),
            Some(last.to_string()),
            "key {key} ran last with its last value"
        );
    }
}

#[wasm_bindgen_test]
async fn after_a_blocked_event_loop_each_burst_keeps_its_own_value() {
    // The old window of a key runs with its own last value (DESIGN.md), also
    // when the next call, not the late timer, is what ends it.
    let r = recorder();
    let save = lull::debounce_keyed(r.func.clone().into(), 20.into(), JsValue::UNDEFINED).unwrap();
    call(&save, &["k".into(), "old".into()]);
    block(60.0); // the timer is overdue but cannot run
    call(&save, &["k".into(), "new".into()]);
    until("the key to settle", || !method(&save, "pending", &[]).as_bool().unwrap()).await;
    let values: Vec<String> = r.runs.borrow().iter().map(|(_, args)| format!("{:?}", args.get(1))).collect();
    assert_eq!(values, ["Some(JsValue(\"old\"))", "Some(JsValue(\"new\"))"]);
}

#[wasm_bindgen_test]
async fn flush_and_cancel_act_on_one_key_or_all() {
    let r = recorder();
    let save = lull::debounce_keyed(r.func.clone().into(), 10_000.into(), JsValue::UNDEFINED).unwrap();
    for key in ["a", "b", "c"] {
        call(&save, &[key.into(), 1.into()]);
    }
    method(&save, "flush", &["a".into()]);
    assert_eq!(r.count(), 1);
    method(&save, "cancel", &["b".into()]);
    method(&save, "flush", &[]);
    assert_eq!(r.count(), 2, "b was cancelled, c flushed");
    assert!(!method(&save, "pending", &[]).as_bool().unwrap());
    let bad = save.call2(&JsValue::UNDEFINED, &js_sys::Object::new(), &1.into());
    assert!(bad.is_err(), "an object is not a key");
}

/// `remove(key)` drops the key's pending call and forgets the key (the bound
/// on idle keys with the learned wait is tested in lull-core, at the bound).
#[wasm_bindgen_test]
async fn remove_drops_a_keys_pending_call_and_forgets_it() {
    let r = recorder();
    let save = lull::debounce_keyed(r.func.clone().into(), 10_000.into(), JsValue::UNDEFINED).unwrap();
    call(&save, &["a".into(), 1.into()]);
    call(&save, &["b".into(), 2.into()]);
    method(&save, "remove", &["a".into()]);
    assert!(!method(&save, "pending", &["a".into()]).as_bool().unwrap());
    assert!(method(&save, "pending", &["b".into()]).as_bool().unwrap(), "other keys are untouched");
    method(&save, "flush", &[]);
    let runs: Vec<Vec<JsValue>> = r.runs.borrow().iter().map(|(_, args)| args.clone()).collect();
    assert_eq!(runs, [vec![JsValue::from("b"), 2.into()]], "only b ran: a's call was dropped");
}

/// When one step runs several keys' functions and more than one throws, the
/// first error goes to the caller and every later one is reported
/// (`reportError`), as `debounce` does: none is lost.
#[wasm_bindgen_test]
async fn every_error_of_a_step_reaches_the_caller_or_is_reported() {
    let reported = support::catch_reported();
    let boom = js_sys::Function::new_with_args("k", "throw new Error('boom ' + k);");
    let save = lull::debounce_keyed(boom.into(), 10_000.into(), JsValue::UNDEFINED).unwrap();
    call(&save, &["a".into()]);
    call(&save, &["b".into()]);
    let flush: js_sys::Function = js_sys::Reflect::get(&save, &"flush".into()).unwrap().unchecked_into();
    let thrown = flush.call0(&save).unwrap_err();
    assert_eq!(js_sys::Reflect::get(&thrown, &"message".into()).unwrap(), "boom a");
    support::until("the second error to be reported", || reported.messages() == ["boom b"]).await;
}
