//! `debounceKeyed` in Chromium: per-key debounce behind one timer.
#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use support::{call, method, recorder, sleep};
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
async fn each_key_runs_once_with_its_own_last_arguments() {
    let r = recorder();
    let save = lull_web::debounce_keyed(r.func.clone().into(), 40.into(), JsValue::UNDEFINED).unwrap();
    call(&save, &["title".into(), "a".into()]);
    call(&save, &["body".into(), "x".into()]);
    call(&save, &["title".into(), "ab".into()]);
    call(&save, &[7.into(), "seven".into()]);
    assert!(method(&save, "pending", &["title".into()]).as_bool().unwrap());
    sleep(120).await;
    let mut calls: Vec<(String, String)> =
        r.calls.borrow().iter().map(|(_, a)| (format!("{:?}", a[0]), a[1].as_string().unwrap())).collect();
    calls.sort();
    assert_eq!(
        calls,
        [
            ("JsValue(\"body\")".into(), "x".into()),
            ("JsValue(\"title\")".into(), "ab".into()),
            ("JsValue(7)".into(), "seven".into())
        ]
    );
    assert!(!method(&save, "pending", &[]).as_bool().unwrap());
}

#[wasm_bindgen_test]
async fn flush_and_cancel_act_on_one_key_or_all() {
    let r = recorder();
    let save = lull_web::debounce_keyed(r.func.clone().into(), 10_000.into(), JsValue::UNDEFINED).unwrap();
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
