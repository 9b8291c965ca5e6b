//! What every driver shares: state behind `Rc<RefCell<_>>`, callbacks that
//! hold it weakly, its timer, its keepalive and its page-hide hook; and, for
//! the async drivers, a run in flight and how its outcome comes back.

use std::cell::{RefCell, RefMut};
use std::rc::{Rc, Weak};

use lull_core::{Debouncer, Keyed, WindowId};
use wasm_bindgen::prelude::*;
use web_sys::{AbortController, AbortSignal};

use crate::hide::HideHook;
use crate::js;
use crate::timer::Timer;

/// What a driver asks of its engine besides its own operations.
pub(crate) trait Engine {
    /// The deadline is reached.
    fn deadline_reached(&mut self, now: u64);
    /// Fire everything pending now (the page is hiding).
    fn flush_everything(&mut self, now: u64);
    /// When the timer must go off next.
    fn next_deadline(&self) -> Option<u64>;
}

impl Engine for Debouncer {
    fn deadline_reached(&mut self, now: u64) {
        self.handle_timeout(now);
    }
    fn flush_everything(&mut self, now: u64) {
        self.flush(now);
    }
    fn next_deadline(&self) -> Option<u64> {
        Debouncer::next_deadline(self)
    }
}

impl<K: Ord + Clone> Engine for Keyed<K> {
    fn deadline_reached(&mut self, now: u64) {
        self.handle_timeout(now);
    }
    fn flush_everything(&mut self, now: u64) {
        self.flush_all(now);
    }
    fn next_deadline(&self) -> Option<u64> {
        Keyed::next_deadline(self)
    }
}

/// The parts of a driver's state besides its engine and JS values.
pub(crate) struct Shell<T> {
    /// The one timer.
    pub(crate) timer: Timer,
    /// A strong self-reference, held only while the driver is busy.
    keepalive: Option<Rc<RefCell<T>>>,
}

/// A driver's state: an engine, the JS values its fires refer to, a shell.
pub(crate) trait Driver: Sized + 'static {
    /// The engine type.
    type Engine: Engine;
    /// Carry out the engine's actions (no borrow held while user code runs),
    /// then [`follow`]. Returns the first error user code threw.
    fn pump(rc: &Rc<RefCell<Self>>) -> Result<(), JsValue>;
    /// The engine and the shell.
    fn parts(&mut self) -> (&mut Self::Engine, &mut Shell<Self>);
    /// Hand the engine what the JS side kept for it, before anything else
    /// reaches the engine (see `syncSlot`'s horizon).
    fn catch_up(&mut self) {}
}

impl<T: Driver> Shell<T> {
    /// A shell whose timer tells the engine and pumps the driver when it goes off.
    pub(crate) fn new(weak: &Weak<RefCell<T>>) -> Self {
        let weak = weak.clone();
        let timer = Timer::new(move || {
            upgrade_then(&weak, |rc| {
                {
                    let mut state = caught_up(rc);
                    let (engine, shell) = state.parts();
                    shell.timer.went_off();
                    engine.deadline_reached(js::now());
                }
                T::pump(rc)
            })
        });
        Shell { timer, keepalive: None }
    }
}

/// The driver's state, borrowed, with what the JS side kept handed to the
/// engine first: every way into the engine goes through here.
pub(crate) fn caught_up<T: Driver>(rc: &Rc<RefCell<T>>) -> RefMut<'_, T> {
    let mut state = rc.borrow_mut();
    state.catch_up();
    state
}

/// Run `f` on the state if it is still alive; report what user code threw.
pub(crate) fn upgrade_then<T>(weak: &Weak<RefCell<T>>, f: impl FnOnce(&Rc<RefCell<T>>) -> Result<(), JsValue>) {
    if let Some(rc) = weak.upgrade()
        && let Err(error) = f(&rc)
    {
        js::report_later(&error);
    }
}

/// With `enabled`, a hook that flushes the driver when the page hides.
pub(crate) fn hide_hook<T: Driver>(enabled: bool, weak: &Weak<RefCell<T>>) -> Option<HideHook> {
    let weak = weak.clone();
    enabled
        .then(|| {
            HideHook::new(move || {
                upgrade_then(&weak, |rc| {
                    caught_up(rc).parts().0.flush_everything(js::now());
                    T::pump(rc)
                })
            })
        })
        .flatten()
}

/// Follow the engine's deadline, and keep the state alive while `busy` or a
/// timer is armed (a pending call must run even if the caller let go), and only then.
pub(crate) fn follow<T: Driver>(rc: &Rc<RefCell<T>>, state: &mut T, busy: bool) {
    let (engine, shell) = state.parts();
    shell.timer.follow(engine.next_deadline());
    let alive = busy || shell.timer.is_armed();
    match (alive, shell.keepalive.is_some()) {
        (true, false) => shell.keepalive = Some(rc.clone()),
        (false, true) => shell.keepalive = None,
        _ => {}
    }
}

/// A run in flight: its window, and the controller of the signal the run received.
pub(crate) struct InFlight {
    /// The window being run.
    pub(crate) window: WindowId,
    /// `None` only if `AbortController` is unavailable (the run then gets no signal).
    controller: Option<AbortController>,
}

impl InFlight {
    /// A run of `window`, and the signal to hand to it.
    pub(crate) fn start(window: WindowId) -> (Self, Option<AbortSignal>) {
        let controller = AbortController::new().ok();
        let signal = controller.as_ref().map(AbortController::signal);
        (InFlight { window, controller }, signal)
    }

    /// Abort the run's signal with `reason` (a newer run superseded it, or it was cancelled).
    pub(crate) fn abort(self, reason: &JsValue) {
        if let Some(controller) = self.controller {
            controller.abort_with_reason(reason);
        }
    }
}

/// Await what user code returned for `window`'s run (a value, a promise, or a
/// throw), then hand the outcome to `finish` if the driver still exists.
pub(crate) fn await_run<T: 'static>(
    rc: &Rc<RefCell<T>>,
    window: WindowId,
    returned: Result<JsValue, JsValue>,
    finish: fn(&Rc<RefCell<T>>, WindowId, Result<JsValue, JsValue>),
) {
    let (value, threw) = match returned {
        Ok(value) => (value, false),
        Err(thrown) => (thrown, true),
    };
    let weak = Rc::downgrade(rc);
    let done = Closure::once_into_js(move |ok: bool, value: JsValue| {
        if let Some(rc) = weak.upgrade() {
            finish(&rc, window, if ok { Ok(value) } else { Err(value) });
        }
    });
    js::settle(&value, threw, &done);
}

/// Tell the engine how `window`'s run ended.
pub(crate) fn end_run(engine: &mut Debouncer, window: WindowId, outcome: &Result<JsValue, JsValue>) {
    let now = js::now();
    let _ = match outcome {
        Ok(_) => engine.run_succeeded(window, now),
        Err(_) => engine.run_failed(window, now),
    };
}
