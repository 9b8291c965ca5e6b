//! A JS promise awaited ([`outcome_of`]) without a closure of the wasm's per
//! promise: each reports to one function installed once per isolate
//! (`js/settle.mjs`), by its slot in [`Slots`]. wasm-bindgen's `JsFuture`
//! makes two closures per promise, each a JS function registered for
//! finalisation and a call back into the wasm to free it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use worker::js_sys::{Function, Promise};

use crate::waits::Slots;

#[wasm_bindgen(module = "/js/settle.mjs")]
extern "C" {
    /// `report` takes every watched promise's outcome from now on.
    fn install(report: &Function);
    /// `promise`'s outcome to the installed function, as `(slot, fulfilled, value)`.
    fn watch(promise: &Promise, slot: u32);
}

/// A promise's outcome: its value, or what it was rejected with.
type Outcome = Result<JsValue, JsValue>;

thread_local! {
    /// The isolate's pending promises; [`report`] is installed in
    /// `js/settle.mjs` when they are first used.
    static SLOTS: RefCell<Slots<Outcome>> = {
        // Made once per isolate and kept for its life: every promise reports to it.
        let report = Closure::<dyn Fn(u32, bool, JsValue)>::new(report);
        install(report.as_ref().unchecked_ref());
        report.forget();
        RefCell::default()
    };
}

/// What every watched promise reports to.
fn report(slot: u32, fulfilled: bool, value: JsValue) {
    let outcome = if fulfilled { Ok(value) } else { Err(value) };
    if let Some(waker) = SLOTS.with_borrow_mut(|slots| slots.settle(slot, outcome)) {
        waker.wake();
    }
}

/// `promise`'s outcome, when it settles.
pub(super) fn outcome_of(promise: &Promise) -> Settling {
    let slot = SLOTS.with_borrow_mut(Slots::open);
    watch(promise, slot);
    Settling { slot, taken: false }
}

/// A watched promise's outcome, as a future ([`outcome_of`]).
pub(super) struct Settling {
    slot: u32,
    taken: bool,
}

impl Future for Settling {
    type Output = Outcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        let slot = self.slot;
        match SLOTS.with_borrow_mut(|slots| slots.poll(slot, cx.waker())) {
            Some(outcome) => {
                self.taken = true;
                Poll::Ready(outcome)
            }
            None => Poll::Pending,
        }
    }
}

impl Drop for Settling {
    fn drop(&mut self) {
        if !self.taken {
            let slot = self.slot;
            SLOTS.with_borrow_mut(|slots| slots.abandon(slot));
        }
    }
}
