//! [`Waiters`]: the forwards waiting inside a topic's gate object for a
//! lease, first come first served. A waiter's `Acquire` stays open (bounded
//! by its deadline) instead of being told to ask again; a release hands the
//! lease to the first waiter directly ([`Handed::Go`]), or wakes it
//! ([`Handed::Wake`]) to look again.
//!
//! Single-threaded (a Durable Object runs one event at a time): the slots are
//! `Rc`s, woken by their [`Waker`]s.
//!
//! Guarantees:
//! - **First come, first served**: leases go to waiters in arrival order.
//! - **Nothing handed is lost**: a slot holds what it was handed until its
//!   waiter takes it ([`Slot::take`]), also after the waiter's timer fired.
//! - **A waiter taken out for a lease gets an answer**: [`Waiters::pop`]
//!   marks its slot promised ([`Slot::is_promised`]) until the release hands
//!   it the lease (stored) or a wake (the store failed); its waiter waits for
//!   that, past its own deadline if need be, instead of leaving the lease to
//!   nobody.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::queue::gate::lease::Grant;

/// What a waiter is handed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handed {
    /// A lease, granted and stored for it.
    Go(Grant),
    /// Look again: the waiter ahead of it left, or the gate's memory was reset.
    Wake,
}

/// One waiter's mailbox.
#[derive(Default)]
pub(crate) struct Slot {
    handed: RefCell<Option<Handed>>,
    waker: RefCell<Option<Waker>>,
    promised: Cell<bool>,
}

impl Slot {
    /// Hand `what` to the waiter (a lease replaces a wake; a wake never replaces a lease).
    pub(crate) fn hand(&self, what: Handed) {
        self.promised.set(false);
        let mut handed = self.handed.borrow_mut();
        if !matches!(*handed, Some(Handed::Go(_))) {
            *handed = Some(what);
        }
        drop(handed);
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }

    /// Whether a release took this waiter out of the queue and is storing a
    /// lease for it: something (the lease, or a wake) will be handed.
    pub(crate) fn is_promised(&self) -> bool {
        self.promised.get()
    }

    /// What was handed, if anything (taken).
    pub(crate) fn take(&self) -> Option<Handed> {
        self.handed.borrow_mut().take()
    }

    /// Resolves when something is handed (without taking it).
    pub(crate) fn handed(self: &Rc<Self>) -> SlotFuture {
        SlotFuture(self.clone())
    }
}

/// [`Slot::handed`].
pub(crate) struct SlotFuture(Rc<Slot>);

impl Future for SlotFuture {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.handed.borrow().is_some() {
            return Poll::Ready(());
        }
        *self.0.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// The waiters, in arrival order.
#[derive(Default)]
pub(crate) struct Waiters {
    next: u64,
    queue: VecDeque<(u64, Rc<Slot>)>,
}

impl Waiters {
    /// Add a waiter at the back: its id and mailbox.
    pub(crate) fn join(&mut self) -> (u64, Rc<Slot>) {
        self.next += 1;
        let slot = Rc::new(Slot::default());
        self.queue.push_back((self.next, slot.clone()));
        (self.next, slot)
    }

    /// Remove waiter `id` (it got its lease or gave up); the new first waiter,
    /// if it changed, is woken to set its own timer.
    pub(crate) fn leave(&mut self, id: u64) {
        let was_first = self.queue.front().is_some_and(|(first, _)| *first == id);
        self.queue.retain(|(waiter, _)| *waiter != id);
        if was_first && let Some((_, slot)) = self.queue.front() {
            slot.hand(Handed::Wake);
        }
    }

    /// Whether `id` is the first waiter.
    pub(crate) fn is_first(&self, id: u64) -> bool {
        self.queue.front().is_some_and(|(first, _)| *first == id)
    }

    /// How many wait before waiter `id` (`None` if it is not queued).
    pub(crate) fn position(&self, id: u64) -> Option<usize> {
        self.queue.iter().position(|(waiter, _)| *waiter == id)
    }

    /// Whether waiter `id` is still queued.
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.queue.iter().any(|(waiter, _)| *waiter == id)
    }

    /// The first waiter, taken out of the queue: its slot is promised a lease (or a wake).
    pub(crate) fn pop(&mut self) -> Option<Rc<Slot>> {
        let (_, slot) = self.queue.pop_front()?;
        slot.promised.set(true);
        Some(slot)
    }

    /// Wake the first waiter (to look again).
    pub(crate) fn wake_first(&self) {
        if let Some((_, slot)) = self.queue.front() {
            slot.hand(Handed::Wake);
        }
    }

    /// Wake every waiter (the gate's memory was reset: each looks again).
    pub(crate) fn wake_all(&self) {
        for (_, slot) in &self.queue {
            slot.hand(Handed::Wake);
        }
    }

    /// How many wait.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether none waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll(f: &mut SlotFuture) -> Poll<()> {
        Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn waiters_are_served_in_order_and_a_lease_is_never_overwritten() {
        let mut waiters = Waiters::default();
        let (a, slot_a) = waiters.join();
        let (b, slot_b) = waiters.join();
        assert!(waiters.is_first(a) && !waiters.is_first(b));
        let mut handed = slot_a.handed();
        assert_eq!(poll(&mut handed), Poll::Pending);
        let go = Handed::Go(Grant::Go { lease: 1, expires_at: 9 });
        let popped = waiters.pop().unwrap();
        assert!(slot_a.is_promised(), "taken out for a lease");
        popped.hand(go);
        assert!(!slot_a.is_promised());
        slot_a.hand(Handed::Wake);
        assert_eq!(poll(&mut handed), Poll::Ready(()));
        assert_eq!(slot_a.take(), Some(go), "a wake never replaces a lease");
        assert_eq!(slot_a.take(), None);
        assert!(waiters.is_first(b), "b is first now");
        let (c, slot_c) = waiters.join();
        waiters.leave(b);
        assert_eq!(slot_c.take(), Some(Handed::Wake), "the new first waiter looks again");
        assert_eq!(slot_b.take(), None);
        assert!(waiters.is_first(c));
        waiters.leave(c);
        assert!(waiters.is_empty());
    }
}
