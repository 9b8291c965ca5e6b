//! `debounce` / `throttle` through the JS API, in Chromium with real timers:
//! the core's lodash semantics table, lifetimes, `flushOnHide`, bad options.
#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use support::lull;

use js_sys::{Array, Function, Promise, Reflect};
use support::{
    Rules, Schedule, block, call, collect_garbage, method, object, one_window, recorder, retrying, sleep, thrown,
    timed, until,
};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn debounce(r: &support::Recorder, wait: u32, opts: JsValue) -> js_sys::Function {
    lull::debounce(r.func.clone().into(), wait.into(), opts).unwrap()
}

fn pending(d: &js_sys::Function) -> bool {
    method(d, "pending", &[]).as_bool().unwrap()
}

/// Wait until `d` has nothing pending: every run it owes has happened.
async fn settle(d: &js_sys::Function) {
    until("the debouncer to settle (pending() false)", || !pending(d)).await;
}

/// The runs `r` saw, judged by lodash's rules over the calls made through it.
fn assert_lodash(r: &support::Recorder, rules: Rules) {
    if let Err(e) = r.check(rules) {
        panic!("{e}");
    }
}

#[wasm_bindgen_test]
async fn a_burst_runs_once_with_the_last_arguments_after_the_quiet_period() {
    let r = recorder();
    let d = debounce(&r, 50, JsValue::UNDEFINED);
    for i in 0..5 {
        if i > 0 {
            sleep(10).await;
        }
        r.call_numbered(&d);
    }
    assert!(pending(&d), "the last call waits for its quiet period");
    settle(&d).await;
    // Each run came no sooner than 50 ms after the last call before it, with
    // that call's arguments; the burst splits only where a real gap reached
    // 50 ms (a `sleep(10)` that took 60). Normally: one run, with call 4's.
    assert_lodash(&r, Rules::debounce(50.0));
    assert_eq!(r.firsts().last(), Some(&4.0), "the last call ran");
}

#[wasm_bindgen_test]
async fn this_and_every_argument_reach_the_function() {
    let seen =
        js_sys::Function::new_with_args("a, b", "globalThis.__lullSeen = [this && this.name, a, b]; return a + b;");
    let d = lull::debounce(seen.into(), 0.into(), object(&[("leading", true.into())])).unwrap();
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
    assert_eq!(r.call_numbered(&d), 0, "lodash returns the leading result");
    assert_eq!(r.firsts(), [0.0], "the leading run is inside the call");
    settle(&d).await;
    assert_eq!(r.firsts(), [0.0], "no trailing run without a second call");
}

#[wasm_bindgen_test]
async fn trailing_runs_only_if_called_again() {
    let r = recorder();
    let rules = Rules { leading: true, ..Rules::debounce(30.0) };
    let d = debounce(&r, 30, object(&[("leading", true.into())]));
    r.call_numbered(&d);
    let returned = r.call_numbered(&d);
    // lodash returns the latest run's result: call 0's while call 1 waits (or
    // call 1's own, had the machine held the thread 30 ms between the calls).
    assert_eq!(returned.as_f64(), r.firsts().last().copied(), "the latest result");
    settle(&d).await;
    assert_lodash(&r, rules);
    assert_eq!(r.firsts(), [0.0, 1.0], "a leading run, then call 1's");
}

#[wasm_bindgen_test]
async fn max_wait_runs_inside_a_call_in_a_tight_loop() {
    let r = recorder();
    let d = debounce(&r, 20, object(&[("maxWait", 60.into())]));
    // A synchronous loop: no timer can run, calls keep coming for 150 ms
    // (measured between calls actually made, so a stalled thread cannot cut it short).
    let first = support::now();
    // A call every ~0.1 ms (a call kept on the JS side takes ~0.1 µs: without
    // the pause the loop would make millions, and judging them would take longer than the test).
    while r.calls.borrow().last().is_none_or(|c| c.at - first < 150.0) {
        r.call_numbered(&d);
        block(0.1);
    }
    let inside = r.calls.borrow().iter().filter(|c| !c.runs.is_empty()).count();
    assert!(inside >= 1, "maxWait fired inside calls");
    settle(&d).await;
    // Every run inside a call came when lodash's rules say for that call's
    // time (at maxWait from the last run, nowhere else), and the trailing run
    // after the loop has the last call's arguments.
    assert_lodash(&r, Rules { max_wait: Some(60.0), one_turn: true, ..Rules::debounce(20.0) });
    let last = r.calls.borrow().len() - 1;
    assert_eq!(r.firsts().last(), Some(&(last as f64)), "the trailing run has the last call");
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

/// Calls before the engine's horizon stay on the JS side until the driver
/// next reaches the engine: `cancel` drops them and `flush` runs them; none is
/// handed in later (it would run the function with no call behind it).
#[wasm_bindgen_test]
async fn calls_kept_on_the_js_side_are_dropped_by_cancel_and_run_by_flush() {
    retrying(|| async {
        let r = recorder();
        let d = debounce(&r, 40, JsValue::UNDEFINED);
        let dropped: Vec<(f64, f64)> = (0..3).map(|_| timed(|| r.call_numbered(&d)).1).collect();
        method(&d, "cancel", &[]);
        assert!(!pending(&d));
        sleep(80).await;
        let flushed: Vec<(f64, f64)> = (3..5).map(|_| timed(|| r.call_numbered(&d)).1).collect();
        if let Err(why) = one_window(&dropped, 40.0).and(one_window(&flushed, 40.0)) {
            method(&d, "cancel", &[]);
            return Schedule::Broke(why);
        }
        assert_eq!(method(&d, "flush", &[]), 4);
        assert!(!pending(&d));
        sleep(80).await;
        r.call_numbered(&d); // 5
        settle(&d).await;
        sleep(80).await;
        assert_eq!(r.firsts(), [4.0, 5.0], "one run per window, each with its last call's argument");
        Schedule::Held
    })
    .await;
}

/// `d(x)`, the event loop blocked past `wait`, then `d.cancel()`: lodash drops
/// the call without running it, and so does lull-web (the overdue window is
/// not fired inside `cancel`).
#[wasm_bindgen_test]
async fn cancel_after_a_blocked_event_loop_drops_the_call_like_lodash() {
    let lodash = support::lodash_debounce();
    let mut runs = Vec::new();
    for side in ["lodash", "lull"] {
        let r = recorder();
        let d: js_sys::Function = match side {
            "lodash" => lodash.call2(&JsValue::UNDEFINED, &r.func, &20.into()).unwrap().unchecked_into(),
            _ => debounce(&r, 20, JsValue::UNDEFINED),
        };
        r.call_numbered(&d);
        block(40.0);
        method(&d, "cancel", &[]);
        sleep(60).await;
        runs.push((side, r.count()));
    }
    assert_eq!(runs, [("lodash", 0), ("lull", 0)]);
}

/// `debounce(f)` (a 0 ms wait, lodash's default) called in a 20 ms synchronous
/// loop: lodash runs `f` once, after the loop; lull-web too (no timer could run
/// inside the loop, so none is taken as missed), not once per millisecond.
#[wasm_bindgen_test]
async fn a_zero_wait_debounce_in_a_synchronous_loop_runs_once_after_it_like_lodash() {
    let lodash = support::lodash_debounce();
    let mut runs = Vec::new();
    for lull in [false, true] {
        let r = recorder();
        let d: js_sys::Function = if lull {
            lull::debounce(r.func.clone().into(), JsValue::UNDEFINED, JsValue::UNDEFINED).unwrap()
        } else {
            lodash.call1(&JsValue::UNDEFINED, &r.func).unwrap().unchecked_into()
        };
        let start = support::now();
        while support::now() - start < 20.0 {
            r.call_numbered(&d);
            block(0.2);
        }
        let inside = r.count();
        sleep(50).await;
        let last = (r.calls.borrow().len() - 1) as f64;
        runs.push((inside, r.firsts() == [last]));
    }
    assert_eq!(runs, [(0, true), (0, true)], "(runs inside the loop, one run after it with the last call)");
}

/// Run a JS `script` (the body of `async (make) => …`, returning what it saw)
/// with `make` = lodash.debounce and with lull-web's `debounce`; both outcomes, as JSON.
async fn lodash_then_lull(script: &str) -> [String; 2] {
    let run = Function::new_with_args("make", &format!("return (async () => {{ {script} }})();"));
    let lull = Closure::<dyn Fn(JsValue, JsValue, JsValue) -> Result<JsValue, JsValue>>::new(|f, wait, options| {
        lull::debounce(f, wait, options).map(Into::into)
    });
    let mut out = Vec::new();
    for make in [support::lodash_debounce().into(), lull.as_ref().clone()] {
        let seen = JsFuture::from(Promise::from(run.call1(&JsValue::UNDEFINED, &make).unwrap())).await.unwrap();
        out.push(js_sys::JSON::stringify(&seen).unwrap().as_string().unwrap());
    }
    [out.remove(0), out.remove(0)]
}

/// Re-entrancy, side by side with lodash: the debounced function called, cancelled
/// and flushed from inside its own callback, and a callback that throws.
#[wasm_bindgen_test]
async fn reentrant_calls_cancel_flush_and_throws_behave_as_in_lodash() {
    let scripts = [
        // called from inside its own callback: each run schedules the next
        "const runs = []; let d;
         d = make((x) => { runs.push(x); if (x < 3) d(x + 1); return x; }, 20);
         d(0);
         await new Promise((ok) => setTimeout(ok, 400));
         return runs;",
        // cancel() from inside the callback
        "const runs = []; let d;
         d = make((x) => { runs.push(x); d.cancel(); return x; }, 30, { leading: true });
         runs.push(['returned', d(1), d(2), d(3)]);
         await new Promise((ok) => setTimeout(ok, 150));
         return runs;",
        // flush() from inside the callback runs the call made inside it, at once
        "const runs = []; let d;
         d = make((x) => { runs.push(x); if (x === 1) { d(5); runs.push(['flushed', d.flush()]); } return x; }, 50, { leading: true });
         runs.push(['returned', d(1)]);
         await new Promise((ok) => setTimeout(ok, 250));
         return runs;",
        // a call made inside a run that flush() started waits its own quiet period
        "const runs = []; let d;
         d = make((x) => { runs.push(x); if (x === 1) d(2); return x; }, 40);
         d(1);
         d.flush();
         runs.push('flushed');
         await new Promise((ok) => setTimeout(ok, 200));
         return runs;",
        // a callback that throws: the caller gets the error, the debouncer goes on
        "const runs = []; let d;
         d = make((x) => { runs.push(x); if (x === 1) throw new Error('boom ' + x); return x; }, 30, { leading: true });
         try { d(1); } catch (e) { runs.push(['caught', e.message]); }
         d(2);
         await new Promise((ok) => setTimeout(ok, 150));
         runs.push(['returned', d(3)]);
         await new Promise((ok) => setTimeout(ok, 150));
         return runs;",
    ];
    for (i, script) in scripts.iter().enumerate() {
        let [lodash, lull] = lodash_then_lull(script).await;
        assert_eq!(lull, lodash, "script {i}: lull-web (left) vs lodash (right)");
    }
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
    lull::throttle(r.func.clone().into(), wait.into(), JsValue::UNDEFINED).unwrap()
}

#[wasm_bindgen_test]
async fn throttle_runs_at_most_once_per_wait() {
    let r = recorder();
    let d = throttle(&r, 50);
    for i in 0..30 {
        if i > 0 {
            sleep(10).await;
        }
        r.call_numbered(&d);
    }
    settle(&d).await;
    // How many runs, and when, follow from when the calls were really made
    // (and the timer really ran): a leading run, then one per 50 ms while
    // calls keep coming — never sooner — and the last call on the trailing edge.
    assert_lodash(&r, Rules::throttle(50.0));
    assert!(r.count() >= 2, "a leading and a trailing run at least: {:?}", r.firsts());
    assert_eq!(r.firsts().first(), Some(&0.0), "the first call runs on the leading edge");
    assert_eq!(r.firsts().last(), Some(&29.0), "the last call runs on the trailing edge");
}

#[wasm_bindgen_test]
async fn a_call_after_a_blocked_event_loop_starts_a_new_burst() {
    let r = recorder();
    let d = debounce(&r, 20, object(&[("leading", true.into())]));
    call(&d, &[1.into()]);
    block(60.0); // the timer is overdue but cannot run…
    support::end_turn().await; // …and the next call comes in a later turn, before it
    call(&d, &[2.into()]);
    assert_eq!(r.firsts(), [1.0, 2.0], "lodash#6003 would fold call 2 into the old burst");
    settle(&d).await;
    assert_eq!(r.count(), 2, "no trailing run: call 2 ran on its leading edge");
}

#[wasm_bindgen_test]
async fn after_a_blocked_event_loop_the_old_burst_runs_with_its_own_arguments() {
    // DESIGN.md: a call after the deadline starts a new window, "but the old
    // window still runs with *its own* last arguments". Every timer that runs
    // late on a busy machine takes this path.
    let r = recorder();
    let d = debounce(&r, 20, JsValue::UNDEFINED);
    r.call_numbered(&d);
    block(60.0); // the timer is overdue but cannot run…
    support::end_turn().await; // …and the next call comes in a later turn, before it
    r.call_numbered(&d);
    settle(&d).await;
    let runs: Vec<String> = r.runs.borrow().iter().map(|(_, args)| format!("{args:?}")).collect();
    assert_eq!(runs, ["[JsValue(0)]", "[JsValue(1)]"], "call 0's burst with call 0's arguments, then call 1's");
    assert_lodash(&r, Rules::debounce(20.0));
}

#[wasm_bindgen_test]
async fn a_pending_call_runs_even_if_the_caller_let_go() {
    let r = recorder();
    let called = support::now();
    {
        let d = debounce(&r, 20, JsValue::UNDEFINED);
        call(&d, &[7.into()]);
    }
    collect_garbage().await;
    until("the pending call to run", || r.count() > 0).await;
    assert_eq!(r.firsts(), [7.0]);
    let ran = r.runs.borrow()[0].0;
    assert!(ran >= called - support::CLOCK_SLACK_MS + 20.0, "ran {:.1} ms after the call", ran - called);
}

#[wasm_bindgen_test]
async fn idle_debouncers_are_freed_when_unreachable() {
    collect_garbage().await;
    let before = lull::live_objects();
    let r = recorder();
    for i in 0..50 {
        let d = debounce(&r, 5, object(&[("flushOnHide", true.into())]));
        call(&d, &[i.into()]);
    }
    assert_eq!(lull::live_objects(), before + 50);
    until("all 50 to run", || r.count() == 50).await; // all ran: idle
    collect_garbage().await;
    assert_eq!(lull::live_objects(), before, "every state (timer closure, listeners) was freed");
}

/// The lite engine's table grows a page at a time (about 200 engines a
/// page): a thousand debouncers alive at once span several, each keeps its
/// own window, and once they are freed the next thousand reuse their slots.
#[wasm_bindgen_test]
async fn a_thousand_debouncers_at_once_each_run_their_own_window() {
    collect_garbage().await;
    let before = lull::live_objects();
    for round in 0..2 {
        let r = recorder();
        let debouncers: Vec<_> = (0..1000).map(|_| debounce(&r, 5, JsValue::UNDEFINED)).collect();
        for (i, d) in debouncers.iter().enumerate() {
            call(d, &[(i as u32).into()]);
            call(d, &[(round * 1000 + i as u32).into()]);
        }
        assert_eq!(lull::live_objects(), before + 1000, "round {round}");
        until("all 1000 to run", || r.count() == 1000).await;
        let mut firsts = r.firsts();
        firsts.sort_by(f64::total_cmp);
        let expected: Vec<f64> = (0..1000).map(|i| f64::from(round * 1000 + i)).collect();
        assert_eq!(firsts, expected, "round {round}: each ran once, with its own last call");
        drop(debouncers);
        collect_garbage().await;
        assert_eq!(lull::live_objects(), before, "round {round}: all freed");
    }
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

/// `lodash.debounce(f, wait, options)` or lull-web's, over the same recorder.
fn side(lull: bool, r: &support::Recorder, wait: JsValue, options: JsValue) -> js_sys::Function {
    if lull {
        return lull::debounce(r.func.clone().into(), wait, options).unwrap();
    }
    let lodash = support::lodash_debounce();
    let args = js_sys::Array::of3(&r.func, &wait, &options);
    lodash.apply(&JsValue::UNDEFINED, &args).unwrap().unchecked_into()
}

/// Options lodash accepts are read as lodash reads them, never refused:
/// each script runs against lodash.debounce and lull-web, with the same outcome.
#[wasm_bindgen_test]
async fn options_are_read_as_lodash_reads_them() {
    // (wait, options, what each side must do)
    let cases: [(JsValue, JsValue, &str); 6] = [
        (20.into(), object(&[("leading", 1.into())]), "truthy leading runs inside the first call"),
        (20.into(), "leading".into(), "a non-object options is ignored: no leading run"),
        (20.into(), 7.into(), "a number as options is ignored"),
        (
            "400".into(),
            object(&[("leading", true.into()), ("maxWait", "400".into())]),
            "wait and maxWait as numeric strings",
        ),
        ("soon".into(), JsValue::UNDEFINED, "a non-numeric wait is 0"),
        (1000.into(), object(&[("maxWait", "50".into())]), "maxWait \"50\" bounds the delay"),
    ];
    for (i, (wait, options, what)) in cases.into_iter().enumerate() {
        let mut outcome = Vec::new();
        for lull in [false, true] {
            let r = recorder();
            let d = side(lull, &r, wait.clone(), options.clone());
            r.call_numbered(&d);
            let first = r.count();
            if i == 5 {
                block(70.0); // past maxWait: the next call finds a run due
            }
            if i != 4 {
                r.call_numbered(&d); // (with a 0 ms wait, a second call is the tight-loop case)
            }
            let second = r.count();
            sleep(100).await;
            method(&d, "cancel", &[]);
            outcome.push((first, second, r.count()));
        }
        assert_eq!(outcome[0], outcome[1], "case {i} ({what}): lodash (calls ran inside) vs lull-web");
    }
    // `trailing: 0` is falsy: with a leading run, the second call never runs.
    let mut runs = Vec::new();
    for lull in [false, true] {
        let r = recorder();
        let d = side(lull, &r, 20.into(), object(&[("leading", true.into()), ("trailing", 0.into())]));
        r.call_numbered(&d);
        r.call_numbered(&d);
        sleep(80).await;
        runs.push(r.firsts());
    }
    assert_eq!(runs, [[0.0], [0.0]]);
    assert_eq!(
        thrown(|| lull::debounce(5.into(), 5.into(), JsValue::UNDEFINED).map(Into::into)),
        "TypeError: lull: `func` must be a function"
    );
}

/// The one deliberate difference: an option present but `undefined` counts
/// as missing. lodash reads `{ trailing: undefined }` as `trailing: false` (and
/// `{ maxWait: undefined }` as `maxWait: 0`, lodash#5857).
#[wasm_bindgen_test]
async fn an_option_present_but_undefined_counts_as_missing() {
    let mut runs = Vec::new();
    for lull in [false, true] {
        let r = recorder();
        let d = side(lull, &r, 20.into(), object(&[("trailing", JsValue::UNDEFINED)]));
        r.call_numbered(&d);
        sleep(80).await;
        runs.push(r.count());
    }
    assert_eq!(runs, [0, 1], "lodash drops the call; lull-web runs it (trailing is on by default)");
}

#[wasm_bindgen_test]
async fn an_error_thrown_by_the_function_reaches_the_caller() {
    let boom = js_sys::Function::new_with_args("x", "if (x === 'bad') throw new RangeError('bad ' + x); return x;");
    let d = lull::debounce(boom.into(), 0.into(), object(&[("leading", true.into())])).unwrap();
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

/// One call that runs two windows (the overdue one, then its own leading
/// edge), both throwing: the caller gets the first error, the second is
/// reported (`reportError`), none is lost — as `debounceKeyed` does.
#[wasm_bindgen_test]
async fn every_error_of_a_call_reaches_the_caller_or_is_reported() {
    let reported = support::catch_reported();
    let boom = Function::new_with_args("x", "throw new Error('boom ' + x);");
    let d = lull::debounce(boom.into(), 20.into(), object(&[("leading", true.into())])).unwrap();
    assert!(d.call1(&JsValue::UNDEFINED, &1.into()).is_err(), "the leading run threw");
    let _ = d.call1(&JsValue::UNDEFINED, &2.into()); // joins the burst: pending
    block(40.0);
    support::end_turn().await; // a later turn: the overdue window runs first, then 3's leading edge
    let thrown = d.call1(&JsValue::UNDEFINED, &3.into()).unwrap_err();
    assert_eq!(Reflect::get(&thrown, &"message".into()).unwrap(), "boom 2");
    until("the second error to be reported", || reported.messages() == ["boom 3"]).await;
    method(&d, "cancel", &[]);
}
