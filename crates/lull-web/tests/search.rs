//! `bindSearch` on a real <input> in Chromium, with real DOM events and timers.
#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use support::lull;

use js_sys::{Array, Function, Object, Reflect};
use support::{
    CLOCK_SLACK_MS, Schedule, block, collect_garbage, object, one_window, retrying, sleep, timed, until, watch_lag,
};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;
use web_sys::{CompositionEvent, Event, HtmlInputElement, KeyboardEvent, KeyboardEventInit};

wasm_bindgen_test_configure!(run_in_browser);

struct Page {
    input: HtmlInputElement,
    /// What happened, in order: "search q", "abort q", "results q", "error q", "pending b";
    /// its `times` property holds when (`performance.now()`).
    log: Array,
    /// The options handed to bindSearch (search, onResults, onError, onPending).
    options: Object,
    /// `release(q)`: a [`HELD`] request for `q` answers now.
    release: Function,
}

/// A request delay meaning: answer only when the test calls [`Page::release`]
/// (in flight for as long as the test needs, whatever the machine's timers do).
const HELD: u32 = u32::MAX;

/// An input in the page and callbacks that log. `delays` maps a query to how
/// long its request takes (default 10 ms; [`HELD`]: until released);
/// `honour_abort: false` makes a server that answers even after the client aborted.
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
        "log, delays, honour, held",
        "log.times = [];
        const note = (entry) => { log.push(entry); log.times.push(performance.now()); };
        const gates = new Map();
        const options = {
            search: (q, signal) => new Promise((resolve, reject) => {
                note('search ' + q);
                const answer = () => resolve(['hit:' + q]);
                const ms = delays[q] ?? 10;
                const t = ms === held ? (gates.set(q, answer), undefined) : setTimeout(answer, ms);
                signal.addEventListener('abort', () => {
                    note('abort ' + q);
                    if (honour) { clearTimeout(t); gates.delete(q); reject(signal.reason); }
                });
            }),
            onResults: (results, q) => note('results ' + q + ' ' + results.join()),
            onError: (e, q) => note('error ' + q + ' ' + e.message),
            onPending: (p) => note('pending ' + p),
        };
        const release = (q) => { const answer = gates.get(q); gates.delete(q); answer(); };
        return [options, release];",
    );
    let args: [JsValue; 4] = [log.clone().into(), delays_js.into(), honour_abort.into(), HELD.into()];
    let made: Array = make.apply(&JsValue::NULL, &args.iter().collect::<Array>()).unwrap().unchecked_into();
    Page { input, log, options: made.get(0).unchecked_into(), release: made.get(1).unchecked_into() }
}

impl Page {
    fn bind(&self, extra: &[(&str, JsValue)]) -> lull::SearchBinding {
        let options = Object::assign(&Object::new(), &self.options);
        for (k, v) in extra {
            Reflect::set(&options, &(*k).into(), v).unwrap();
        }
        lull::bind_search(self.input.clone().into(), options.into()).unwrap()
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

    /// When `entry` was first logged.
    fn time_of(&self, entry: &str) -> f64 {
        let at = self.all().iter().position(|e| e == entry).unwrap_or_else(|| panic!("no {entry:?} in the log"));
        let times: Array = Reflect::get(&self.log, &"times".into()).unwrap().unchecked_into();
        times.get(at as u32).as_f64().unwrap()
    }

    /// Answer the [`HELD`] request for `query` now.
    fn release(&self, query: &str) {
        self.release.call1(&JsValue::NULL, &query.into()).unwrap();
    }

    /// Wait until the log (without pending notifications) has `n` entries.
    async fn until_events(&self, n: usize) {
        until(&format!("{n} events"), || self.events().len() >= n).await;
    }
}

#[wasm_bindgen_test]
async fn typing_searches_once_for_the_settled_query() {
    retrying(|| async {
        let p = page(&[], true);
        let binding = p.bind(&[("wait", 60.into())]);
        let mut typed = Vec::new();
        for (i, q) in ["r", "ru", "rus", "rust"].into_iter().enumerate() {
            if i > 0 {
                sleep(20).await;
            }
            typed.push(timed(|| p.type_text(q)).1);
        }
        // A `sleep(20)` that took 60 ms lets the prefix be searched, rightly.
        if let Err(why) = one_window(&typed, 60.0) {
            binding.destroy();
            return Schedule::Broke(why);
        }
        assert!(p.events().is_empty(), "still typing");
        until("the search to end", || p.all().last().map(String::as_str) == Some("pending false")).await;
        assert_eq!(p.events(), ["search rust", "results rust hit:rust"]);
        assert_eq!(p.all().first().map(String::as_str), Some("pending true"));
        let (searched, last_key) = (p.time_of("search rust"), typed[3].0);
        assert!(
            searched >= last_key - CLOCK_SLACK_MS + 60.0,
            "searched {:.1} ms after the last key",
            searched - last_key
        );
        Schedule::Held
    })
    .await;
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
    p.until_events(2).await;
    assert_eq!(p.events(), ["search かな", "results かな hit:かな"]);
}

#[wasm_bindgen_test]
async fn enter_searches_now_and_escape_cancels() {
    let p = page(&[], true);
    let _binding = p.bind(&[("wait", 10_000.into())]);
    p.type_text("now");
    p.key("Enter");
    assert_eq!(p.events(), ["search now"], "Enter searched at once");
    p.until_events(2).await;
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
    p.until_events(2).await;
    p.type_text("abc  "); // only whitespace changed: trimmed, same query
    sleep(50).await;
    assert_eq!(p.events(), ["search abc", "results abc hit:abc"]);
}

#[wasm_bindgen_test]
async fn a_stale_request_is_aborted_through_its_signal() {
    let p = page(&[("slow", HELD)], true);
    let _binding = p.bind(&[("wait", 10.into())]);
    p.type_text("slow");
    p.until_events(1).await; // "slow" is in flight, and stays so
    p.type_text("fast");
    p.until_events(4).await;
    assert_eq!(p.events(), ["search slow", "abort slow", "search fast", "results fast hit:fast"]);
}

#[wasm_bindgen_test]
async fn an_out_of_order_response_is_never_delivered() {
    // A server that ignores aborts: "old" answers after "new".
    let p = page(&[("old", HELD), ("new", 10)], false);
    let _binding = p.bind(&[("wait", 10.into())]);
    p.type_text("old");
    p.until_events(1).await; // "old" is in flight
    p.type_text("new");
    p.until_events(4).await;
    p.release("old");
    sleep(20).await; // its answer has settled (promise jobs run before any timer)
    assert_eq!(p.events(), ["search old", "abort old", "search new", "results new hit:new"]);
}

#[wasm_bindgen_test]
async fn after_a_blocked_event_loop_the_old_query_is_searched_then_the_new_one() {
    // A key after the deadline starts a new window; the old one still searches
    // its own query (DESIGN.md), and the new query then supersedes it.
    let p = page(&[("ab", HELD)], true);
    let _binding = p.bind(&[("wait", 20.into())]);
    p.type_text("ab");
    block(60.0); // the timer is overdue but cannot run
    p.type_text("abc");
    p.until_events(4).await;
    assert_eq!(p.events(), ["search ab", "abort ab", "search abc", "results abc hit:abc"]);
}

#[wasm_bindgen_test]
async fn the_cache_answers_a_repeated_query_without_a_request() {
    let p = page(&[], true);
    let _binding = p.bind(&[("wait", 10.into()), ("cache", 4.into())]);
    // Each query once the previous one has its results.
    for (q, events) in [("rust", 2), ("rus", 4), ("rust", 5)] {
        p.type_text(q);
        p.until_events(events).await;
    }
    sleep(50).await; // room for a request the cache should have saved
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
    p.until_events(1).await;
    assert_eq!(p.events(), ["error x offline"]);
}

#[wasm_bindgen_test]
async fn destroy_leaves_no_timer_listener_or_state() {
    collect_garbage().await;
    let before = lull::live_objects();
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
    assert_eq!(lull::live_objects(), before, "the binding's state and closures were freed");
}

/// A binding let go without `destroy()` is freed like every other driver once
/// it is idle: its listeners hold it weakly, and go with it.
#[wasm_bindgen_test]
async fn a_binding_let_go_without_destroy_is_freed_and_stops_listening() {
    collect_garbage().await;
    let before = lull::live_objects();
    let p = page(&[], true);
    {
        let binding = p.bind(&[("wait", 10.into())]);
        p.type_text("first");
        until("the search to finish", || !binding.pending()).await;
    }
    collect_garbage().await;
    assert_eq!(lull::live_objects(), before, "the binding's state was freed");
    let seen = p.events().len();
    p.type_text("after");
    p.key("Enter");
    sleep(80).await;
    assert_eq!(p.events().len(), seen, "no listener left: {:?}", p.events());
}

/// `search`, `onResults` and `onPending` are called as methods of the options
/// object (`this` is it), as an object literal with methods expects.
#[wasm_bindgen_test]
async fn callbacks_are_called_with_the_options_as_this() {
    let p = page(&[], true);
    let options: JsValue = Function::new_no_args(
        "return {
            searched: [], shown: [], busy: [],
            search(q) { this.searched.push(q); return Promise.resolve([q.toUpperCase()]); },
            onResults(results) { this.shown.push(results[0]); },
            onPending(busy) { this.busy.push(busy); },
            wait: 10,
        };",
    )
    .call0(&JsValue::UNDEFINED)
    .unwrap();
    let binding = lull::bind_search(p.input.clone().into(), options.clone()).unwrap();
    p.type_text("ab");
    until("the results", || Reflect::get(&options, &"shown".into()).unwrap().unchecked_into::<Array>().length() == 1)
        .await;
    let seen = |k: &str| js_sys::JSON::stringify(&Reflect::get(&options, &k.into()).unwrap()).unwrap();
    assert_eq!([seen("searched"), seen("shown")], ["[\"ab\"]", "[\"AB\"]"]);
    until("not pending", || !binding.pending()).await;
    assert_eq!(seen("busy"), "[true,false]");
    binding.destroy();
}

#[wasm_bindgen_test]
fn bad_search_options_throw_type_errors() {
    let p = page(&[], true);
    let no_search = lull::bind_search(p.input.clone().into(), object(&[("wait", 10.into())]));
    assert!(no_search.is_err());
    let not_input = lull::bind_search(Object::new().into(), p.options.clone().into());
    assert!(not_input.is_err());
    for (key, bad) in [("minLength", JsValue::from(-1)), ("cache", 2.5.into()), ("cache", "20".into())] {
        let options = Object::assign(&Object::new(), &p.options);
        Reflect::set(&options, &key.into(), &bad).unwrap();
        let error = lull::bind_search(p.input.clone().into(), options.into()).err().expect("refused");
        let message = Reflect::get(&error, &"message".into()).unwrap().as_string().unwrap();
        assert_eq!(message, format!("lull: `{key}` must be a whole number from 0 to 4294967295"));
    }
}

/// lull's learned quiet period (`wait: "auto"`, default settings) after these
/// gaps between keys (ms): 2.5 × their median once there are 4, clamped to
/// 100..=1000 ms; 300 ms before.
fn learned_wait(gaps: &[f64]) -> f64 {
    let mut seen: Vec<f64> = gaps.iter().copied().filter(|g| *g <= 1000.0).collect();
    if seen.len() < 4 {
        return 300.0;
    }
    seen.sort_by(f64::total_cmp);
    (seen[seen.len() / 2] * 2.5).floor().clamp(100.0, 1000.0)
}

#[wasm_bindgen_test]
async fn auto_wait_learns_a_fast_typists_rhythm() {
    retrying(|| async {
        let p = page(&[], true);
        let binding = p.bind(&[("wait", "auto".into())]);
        let mut typed = String::new();
        let mut keys = Vec::new();
        for (i, c) in "lullaby".chars().enumerate() {
            if i > 0 {
                sleep(40).await;
            }
            typed.push(c);
            keys.push(timed(|| p.type_text(&typed)).1);
        }
        let lag = watch_lag();
        // The gaps the engine saw (whole ms, read somewhere inside each key's
        // handling), as bounds from ours; and the quiet period they teach.
        let (low, high): (Vec<f64>, Vec<f64>) = keys
            .windows(2)
            .map(|w| ((w[1].0 - CLOCK_SLACK_MS - w[0].1).ceil(), (w[1].1 - w[0].0 + CLOCK_SLACK_MS).floor()))
            .unzip();
        let wait = (learned_wait(&low), learned_wait(&high));
        // A key a whole quiet period after the one before ends the burst there
        // (rightly), and slow typing teaches a wait too close to the initial
        // 300 ms to tell apart: then the machine broke the rhythm.
        let split = (0..high.len()).any(|i| high[i] >= learned_wait(&low[..i]));
        if split || wait.1 > 150.0 {
            binding.destroy();
            return Schedule::Broke(format!("gaps between keys up to {high:?} ms, quiet period {wait:?} ms"));
        }
        until("the search", || !p.events().is_empty()).await;
        assert_eq!(p.events().first().map(String::as_str), Some("search lullaby"));
        let after = p.time_of("search lullaby") - keys[6].0;
        assert!(after >= wait.0 - CLOCK_SLACK_MS, "searched {after:.1} ms after the last key, before {wait:?} ms");
        // Learned, not the initial 300 ms: searched sooner than 300 ms can be —
        // unless the event loop itself was held up long enough to hide it.
        if after >= 300.0 - CLOCK_SLACK_MS {
            let worst = lag.worst();
            binding.destroy();
            assert!(worst > 50.0, "searched {after:.1} ms after the last key, not after the learned {wait:?} ms");
            return Schedule::Broke(format!("the event loop was held up {worst:.0} ms"));
        }
        binding.destroy();
        Schedule::Held
    })
    .await;
}
