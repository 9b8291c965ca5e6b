//! What a key asks of its topic's object around a delivery (webhook topics):
//! before it, whether it may go ([`Pass`]: from the isolate's copy of the
//! target's state, asking the object only when the topic has a bound or the
//! target is not active), and after it, what the target answered — only
//! when the object must know (a lease to release, trouble, or the first
//! delivery after trouble). A healthy target with no bound costs a delivery
//! no request: at most one per topic per isolate per
//! [`TARGET_STALE_MS`](crate::target::TARGET_STALE_MS).

use super::KeyObject;
use crate::error::ApiError;
use crate::ports::{Host, Outbound, Outcome, Store};
use crate::queue::gate::{Forwarded, GateAnswer, GateOp, Gates, Grant};
use crate::target::cache::Cached;
use crate::target::{
    DISABLED_RECHECK_MS, PROBE_RECHECK_MS, RESUME_SPREAD_MS, THROTTLE_BASE_MS, TargetState, TargetView, Verdict, spread,
};
use crate::topic::Topic;

/// How long a key's request for a lease may wait in its topic's gate (ms), as a queue message's.
pub(crate) const KEY_GATE_WAIT_MS: u64 = crate::queue::consume::GATE_WAIT_BUDGET_MS;
/// A key whose topic's object did not answer asks again this much later (ms), for a bounded topic.
pub(crate) const GATE_ERROR_RETRY_MS: u64 = 1_000;

/// Whether a due delivery may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Go (under `lease`, to release after); `view`: the target's state as heard.
    Go {
        /// The gate's lease, if one was taken.
        lease: Option<u64>,
        /// The target's state as the key heard it.
        view: Option<TargetView>,
    },
    /// Not before `until` (unix ms).
    Hold {
        /// When to try again.
        until: u64,
    },
}

/// What the target's state as heard (`view`) decides at `now` for `key`'s
/// delivery: held while paused or disabled, gone when nothing bounds the
/// topic and the target is open; `None` when the topic's object decides.
fn decide(topic: &Topic, key: &str, view: Option<TargetView>, now: u64) -> Option<Pass> {
    let spread = spread(key, RESUME_SPREAD_MS);
    match view.map(|v| v.state) {
        // At most a minute at a time: a resume reaches a key held on a long pause.
        Some(TargetState::Paused { until }) if now < until => {
            Some(Pass::Hold { until: until.min(now + DISABLED_RECHECK_MS) + spread })
        }
        Some(TargetState::Disabled) => Some(Pass::Hold { until: now + DISABLED_RECHECK_MS + spread }),
        _ if topic.forward.is_none() && view.is_none_or(|v| v.open()) => Some(Pass::Go { lease: None, view }),
        _ => None,
    }
}

impl<S: Store, H: Host, O: Outbound, G: Gates> KeyObject<S, H, O, G> {
    /// The target's state for `topic`, from the isolate's copy, or fetched
    /// (by one key per period); `None` if never heard (taken as active).
    async fn view(&self, topic: &str) -> Option<TargetView> {
        match self.isolate.targets.look(topic, self.host.now()) {
            Cached::Use(view) => view,
            Cached::Fetch => match self.gates.ask(topic, GateOp::Target).await {
                Ok(GateAnswer::Targeted { target }) => {
                    self.isolate.targets.heard(topic, target, self.host.now());
                    Some(target)
                }
                _ => {
                    self.isolate.targets.missed(topic, self.host.now());
                    None
                }
            },
        }
    }

    /// Whether `key`'s due delivery to `topic`'s target may go at `now`, when
    /// the isolate's copy alone decides it (no request, no await); `None`
    /// when the copy must be fetched or the topic's object asked: then [`pass`](Self::pass).
    pub(super) fn pass_known(&self, topic: &Topic, key: &str, now: u64) -> Option<Pass> {
        decide(topic, key, self.isolate.targets.peek(&topic.name, now)?, now)
    }

    /// May `key`'s due delivery to `topic`'s target go now?
    pub(super) async fn pass(&self, topic: &Topic, key: &str) -> Pass {
        let view = self.view(&topic.name).await;
        let now = self.host.now();
        if let Some(pass) = decide(topic, key, view, now) {
            return pass;
        }
        let spread = spread(key, RESUME_SPREAD_MS);
        // A pause that ended: one key of this isolate at a time asks to go (the probe's turn).
        if topic.forward.is_none() && !self.isolate.targets.may_ask(&topic.name, now) {
            return Pass::Hold { until: now + PROBE_RECHECK_MS + spread };
        }
        // A bound to keep, or a pause that ended (one probe goes first): the topic's object decides.
        match self.gates.ask(&topic.name, GateOp::Acquire { wait_ms: KEY_GATE_WAIT_MS }).await {
            Ok(GateAnswer::Grant(Grant::Go { lease, .. })) => Pass::Go { lease: Some(lease), view },
            Ok(GateAnswer::Grant(Grant::Wait { retry_at })) => Pass::Hold { until: retry_at.max(now) + spread },
            // No answer: with no bound to keep, go; else ask again soon.
            _ if topic.forward.is_none() => Pass::Go { lease: None, view },
            _ => Pass::Hold { until: self.host.now() + GATE_ERROR_RETRY_MS + spread },
        }
    }

    /// A lease `pass` took for a delivery that was never sent goes back
    /// (best effort: else it expires).
    pub(super) async fn give_back(&self, topic: &Topic, pass: Pass) {
        if let Pass::Go { lease: Some(lease), .. } = pass {
            let _ = self.gates.ask(&topic.name, GateOp::Release { lease, outcome: None }).await;
        }
    }

    /// Tell `topic`'s object how the delivery went, when it must know: the
    /// lease to release, trouble, or the first delivery after trouble. What
    /// it answers of the target replaces the isolate's copy.
    pub(super) async fn tell(&self, topic: &Topic, pass: Pass, forwarded: Forwarded) -> Option<TargetView> {
        let Pass::Go { lease, view } = pass else { return None };
        let verdict = forwarded.verdict();
        let op = match lease {
            Some(lease) => GateOp::Release { lease, outcome: Some(forwarded) },
            None if verdict.is_trouble() || view.is_some_and(|v| v.failing_since.is_some()) => {
                GateOp::Report { outcome: forwarded }
            }
            None => return None,
        };
        let tries = if lease.is_some() { crate::queue::consume::RELEASE_TRIES } else { 1 };
        for _ in 0..tries {
            match self.gates.ask(&topic.name, op.clone()).await {
                Ok(GateAnswer::Released { target: Some(target), .. } | GateAnswer::Targeted { target }) => {
                    self.isolate.targets.heard(&topic.name, target, self.host.now());
                    return Some(target);
                }
                Ok(_) => return None,
                Err(_) => continue,
            }
        }
        None
    }

    /// Tell `topic`'s object that this key holds dead letters (their newest
    /// time), once per newer one, so a recover finds it. One it could not
    /// tell is told at the key's next alarm.
    pub(super) async fn tell_dead_letters(&self, topic: &str) -> Result<(), ApiError> {
        let untold = self.with(|l| {
            let newest = l.ks.engine().dead_letters().iter().map(|d| d.failed_at).max();
            Ok(newest.filter(|at| *at > l.dead_told).map(|at| (at, l.key.as_str().to_string())))
        })?;
        let Some((at, key)) = untold else { return Ok(()) };
        if self.gates.ask(topic, GateOp::DeadKey { key, at }).await.is_ok() {
            self.with(|l| {
                l.dead_told = l.dead_told.max(at);
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Hand the isolate's sums for `topic` to the topic's object, if they are
    /// due ([`crate::metrics::Tally::due`]); a failed hand-over gives them back.
    pub(super) async fn hand_over(&self, topic: &str) {
        crate::metrics::hand_over(&self.isolate.tally, &self.gates, topic, self.host.now()).await;
    }

    /// When a throttled (or gone) delivery of `key` goes again: when the
    /// target's state says (`told`), else by what the answer itself said.
    pub(super) fn again_at(&self, topic: &Topic, key: &str, told: Option<TargetView>, outcome: &Outcome) -> u64 {
        let now = self.host.now();
        let spread = spread(key, RESUME_SPREAD_MS);
        match (told.map(|v| v.state), Verdict::of(outcome)) {
            (Some(TargetState::Paused { until }), _) => until.clamp(now, now + DISABLED_RECHECK_MS) + spread,
            (Some(TargetState::Disabled), _) | (_, Verdict::Gone) => now + DISABLED_RECHECK_MS + spread,
            (_, Verdict::Throttled { retry_after_ms }) => {
                now + retry_after_ms.unwrap_or(THROTTLE_BASE_MS).min(topic.target_terms.max_retry_after_ms) + spread
            }
            _ => now + THROTTLE_BASE_MS + spread,
        }
    }
}
