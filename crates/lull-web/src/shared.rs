//! What every driver shares: state behind `Rc<RefCell<_>>`, callbacks that
//! hold it weakly, its timer, its keepalive and its page-hide hook.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use lull_core::{Debouncer, Keyed};
use wasm_bindgen::prelude::*;

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
}

impl<T: Driver> Shell<T> {
    /// A shell whose timer tells the engine and pumps the driver when it goes off.
    pub(crate) fn new(weak: &Weak<RefCell<T>>) -> Self {
        let weak = weak.clone();
        let timer = Timer::new(move || {
            upgrade_then(&weak, |rc| {
                {
                    let mut state = rc.borrow_mut();
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
                    rc.borrow_mut().parts().0.flush_everything(js::now());
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
