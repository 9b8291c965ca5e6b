//! What every driver shares: state behind `Rc<RefCell<_>>`, callbacks that
//! hold it weakly, its timer and its page-hide hook.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use wasm_bindgen::prelude::*;

use crate::hide::HideHook;
use crate::js;
use crate::timer::Timer;

/// A driver's state: the engine, the JS values its fires refer to, one timer.
pub(crate) trait Driver: Sized + 'static {
    /// Carry out the engine's actions (no borrow held while user code runs),
    /// then follow its deadline. Returns the first error user code threw.
    fn pump(rc: &Rc<RefCell<Self>>) -> Result<(), JsValue>;
    /// The driver's timer.
    fn timer(&mut self) -> &mut Timer;
    /// Tell the engine its deadline is reached.
    fn deadline_reached(&mut self, now: u64);
    /// Tell the engine to fire everything pending now (the page is hiding).
    fn flush_all(&mut self, now: u64);
    /// The strong self-reference held while the driver is busy.
    fn keepalive(&mut self) -> &mut Option<Rc<RefCell<Self>>>;
}

/// Run `f` on the state if it is still alive; report what user code threw.
pub(crate) fn upgrade_then<T>(weak: &Weak<RefCell<T>>, f: impl FnOnce(&Rc<RefCell<T>>) -> Result<(), JsValue>) {
    if let Some(rc) = weak.upgrade()
        && let Err(error) = f(&rc)
    {
        js::report_later(&error);
    }
}

/// The driver's timer: when it goes off, the engine is told and pumped.
pub(crate) fn timer<T: Driver>(weak: &Weak<RefCell<T>>) -> Timer {
    let weak = weak.clone();
    Timer::new(move || {
        upgrade_then(&weak, |rc| {
            {
                let mut state = rc.borrow_mut();
                state.timer().went_off();
                state.deadline_reached(js::now());
            }
            T::pump(rc)
        })
    })
}

/// With `enabled`, a hook that flushes the driver when the page hides.
pub(crate) fn hide_hook<T: Driver>(enabled: bool, weak: &Weak<RefCell<T>>) -> Option<HideHook> {
    let weak = weak.clone();
    enabled
        .then(|| {
            HideHook::new(move || {
                upgrade_then(&weak, |rc| {
                    rc.borrow_mut().flush_all(js::now());
                    T::pump(rc)
                })
            })
        })
        .flatten()
}

/// Follow the engine's deadline, and keep the state alive while `busy` or a
/// timer is armed (a pending call must run even if the caller let go), and only then.
pub(crate) fn follow<T: Driver>(rc: &Rc<RefCell<T>>, state: &mut T, deadline: Option<u64>, busy: bool) {
    state.timer().follow(deadline);
    let alive = busy || state.timer().is_armed();
    let keepalive = state.keepalive();
    match (alive, keepalive.is_some()) {
        (true, false) => *keepalive = Some(rc.clone()),
        (false, true) => *keepalive = None,
        _ => {}
    }
}
