//! `bindSearch`: a search box. Debounced queries, IME-aware, stale requests
//! aborted, responses never delivered out of order, optional LRU cache.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

use js_sys::Function;
use lull_core::{Action, Debouncer, Overlap, WindowId};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{Event, HtmlInputElement, KeyboardEvent};

use crate::js;
use crate::options::{self, TimingOptions};
use crate::shared::{self, Driver, InFlight, Shell};

/// The last `capacity` results by query, most recent first.
struct Lru {
    capacity: usize,
    entries: VecDeque<(String, JsValue)>,
}

impl Lru {
    fn get(&mut self, query: &str) -> Option<JsValue> {
        let at = self.entries.iter().position(|(q, _)| q == query)?;
        let entry = self.entries.remove(at)?;
        let value = entry.1.clone();
        self.entries.push_front(entry);
        Some(value)
    }

    fn put(&mut self, query: String, value: JsValue) {
        if self.capacity == 0 {
            return;
        }
        self.entries.retain(|(q, _)| *q != query);
        self.entries.push_front((query, value));
        self.entries.truncate(self.capacity);
    }
}

struct Callbacks {
    search: Method,
    on_results: Option<Method>,
    on_error: Option<Method>,
    on_pending: Option<Method>,
}

/// A callback from the options, called like a method: `this` is the options object.
#[derive(Clone)]
struct Method {
    f: Function,
    this: JsValue,
}

impl Method {
    fn call2(&self, a: &JsValue, b: &JsValue) -> Result<JsValue, JsValue> {
        self.f.call2(&self.this, a, b)
    }
}

/// An event type and the closure listening to it on the input.
type Listener = (&'static str, Closure<dyn FnMut(Event)>);

struct State {
    engine: Debouncer,
    input: HtmlInputElement,
    callbacks: Callbacks,
    min_length: usize,
    composing: bool,
    /// The query the engine's open window will search.
    latest: String,
    /// The query of each window not yet searched (an older one may still be due).
    queries: Vec<(WindowId, String)>,
    /// The last query handed to the engine: the same query again is skipped.
    scheduled: Option<String>,
    /// The request in flight and its query. Only its response is ever delivered:
    /// a newer query aborts and replaces it, so responses never arrive out of order.
    running: Option<(InFlight, String)>,
    cache: Lru,
    reported_pending: bool,
    listeners: Vec<Listener>,
    shell: Shell<State>,
}

impl Drop for State {
    fn drop(&mut self) {
        // Let go without `destroy()`: the listeners go with the state.
        for (kind, listener) in &self.listeners {
            let _ = self.input.remove_event_listener_with_callback(kind, listener.as_ref().unchecked_ref());
        }
        crate::live::dropped();
    }
}

/// A search box bound by `bindSearch`. Keep it to call `destroy()`.
#[wasm_bindgen(skip_typescript)]
pub struct SearchBinding {
    state: Rc<RefCell<State>>,
}

fn call(f: Option<&Method>, a: &JsValue, b: &JsValue) {
    if let Some(f) = f
        && let Err(error) = f.call2(a, b)
    {
        js::report_later(&error);
    }
}

/// The input's value changed (or composition ended): schedule its query.
fn on_input(rc: &Rc<RefCell<State>>) {
    {
        let mut s = rc.borrow_mut();
        if s.composing {
            return;
        }
        let query = s.input.value().trim().to_string();
        if s.scheduled.as_deref() == Some(query.as_str()) {
            return; // unchanged (e.g. trailing space): nothing to do
        }
        if query.chars().count() < s.min_length {
            s.scheduled = None;
            drop(s);
            stop(rc);
            return;
        }
        s.scheduled = Some(query.clone());
        s.latest = query.clone();
        let accepted = s.engine.event(js::now());
        s.queries.retain(|(w, _)| *w != accepted.window);
        s.queries.push((accepted.window, query));
    }
    pump(rc);
}

/// Cancel the pending query and abort the running request.
fn stop(rc: &Rc<RefCell<State>>) {
    let running = {
        let mut s = rc.borrow_mut();
        s.engine.cancel(js::now());
        s.running.take()
    };
    if let Some((run, _)) = running {
        run.abort(&js::abort_error("lull: search cancelled"));
    }
    pump(rc);
}

impl Driver for State {
    type Engine = Debouncer;

    fn pump(rc: &Rc<RefCell<Self>>) -> Result<(), JsValue> {
        pump(rc);
        Ok(())
    }

    fn parts(&mut self) -> (&mut Debouncer, &mut Shell<Self>) {
        (&mut self.engine, &mut self.shell)
    }
}

fn pump(rc: &Rc<RefCell<State>>) {
    loop {
        let action = rc.borrow_mut().engine.poll_action();
        let Some(action) = action else { break };
        match action {
            Action::Fire(fire) => start(rc, fire.window),
            Action::DeadLettered(letter) => {
                let _ = rc.borrow_mut().engine.discard(letter.window);
            }
            Action::Dropped(dropped) => rc.borrow_mut().queries.retain(|(w, _)| *w != dropped.window),
            Action::RetryScheduled { .. } | Action::TimedOut { .. } | Action::Queued(_) => {}
        }
    }
    let (pending, on_pending) = {
        let mut s = rc.borrow_mut();
        shared::follow(rc, &mut s, false);
        let pending = s.engine.pending() || s.running.is_some();
        let changed = pending != s.reported_pending;
        s.reported_pending = pending;
        (pending, changed.then(|| s.callbacks.on_pending.clone()).flatten())
    };
    call(on_pending.as_ref(), &pending.into(), &JsValue::UNDEFINED);
}

/// Search the latest query: from the cache, or with a request that a newer one aborts.
fn start(rc: &Rc<RefCell<State>>, window: WindowId) {
    let (query, cached, stale) = {
        let mut s = rc.borrow_mut();
        let query = match s.queries.iter().position(|(w, _)| *w == window) {
            Some(at) => s.queries.swap_remove(at).1,
            None => s.latest.clone(),
        };
        let cached = s.cache.get(&query);
        (query, cached, s.running.take())
    };
    if let Some((run, _)) = stale {
        run.abort(&js::abort_error("lull: superseded by a newer query"));
    }
    if let Some(results) = cached {
        let on_results = {
            let mut s = rc.borrow_mut();
            let _ = s.engine.run_succeeded(window, js::now());
            s.callbacks.on_results.clone()
        };
        call(on_results.as_ref(), &results, &query.as_str().into());
        return;
    }
    let (run, signal) = InFlight::start(window);
    let search = {
        let mut s = rc.borrow_mut();
        s.running = Some((run, query.clone()));
        s.callbacks.search.clone()
    };
    let signal = signal.map_or(JsValue::UNDEFINED, JsValue::from);
    shared::await_run(rc, window, search.call2(&query.as_str().into(), &signal), finish);
}

/// A request settled: deliver it only if it is still the latest.
fn finish(rc: &Rc<RefCell<State>>, window: WindowId, outcome: Result<JsValue, JsValue>) {
    let (callback, value, query) = {
        let mut s = rc.borrow_mut();
        let Some((_, query)) = s.running.take_if(|(run, _)| run.window == window) else {
            return; // aborted or superseded: never delivered
        };
        shared::end_run(&mut s.engine, window, &outcome);
        match &outcome {
            Ok(results) => {
                s.cache.put(query.clone(), results.clone());
                (s.callbacks.on_results.clone(), results.clone(), query)
            }
            Err(error) => (s.callbacks.on_error.clone(), error.clone(), query),
        }
    };
    call(callback.as_ref(), &value, &query.as_str().into());
    pump(rc);
}

/// Listen for `kind` on the input. The listener holds the state weakly: the
/// input does not keep a binding alive that nothing else holds.
fn listen(rc: &Rc<RefCell<State>>, kind: &'static str, handle: fn(&Rc<RefCell<State>>, Event)) -> Result<(), JsValue> {
    let target = Rc::downgrade(rc);
    let listener: Closure<dyn FnMut(Event)> = Closure::new(move |event: Event| {
        if let Some(rc) = target.upgrade() {
            handle(&rc, event);
        }
    });
    rc.borrow().input.add_event_listener_with_callback(kind, listener.as_ref().unchecked_ref())?;
    rc.borrow_mut().listeners.push((kind, listener));
    Ok(())
}

fn on_key(rc: &Rc<RefCell<State>>, event: Event) {
    let Some(key) = event.dyn_ref::<KeyboardEvent>() else {
        return;
    };
    if key.is_composing() || rc.borrow().composing {
        return;
    }
    match key.key().as_str() {
        "Enter" => {
            on_input(rc);
            rc.borrow_mut().engine.flush(js::now());
            pump(rc);
        }
        "Escape" => {
            rc.borrow_mut().scheduled = None;
            stop(rc);
        }
        _ => {}
    }
}

#[wasm_bindgen]
impl SearchBinding {
    /// Remove every listener, disarm the timer, abort the running request.
    pub fn destroy(&self) {
        let (input, listeners) = {
            let mut s = self.state.borrow_mut();
            (s.input.clone(), std::mem::take(&mut s.listeners))
        };
        for (kind, listener) in &listeners {
            let _ = input.remove_event_listener_with_callback(kind, listener.as_ref().unchecked_ref());
        }
        stop(&self.state);
        self.state.borrow_mut().shell.timer.clear();
        drop(listeners);
    }

    /// Search the current query now (what Enter does).
    pub fn flush(&self) {
        on_input(&self.state);
        self.state.borrow_mut().engine.flush(js::now());
        pump(&self.state);
    }

    /// Drop the pending query and abort the running request (what Escape does).
    pub fn cancel(&self) {
        self.state.borrow_mut().scheduled = None;
        stop(&self.state);
    }

    /// Whether a query waits or a request is running.
    pub fn pending(&self) -> bool {
        let s = self.state.borrow();
        s.engine.pending() || s.running.is_some()
    }
}

fn callback(options: &JsValue, name: &str, required: bool) -> Result<Option<Method>, JsValue> {
    let value = js_sys::Reflect::get(options, &name.into())?;
    if value.is_undefined() && !required {
        return Ok(None);
    }
    Ok(Some(Method { f: options::function(value, name)?, this: options.clone() }))
}

/// `bindSearch(input, { search, wait, maxWait, minLength, cache, onResults, onError, onPending })`.
#[wasm_bindgen(js_name = bindSearch, skip_typescript)]
pub fn bind_search(input: JsValue, options: JsValue) -> Result<SearchBinding, JsValue> {
    let input: HtmlInputElement = input.dyn_into().map_err(|_| js::type_error("`input` must be an <input> element"))?;
    if !options.is_object() {
        return Err(js::type_error("bindSearch options must be an object with a `search` function"));
    }
    let timing = TimingOptions::read(&options)?;
    let min_length = options::count(&options, "minLength")?;
    let cache = options::count(&options, "cache")?;
    let wait = js_sys::Reflect::get(&options, &"wait".into())?;
    let wait = if wait.is_undefined() { lull_core::Wait::Fixed(250) } else { options::wait(&wait) };
    let timing = TimingOptions { max_wait: timing.max_wait, ..TimingOptions::default() };
    let mut config = options::debounce_policy(wait, &timing);
    config.overlap = Overlap::Supersede;
    let policy = options::build(config)?;
    let Some(search) = callback(&options, "search", true)? else {
        return Err(js::type_error("`search` must be a function"));
    };
    let callbacks = Callbacks {
        search,
        on_results: callback(&options, "onResults", false)?,
        on_error: callback(&options, "onError", false)?,
        on_pending: callback(&options, "onPending", false)?,
    };
    let state = Rc::new_cyclic(|weak: &Weak<RefCell<State>>| {
        RefCell::new(State {
            engine: Debouncer::new(policy, crate::seed()),
            input,
            callbacks,
            min_length: min_length.unwrap_or(1) as usize,
            composing: false,
            latest: String::new(),
            queries: Vec::new(),
            scheduled: None,
            running: None,
            cache: Lru { capacity: cache.unwrap_or(0) as usize, entries: VecDeque::new() },
            reported_pending: false,
            listeners: Vec::new(),
            shell: Shell::new(weak),
        })
    });
    crate::live::created();
    listen(&state, "input", |rc, _| on_input(rc))?;
    listen(&state, "compositionstart", |rc, _| rc.borrow_mut().composing = true)?;
    listen(&state, "compositionend", |rc, _| {
        rc.borrow_mut().composing = false;
        on_input(rc);
    })?;
    listen(&state, "keydown", on_key)?;
    Ok(SearchBinding { state })
}
