//! Waiting without the runtime's per-wait garbage: the machinery behind the
//! Worker's awaits (`runtime/settle.rs`), runtime-free and tested here.
//!
//! - [`Slots`]: pending waits by number. A promise the wasm awaits reports
//!   its outcome by its slot's number to one function made once per isolate,
//!   where wasm-bindgen's `JsFuture` makes two closures per promise, each a JS
//!   function registered for finalisation.
//! - [`poll_once`]: a future polled at once, its output taken if it is ready;
//!   only a future that must wait is handed to an executor ([`Handed`]), so an
//!   object call that does not wait answers without a promise, a task and a
//!   microtask of its own.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

/// One wait's place in [`Slots`].
enum Slot<T> {
    /// Not yet settled; the task to wake when it is, once polled.
    Waiting(Option<Waker>),
    /// Settled, its outcome not yet taken.
    Settled(T),
    /// Its waiter gave up before it settled: freed when it settles.
    Abandoned,
    /// Free, for the next wait.
    Free,
}

/// Pending waits by number: each is opened ([`open`](Self::open)), settled
/// once ([`settle`](Self::settle)) and either taken by a poll
/// ([`poll`](Self::poll)) or abandoned ([`abandon`](Self::abandon)). A slot is
/// reused only once both its settling and its waiter are done with it. Their
/// number is bounded by the waits in flight at once: the isolate's requests
/// and alarms in flight, a few waits each (a promise that never settles keeps
/// its slot, as it would keep `JsFuture`'s closures).
pub(crate) struct Slots<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots { slots: Vec::new(), free: Vec::new() }
    }
}

impl<T> Slots<T> {
    /// A new wait's number.
    pub(crate) fn open(&mut self) -> u32 {
        if let Some(slot) = self.free.pop() {
            self.slots[slot as usize] = Slot::Waiting(None);
            return slot;
        }
        self.slots.push(Slot::Waiting(None));
        u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
    }

    /// Wait `slot` settled with `outcome`: the task to wake, if one waits.
    /// A slot already settled, or not open, is left as it is.
    pub(crate) fn settle(&mut self, slot: u32, outcome: T) -> Option<Waker> {
        let place = self.slots.get_mut(slot as usize)?;
        match place {
            Slot::Waiting(waker) => {
                let waker = waker.take();
                *place = Slot::Settled(outcome);
                waker
            }
            Slot::Abandoned => {
                self.release(slot);
                None
            }
            Slot::Settled(_) | Slot::Free => None,
        }
    }

    /// Wait `slot`'s outcome if it has settled (its slot freed), else `None`
    /// with `waker` kept to be woken when it does.
    pub(crate) fn poll(&mut self, slot: u32, waker: &Waker) -> Option<T> {
        let place = self.slots.get_mut(slot as usize)?;
        match place {
            Slot::Settled(_) => {
                let Slot::Settled(outcome) = std::mem::replace(place, Slot::Free) else { return None };
                self.free.push(slot);
                Some(outcome)
            }
            Slot::Waiting(kept) => {
                if !kept.as_ref().is_some_and(|kept| kept.will_wake(waker)) {
                    *kept = Some(waker.clone());
                }
                None
            }
            Slot::Abandoned | Slot::Free => None,
        }
    }

    /// Wait `slot`'s waiter gives up (its future dropped before it took the
    /// outcome): a settled slot is freed now, a pending one when it settles.
    pub(crate) fn abandon(&mut self, slot: u32) {
        match self.slots.get(slot as usize) {
            Some(Slot::Settled(_)) => self.release(slot),
            Some(Slot::Waiting(_)) => self.slots[slot as usize] = Slot::Abandoned,
            _ => {}
        }
    }

    /// Slots in use (waiting, settled or abandoned).
    #[cfg(test)]
    fn in_use(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    fn release(&mut self, slot: u32) {
        self.slots[slot as usize] = Slot::Free;
        self.free.push(slot);
    }
}

/// What [`poll_once`] found.
pub(crate) enum Polled<F: Future> {
    /// The future's output: it did not wait.
    Ready(F::Output),
    /// The future waits: poll it on from an executor.
    Pending(Handed<F>),
}

/// `future` polled once: its output if ready, else the future to hand to an
/// executor ([`Handed`]), which the wakers of this first poll reach too.
pub(crate) fn poll_once<F: Future>(future: F) -> Polled<F> {
    let forward = Arc::new(Forward::default());
    let mut future = Box::pin(future);
    let waker = Waker::from(Arc::clone(&forward));
    match future.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(output) => Polled::Ready(output),
        Poll::Pending => Polled::Pending(Handed { future, forward }),
    }
}

/// A future [`poll_once`] found waiting. A waker taken in that first poll
/// (some futures keep the first one they are given) wakes whichever task
/// polls it next.
pub(crate) struct Handed<F> {
    future: Pin<Box<F>>,
    forward: Arc<Forward>,
}

impl<F: Future> Future for Handed<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.forward.follow(cx.waker());
        self.future.as_mut().poll(cx)
    }
}

/// The first poll's waker: it wakes the task that polls the future now.
#[derive(Default)]
struct Forward(Mutex<Option<Waker>>);

impl Forward {
    fn follow(&self, waker: &Waker) {
        let mut to = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !to.as_ref().is_some_and(|to| to.will_wake(waker)) {
            *to = Some(waker.clone());
        }
    }
}

impl Wake for Forward {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let to = self.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
        // Woken before it was handed on: the executor's first poll looks anyway.
        if let Some(to) = to {
            to.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A waker counting its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count::default());
        (Arc::clone(&count), Waker::from(count))
    }

    #[test]
    fn a_settled_wait_is_taken_once_and_its_slot_reused() {
        let mut slots = Slots::default();
        let (count, waker) = counting();
        let a = slots.open();
        assert_eq!(slots.poll(a, &waker), None, "not settled yet");
        let woken = slots.settle(a, "a").expect("the waiting task is woken");
        woken.wake();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(slots.poll(a, &waker), Some("a"));
        assert_eq!(slots.poll(a, &waker), None, "taken once");
        assert_eq!(slots.in_use(), 0);
        assert_eq!(slots.open(), a, "the slot is reused");
    }

    #[test]
    fn settled_before_polled_wakes_nobody_and_is_taken_at_the_poll() {
        let mut slots = Slots::default();
        let (_, waker) = counting();
        let a = slots.open();
        assert!(slots.settle(a, 1).is_none());
        assert!(slots.settle(a, 2).is_none(), "a second outcome changes nothing");
        assert_eq!(slots.poll(a, &waker), Some(1));
    }

    #[test]
    fn an_abandoned_wait_is_freed_when_it_settles_not_before() {
        let mut slots = Slots::default();
        let a = slots.open();
        slots.abandon(a);
        assert_eq!(slots.in_use(), 1, "its promise may still report to it");
        let b = slots.open();
        assert_ne!(a, b, "not reused while its promise is out");
        assert!(slots.settle(a, 0).is_none());
        assert_eq!(slots.in_use(), 1);
        assert_eq!(slots.open(), a);
    }

    #[test]
    fn abandoning_a_settled_wait_frees_it() {
        let mut slots = Slots::default();
        let a = slots.open();
        slots.settle(a, 0);
        slots.abandon(a);
        assert_eq!(slots.in_use(), 0);
    }

    #[test]
    fn unknown_slots_change_nothing() {
        let mut slots: Slots<u8> = Slots::default();
        let (_, waker) = counting();
        assert!(slots.settle(7, 1).is_none());
        assert_eq!(slots.poll(7, &waker), None);
        slots.abandon(7);
        assert_eq!(slots.in_use(), 0);
    }

    #[test]
    fn a_future_that_does_not_wait_answers_at_once() {
        match poll_once(async { 5 }) {
            Polled::Ready(five) => assert_eq!(five, 5),
            Polled::Pending(_) => panic!("it did not wait"),
        }
    }

    /// Pending until `ready`, keeping only the first waker it was given.
    struct FirstWakerOnly {
        ready: Rc<Cell<bool>>,
        kept: Kept,
    }

    impl Future for FirstWakerOnly {
        type Output = &'static str;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<&'static str> {
            if self.ready.get() {
                return Poll::Ready("done");
            }
            let kept = self.kept.take();
            self.kept.set(Some(kept.unwrap_or_else(|| cx.waker().clone())));
            Poll::Pending
        }
    }

    /// Where a [`FirstWakerOnly`] keeps its waker.
    type Kept = Rc<Cell<Option<Waker>>>;

    /// A [`FirstWakerOnly`] polled once: its switch, the waker it kept, and the future handed on.
    fn waiting() -> (Rc<Cell<bool>>, Kept, Handed<FirstWakerOnly>) {
        let ready = Rc::new(Cell::new(false));
        let kept = Rc::new(Cell::new(None));
        match poll_once(FirstWakerOnly { ready: Rc::clone(&ready), kept: Rc::clone(&kept) }) {
            Polled::Pending(handed) => (ready, kept, handed),
            Polled::Ready(_) => panic!("it waits"),
        }
    }

    #[test]
    fn a_waiting_future_is_handed_on_and_its_first_waker_reaches_the_executor() {
        let (ready, kept, mut handed) = waiting();
        let (count, executor) = counting();
        let mut cx = Context::from_waker(&executor);
        assert!(Pin::new(&mut handed).poll(&mut cx).is_pending());
        // The future wakes with the waker of the first poll, the only one it kept.
        ready.set(true);
        kept.take().expect("the first poll's waker").wake();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the executor's task is woken");
        assert_eq!(Pin::new(&mut handed).poll(&mut cx), Poll::Ready("done"));
    }

    #[test]
    fn woken_before_it_is_handed_on_is_harmless() {
        let (ready, kept, mut handed) = waiting();
        ready.set(true);
        kept.take().expect("the first poll's waker").wake();
        let (_, executor) = counting();
        assert_eq!(Pin::new(&mut handed).poll(&mut Context::from_waker(&executor)), Poll::Ready("done"));
    }
}
