//! The one `setTimeout` a driver owns, following the engine's deadline lazily.

use js_sys::Function;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::js;

/// Browsers run a longer delay at once; a long deadline is reached in steps.
const MAX_DELAY_MS: u64 = i32::MAX as u64;

/// At most one armed `setTimeout`, re-armed only when the deadline moves
/// earlier (an event never moves it later, so typing costs no timer calls).
/// Dropping it clears the timeout.
pub(crate) struct Timer {
    callback: Closure<dyn FnMut()>,
    /// The armed timeout's handle and when it is due.
    armed: Option<(JsValue, u64)>,
}

impl Timer {
    pub(crate) fn new(on_fire: impl FnMut() + 'static) -> Self {
        Timer { callback: Closure::new(on_fire), armed: None }
    }

    /// Arm for `deadline` unless an armed timer is due no later; disarm when
    /// there is none. Reads the clock only to arm.
    pub(crate) fn follow(&mut self, deadline: Option<u64>) {
        match deadline {
            None => self.clear(),
            Some(d) if self.armed.as_ref().is_some_and(|(_, due)| *due <= d) => {}
            Some(d) => {
                self.clear();
                let now = js::now();
                let delay = d.saturating_sub(now).min(MAX_DELAY_MS);
                let handler: &Function = self.callback.as_ref().unchecked_ref();
                self.armed = Some((js::set_timeout(handler, delay as f64), now + delay));
            }
        }
    }

    /// The timeout ran: nothing is armed any more.
    pub(crate) fn went_off(&mut self) {
        self.armed = None;
    }

    pub(crate) fn is_armed(&self) -> bool {
        self.armed.is_some()
    }

    pub(crate) fn clear(&mut self) {
        if let Some((handle, _)) = self.armed.take() {
            js::clear_timeout(&handle);
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.clear();
    }
}
