//! Leases: an `Acquire` granted at once, or held open in the queue of
//! waiters until a release hands it the room (first come, first served) or
//! its time runs out; a `Release`, which counts how the forward ended, hands
//! the room it frees to the first waiters, and records a failing forward for
//! its dead letter.

use std::pin::pin;
use std::rc::Rc;

use futures::future::select;

use super::wait::{Handed, Slot};
use serde_json::json;

use super::{FAILING_KEEP_MS, GateObject, LEASE_MARGIN_MS, MAX_HOLD_MS, not_loaded};
use crate::http::ApiError;
use crate::log::Fact;
use crate::metrics::{add_up, outcome_class};
use crate::ports::{Clock, QueueSend};
use crate::queue::gate::{Counter, Failing, Forwarded, GateAnswer, GateState, GateStore, Grant};
use crate::target::{Admission, DISABLED_RECHECK_MS};
use crate::topic::Topic;

/// A waiter leaving (its lease taken, its time out, or its request dropped):
/// out of the queue, and a lease handed but never taken goes back.
struct Leave<'a, S, Q, C> {
    object: &'a GateObject<S, Q, C>,
    me: Option<(u64, Rc<Slot>)>,
}

impl<S, Q, C> Drop for Leave<'_, S, Q, C> {
    fn drop(&mut self) {
        if let Some((id, slot)) = self.me.take() {
            self.object.waiters.borrow_mut().leave(id);
            // A lease handed but never taken goes on as a release's would. (A
            // lease still being stored for it is passed on by that release, which
            // finds nobody holding the slot.)
            if let Some(Handed::Go(grant)) = slot.take() {
                self.object.pass_on(grant);
            }
        }
    }
}

impl<S: GateStore, Q: QueueSend, C: Clock> GateObject<S, Q, C> {
    /// A lease now, or after waiting (first come, first served) at most
    /// `wait_ms` — or, asked to wait at all, up to [`MAX_HOLD_MS`] when its
    /// turn is likely by then ([`Gate::estimate`](super::Gate::estimate)). A
    /// waiter that leaves is told when its turn is likely. While the target is
    /// paused or disabled none is granted: each is told when to ask again
    /// (after a pause, the first lease is the probe; the others wait for its answer).
    pub(super) async fn acquire(&self, name: &str, topic: &Topic, wait_ms: u64) -> Result<GateAnswer, ApiError> {
        let arrived = self.clock.now();
        let mut deadline = arrived.saturating_add(wait_ms.min(MAX_HOLD_MS));
        // A waiter (one that asked to wait at all) whose turn is likely within this stays for it.
        let longest = if wait_ms > 0 { arrived.saturating_add(MAX_HOLD_MS) } else { deadline };
        let lease_ms = topic.delivery_timeout_ms + LEASE_MARGIN_MS;
        let mut leave = Leave { object: self, me: None };
        loop {
            self.load(topic).await?;
            let now = self.clock.now();
            // The target first: nothing goes while it is held.
            let held = self.state.borrow().as_ref().and_then(|s| s.target.held_until(now));
            if let Some(until) = held {
                drop(leave);
                let retry_at = until.unwrap_or(now.saturating_add(DISABLED_RECHECK_MS));
                return Ok(GateAnswer::Grant(Grant::Wait { retry_at }));
            }
            // Only the first waiter (or a newcomer when none waits) may take room.
            let mine = match &leave.me {
                Some((id, _)) => self.waiters.borrow().is_first(*id),
                None => self.waiters.borrow().is_empty(),
            };
            let grant = match self.state.borrow_mut().as_mut() {
                Some(state) if mine => {
                    let grant = state.gate.acquire(now);
                    if matches!(grant, Grant::Go { .. }) && state.target.admit(now, lease_ms) == Admission::Probe {
                        self.clock.log(&Fact::new("target_probe", json!({"topic": name})).line(&[]));
                    }
                    grant
                }
                Some(state) => Grant::Wait { retry_at: state.gate.acquire_hint(now) },
                None => return Err(not_loaded()),
            };
            let retry_at = match grant {
                Grant::Go { .. } => {
                    if let Some((id, _)) = leave.me.take() {
                        self.waiters.borrow_mut().leave(id);
                    }
                    self.save().await?;
                    return Ok(GateAnswer::Grant(grant));
                }
                Grant::Wait { retry_at } => retry_at,
            };
            if now >= deadline {
                // Its turn as the gate sees it: its place in line and how long forwards hold their lease.
                let waiters = self.waiters.borrow();
                let ahead = leave.me.as_ref().and_then(|(id, _)| waiters.position(*id)).unwrap_or(waiters.len());
                let turn = self.state.borrow().as_ref().map_or(retry_at, |s| s.gate.estimate(now, ahead));
                drop(waiters);
                if turn < longest && deadline < longest {
                    deadline = longest;
                } else {
                    return Ok(GateAnswer::Grant(Grant::Wait { retry_at: turn.max(now) }));
                }
            }
            let slot = match &leave.me {
                // Still queued (a wake, or the first's timer).
                Some((id, slot)) if self.waiters.borrow().contains(*id) => slot.clone(),
                // New, or taken out by a release whose store failed: (re)join at the back.
                _ => {
                    let joined = self.waiters.borrow_mut().join();
                    let slot = joined.1.clone();
                    leave.me = Some(joined);
                    slot
                }
            };
            let first = leave.me.as_ref().is_some_and(|(id, _)| self.waiters.borrow().is_first(*id));
            let until = if first { retry_at.min(deadline) } else { deadline };
            {
                // Its own block: the sleep (and its timer) ends with the select, not the loop below.
                let sleep = pin!(self.clock.sleep(until.saturating_sub(now).max(1)));
                let _ = select(slot.handed(), sleep).await;
            }
            loop {
                if let Some(Handed::Go(grant)) = slot.take() {
                    // Handed by a release, which stored it and took us out of the queue.
                    leave.me = None;
                    return Ok(GateAnswer::Grant(grant));
                }
                if !slot.is_promised() {
                    break;
                }
                // A release took us out of the queue and is storing our lease: wait
                // for it (or for a wake, if its store fails), even past the deadline.
                slot.handed().await;
            }
        }
    }

    /// The forward under `lease` ended (and how, if it was forwarded): the
    /// lease goes, its outcome is counted (a queue topic's) and told to the
    /// target's state, and the room goes to the first waiters — unless the
    /// target is now held: then each looks again (and is told to wait) —
    /// stored before the answer.
    pub(super) async fn release(
        &self,
        name: &str,
        topic: &Topic,
        lease: u64,
        outcome: Option<Forwarded>,
    ) -> Result<GateAnswer, ApiError> {
        self.load(topic).await?;
        let now = self.clock.now();
        let (released, handed, failing, change, view) = {
            let mut guard = self.state.borrow_mut();
            let Some(GateState { gate, counters, target, metrics }) = guard.as_mut() else { return Err(not_loaded()) };
            // A forward that ended teaches the gate how long forwards hold their lease.
            let released = if outcome.is_some() { gate.finished(lease, now) } else { gate.release(lease) };
            // Counted and recorded only by the release that applied: a
            // retried one (its answer lost) finds the lease gone.
            let outcome = outcome.filter(|_| released);
            let change = outcome
                .as_ref()
                .and_then(|f| target.answered(now, f.verdict(), f.status, &f.detail, &topic.target_terms));
            super::target::count_pause(metrics, change.as_ref());
            if let Some(outcome) = outcome.as_ref().filter(|_| topic.queue.is_some()) {
                // A throttled forward waits (counted `requeued` by the consumer), not retried.
                if !outcome.verdict().is_held() {
                    let counter = if outcome.ok { Counter::Acked } else { Counter::Retried };
                    *counters.entry(counter.as_str().to_string()).or_default() += 1;
                }
                // A queue topic's forwards are counted here (a webhook key counts its own attempts).
                let class = outcome_class(&outcome.as_outcome());
                add_up(metrics, &[(format!("delivery_attempts_total|{class}"), 1)].into());
            }
            // The room goes to the first waiters, in order, while the target takes deliveries.
            let mut handed = Vec::new();
            let mut waiters = self.waiters.borrow_mut();
            if target.held_until(now).is_some() {
                waiters.wake_all();
            }
            while target.held_until(now).is_none() && !waiters.is_empty() {
                let grant = gate.acquire(now);
                let Grant::Go { lease, .. } = grant else { break };
                // After a pause the first lease is the probe, and it goes alone.
                let admission = target.admit(now, topic.delivery_timeout_ms + LEASE_MARGIN_MS);
                if let Admission::Hold { .. } = admission {
                    gate.release(lease);
                    break;
                }
                if let Some(slot) = waiters.pop() {
                    handed.push((slot, grant));
                }
                if admission == Admission::Probe {
                    break;
                }
            }
            let failing = outcome.filter(|_| topic.queue.is_some());
            (released, handed, failing, change, target.view())
        };
        self.commit(handed).await?;
        self.told(name, change);
        if let Some(f) = failing {
            // Only what a dead letter will say of it: a lost record loses no message.
            let failed = (!f.ok).then_some(Failing { first_failed_at: now, attempt: f.attempt, outcome: f.detail });
            let stale = now.saturating_sub(FAILING_KEEP_MS);
            let _ = self.store.record_forward(&f.idempotency_key, failed.as_ref(), stale);
        }
        Ok(GateAnswer::Released { released, target: Some(view) })
    }
}
