//! `flushOnHide`: run pending work when the page is hidden or unloaded
//! (browsers throttle timers in hidden tabs and drop them on close).

use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{Document, Event, VisibilityState, Window};

/// Listens to `visibilitychange` (to hidden) and `pagehide`; dropping it removes both listeners.
pub(crate) struct HideHook {
    window: Window,
    document: Document,
    listener: Closure<dyn FnMut(Event)>,
}

impl HideHook {
    /// `None` outside a page (no `window`/`document`, e.g. a worker or Node).
    pub(crate) fn new(mut on_hide: impl FnMut() + 'static) -> Option<Self> {
        let window = web_sys::window()?;
        let document = window.document()?;
        let doc = document.clone();
        let listener = Closure::new(move |event: Event| {
            if event.type_() == "pagehide" || doc.visibility_state() == VisibilityState::Hidden {
                on_hide();
            }
        });
        let handler = listener.as_ref().unchecked_ref();
        document.add_event_listener_with_callback("visibilitychange", handler).ok()?;
        window.add_event_listener_with_callback("pagehide", handler).ok()?;
        Some(HideHook { window, document, listener })
    }
}

impl Drop for HideHook {
    fn drop(&mut self) {
        let handler = self.listener.as_ref().unchecked_ref();
        let _ = self.document.remove_event_listener_with_callback("visibilitychange", handler);
        let _ = self.window.remove_event_listener_with_callback("pagehide", handler);
    }
}
