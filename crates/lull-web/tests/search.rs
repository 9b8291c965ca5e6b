//! `bindSearch` on a real <input> in Chromium, with real DOM events and timers.
#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use js_sys::{Array, Function, Object, Reflect};
use support::{collect_garbage, object, sleep};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;
use web_sys::{CompositionEvent, Event, HtmlInputElement, KeyboardEvent, KeyboardEventInit};

wasm_bindgen_test_configure!(run_in_browser);

struct Page {
    input: HtmlInputElement,
    /// What happened, in order: "search q", "abort q", "results q", "error q", "pending b".
    log: Array,
    /// The options handed to bindSearch (search, onResults, onError, onPending).
    options: Object,
}

/// An input in the page and callbacks that log. `delays` maps a query to how
/// long its request takes (default 10 ms); `honour_abort: false` makes a
/// server that answers even after the client aborted.
fn page(delays: &[(&str, u32)], honour_abort: bool) -> Page {
    let document = web_sys::window().unwrap().document().unwrap();
    let input: HtmlInputElement = document.create_element("input").unwrap().unchecked_into();
    document.body().unwrap().append_child(&input).unwrap();
    let log = Array::new();
    let delays_js = Object::new();
    for (q, ms) in delays {
        Reflect::set(&delays_js, &(*q).into(), &(*ms).into()).unwrap();
    }
    let make = Function::new_with_args(
        "log, delays, honour",
        "return {
            search: (q, signal) => new Promise((resolve, reject) => {
                log.push('search ' + q);
                const t = setTimeout(() => resolve(['hit:' + q]), delays[q] ?? 10);
                signal.addEventListener('abort', () => {
                    log.push('abort ' + q);
                    if (honour) { clearTimeout(t); reject(signal.reason); }
                });
            }),
            onResults: (results, q) => log.push('results ' + q + ' ' + results.join()),
            onError: (e, q) => log.push('error ' + q + ' ' + e.message),
            onPending: (p) => log.push('pending ' + p),
        };",
    );
    let options: Object = make.call3(&JsValue::NULL, &log, &delays_js, &honour_abort.into()).unwrap().unchecked_into();
    Page { input, log, options }
}

impl Page {
    fn bind(&self, extra: &[(&str, JsValue)]) -> lull_web::SearchBinding {
        let options = Object::assign(&Object::new(), &self.options);
        for (k, v) in extra {
            Reflect::set(&options, &(*k).into(), v).unwrap();
        }
        lull_web::bind_search(self.input.clone().into(), options.into()).unwrap()
    }

    fn type_text(&self, value: &str) {
        self.input.set_value(value);
        self.input.dispatch_event(&Event::new("input").unwrap()).unwrap();
    }

    fn compose(&self, kind: &str) {
        self.input.dispatch_event(&CompositionEvent::new(kind).unwrap()).unwrap();
    }

    fn key(&self, key: &str) {
        let init = KeyboardEventInit::new();
        init.set_key(key);
        self.input
            .dispatch_event(&KeyboardEvent::new_with_keyboard_event_init_dict("keydown", &init).unwrap())
            .unwrap();
    }

    /// The log without the pending notifications.
    fn events(&self) -> Vec<String> {
        self.log.iter().map(|v| v.as_string().unwrap()).filter(|e| !e.starts_with("pending")).collect()
    }

    fn all(&self) -> Vec<String> {
        self.log.iter().map(|v| v.as_string().unwrap()).collect()
    }
}

#[wasm_bindgen_test]
async fn typing_searches_once_for_the_settled_query() {
    let p = page(&[], true);
    let _binding = p.bind(&[("wait", 60.into())]);
    for q in ["r", "ru", "rus", "rust"] {
        p.type_text(q);
        sleep(20).await;
    }
    assert!(p.events().is_empty(), "still typing");
    sleep(150).await;
    assert_eq!(p.events(), ["search rust", "results rust hit:rust"]);
    assert_eq!(p.all().first().map(String::as_str), Some("pending true"));
    assert_eq!(p.all().last().map(String::as_str), Some("pending false"));
}

#[wasm_bindgen_test]
async fn no_search_mid_composition_one_at_composition_end() {
    let p = page(&[], true);
    let _binding = p.bind(&[("wait", 30.into())]);
    p.compose("compositionstart");
    for q in ["k", "ka", "かな"] {
        p.type_text(q);
        sleep(50).await; // longer than wait: would search if not composing
    }
    p.key("Enter"); // the IME's Enter confirms the composition, not the search
    assert!(p.events().is_empty(), "nothing while composing: {:?}", p.events());
    p.input.set_value("かな");
    p.compose("compositionend");
    sleep(80).await;
    assert_eq!(p.events(), ["search かな", "results かな hit:かな"]);
}

#[wasm_bindgen_test]
async fn enter_searches_now_and_escape_cancels() {
    let p = page(&[], true);
    let _binding = p.bind(&[("wait", 10_000.into())]);
    p.type_text("now");
    p.key("Enter");
    sleep(40).await;
    assert_eq!(p.events(), ["search now", "results now hit:now"]);
    p.type_text("later");
    p.key("Escape");
    sleep(60).await;
    assert_eq!(p.events().len(), 2, "Escape dropped the pending query");
}

#[wasm_bindgen_test]
async fn short_and_unchanged_queries_are_skipped() {
    let p = page(&[], true);
    let _binding = p.bind(&[("wait", 20.into()), ("minLength", 3.into())]);
    p.type_text("ab");
    sleep(50).await;
    assert!(p.events().is_empty(), "under minLength");
    p.type_text("abc");
    sleep(50).await;
    p.type_text("abc  "); // only whitespace changed: trimmed, same query
    sleep(50).await;
    assert_eq!(p.events(), ["search abc", "results abc hit:abc"]);
}

#[wasm_bindgen_test]
async fn a_stale_request_is_aborted_through_its_signal() {
    let p = page(&[("slow", 200)], true);
    let _binding = p.bind(&[("wait", 10.into())]);
    p.type_text("slow");
    sleep(40).await; // "slow" is in flight
    p.type_text("fast");
    sleep(80).await;
    assert_eq!(p.events(), ["search slow", "abort slow", "search fast", "results fast hit:fast"]);
}

#[wasm_bindgen_test]
async fn an_out_of_order_response_is_never_delivered() {
    // A server that ignores aborts: "old" answers after "new".
    let p = page(&[("old", 120), ("new", 10)], false);
    let _binding = p.bind(&[("wait", 10.into())]);
    p.type_text("old");
    sleep(30).await;
    p.type_text("new");
    sleep(200).await;
    assert_eq!(p.events(), ["search old", "abort old", "search new", "results new hit:new"]);
}

#[wasm_bindgen_test]
async fn the_cache_answers_a_repeated_query_without_a_request() {
    let p = page(&[], true);
    let _binding = p.bind(&[("wait", 10.into()), ("cache", 4.into())]);
    for q in ["rust", "rus", "rust"] {
        p.type_text(q);
        sleep(50).await;
    }
    assert_eq!(
        p.events(),
        ["search rust", "results rust hit:rust", "search rus", "results rus hit:rus", "results rust hit:rust"]
    );
}

#[wasm_bindgen_test]
async fn a_failed_search_reaches_on_error() {
    let p = page(&[], true);
    let failing = Function::new_with_args("q", "return Promise.reject(new Error('offline'));");
    let _binding = p.bind(&[("wait", 10.into()), ("search", failing.into())]);
    p.type_text("x");
    sleep(50).await;
    assert_eq!(p.events(), ["error x offline"]);
}

#[wasm_bindgen_test]
async fn destroy_leaves_no_timer_listener_or_state() {
    collect_garbage().await;
    let before = lull_web::live_objects();
    let p = page(&[], true);
    {
        let binding = p.bind(&[("wait", 30.into())]);
        p.type_text("pending");
        assert!(binding.pending());
        binding.destroy();
        assert!(!binding.pending(), "no timer armed");
    }
    p.type_text("after");
    p.key("Enter");
    sleep(80).await;
    assert!(p.events().is_empty(), "no listener left: {:?}", p.events());
    collect_garbage().await;
    assert_eq!(lull_web::live_objects(), before, "the binding's state and closures were freed");
}

#[wasm_bindgen_test]
fn bad_search_options_throw_type_errors() {
    let p = page(&[], true);
    let no_search = lull_web::bind_search(p.input.clone().into(), object(&[("wait", 10.into())]));
    assert!(no_search.is_err());
    let not_input = lull_web::bind_search(Object::new().into(), p.options.clone().into());
    assert!(not_input.is_err());
}

#[wasm_bindgen_test]
async fn auto_wait_learns_a_fast_typists_rhythm() {
    let p = page(&[], true);
    let _binding = p.bind(&[("wait", "auto".into())]);
    let mut typed = String::new();
    for c in "lullaby".chars() {
        typed.push(c);
        p.type_text(&typed);
        sleep(40).await;
    }
    // Seven 40 ms gaps learned: 2.5 x 40 ms = 100 ms, not the initial 300 ms.
    let last_key = support::now() - 40.0;
    while p.events().is_empty() && support::now() - last_key < 1_000.0 {
        sleep(5).await;
    }
    let waited = support::now() - last_key;
    assert_eq!(p.events().first().map(String::as_str), Some("search lullaby"));
    assert!((90.0..250.0).contains(&waited), "searched {waited:.0} ms after the last key");
}
