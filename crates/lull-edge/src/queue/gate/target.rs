//! The topic's target as its object keeps it: a delivery made without a lease
//! reported ([`GateOp::Report`](super::GateOp::Report)), its state read for a
//! key's copy, an operator's resume, the topic's status, and the one log line
//! each change of state gets ([`GateObject::told`]); and the topic's counters
//! for `GET /v1/metrics`: isolates' sums added ([`GateOp::Tally`](super::GateOp::Tally)),
//! the totals read, a pause and a queue topic's forwards counted here.

use std::collections::BTreeMap;

use serde_json::json;

use super::{GateObject, TargetStatus, TopicStatus, not_loaded};
use crate::http::ApiError;
use crate::log::Fact;
use crate::metrics::{Point, What, add_up};
use crate::ports::{Clock, QueueSend};
use crate::queue::gate::{Forwarded, GateAnswer, GateState, GateStore};
use crate::target::{Change, TargetView};
use crate::topic::Topic;

impl<S: GateStore, Q: QueueSend, C: Clock> GateObject<S, Q, C> {
    /// The target's state now.
    fn view(&self) -> Result<TargetView, ApiError> {
        self.state.borrow().as_ref().map(|s| s.target.view()).ok_or_else(not_loaded)
    }

    /// A delivery made without a lease ended as `outcome`: the target's state
    /// learns from it, stored before the answer; waiters look again if it is now held.
    pub(super) async fn report(&self, name: &str, topic: &Topic, outcome: Forwarded) -> Result<GateAnswer, ApiError> {
        self.load(topic).await?;
        let now = self.clock.now();
        let change = {
            let mut guard = self.state.borrow_mut();
            let Some(GateState { target, metrics, .. }) = guard.as_mut() else { return Err(not_loaded()) };
            let change = target.answered(now, outcome.verdict(), outcome.status, &outcome.detail, &topic.target_terms);
            count_pause(metrics, change.as_ref());
            change
        };
        self.commit(Vec::new()).await?;
        if self.view()?.state != crate::target::TargetState::Active {
            self.waiters.borrow().wake_all();
        }
        self.told(name, change);
        Ok(GateAnswer::Targeted { target: self.view()? })
    }

    /// The target's state, for a key's copy.
    pub(super) async fn target(&self, topic: &Topic) -> Result<GateAnswer, ApiError> {
        self.load(topic).await?;
        Ok(GateAnswer::Targeted { target: self.view()? })
    }

    /// An operator starts the target again: stored before the answer.
    pub(super) async fn resume(&self, name: &str, topic: &Topic) -> Result<GateAnswer, ApiError> {
        self.load(topic).await?;
        let now = self.clock.now();
        let change = {
            let mut guard = self.state.borrow_mut();
            let Some(GateState { target, .. }) = guard.as_mut() else { return Err(not_loaded()) };
            target.resume(now)
        };
        self.commit(Vec::new()).await?;
        self.told(name, change);
        Ok(GateAnswer::Targeted { target: self.view()? })
    }

    /// The topic's status: its target, bound, leases and requests served.
    pub(super) async fn topic_status(&self, name: &str, topic: &Topic) -> Result<GateAnswer, ApiError> {
        self.load(topic).await?;
        let now = self.clock.now();
        let (target, in_flight) = match self.state.borrow().as_ref() {
            Some(GateState { gate, target, .. }) => (TargetStatus::of(target), gate.in_flight(now)),
            None => return Err(not_loaded()),
        };
        Ok(GateAnswer::Topic(TopicStatus {
            topic: name.to_string(),
            target,
            forward_concurrency: topic.forward.map(|f| f.concurrency),
            forward_rate_per_s: topic.forward.and_then(|f| f.rate_per_s),
            in_flight,
            waiting: self.waiters.borrow().len(),
            requests: self.requests.borrow().iter().map(|(op, n)| (op.to_string(), *n)).collect(),
        }))
    }

    /// An isolate's sums for the topic's counters: added, stored before the answer.
    pub(super) async fn tally(&self, topic: &Topic, counts: BTreeMap<String, u64>) -> Result<GateAnswer, ApiError> {
        self.load(topic).await?;
        {
            let mut guard = self.state.borrow_mut();
            let Some(GateState { metrics, .. }) = guard.as_mut() else { return Err(not_loaded()) };
            add_up(metrics, &counts);
        }
        self.commit(Vec::new()).await?;
        Ok(GateAnswer::Counted { ok: true })
    }

    /// The topic's counters and its target's state.
    pub(super) async fn totals(&self, topic: &Topic) -> Result<GateAnswer, ApiError> {
        self.load(topic).await?;
        match self.state.borrow().as_ref() {
            Some(GateState { metrics, target, .. }) => {
                Ok(GateAnswer::Totals { totals: metrics.clone(), state: target.state })
            }
            None => Err(not_loaded()),
        }
    }

    /// One log line for a change of the target's state (and a pause's data point).
    pub(super) fn told(&self, name: &str, change: Option<Change>) {
        let fact = match change {
            None => return,
            Some(Change::Paused { until, detail }) => {
                self.clock.point(Point::new(name, What::Pause, &detail));
                Fact::new("target_paused", json!({"topic": name, "until": until, "answer": detail}))
            }
            Some(Change::Disabled { why }) => Fact::new("target_disabled", json!({"topic": name, "why": why})),
            Some(Change::Resumed { by }) => Fact::new("target_resumed", json!({"topic": name, "by": by})),
        };
        self.clock.log(&fact.line(&[]));
    }
}

/// A pause counted in the topic's totals (`target_pauses_total`).
pub(super) fn count_pause(metrics: &mut BTreeMap<String, u64>, change: Option<&Change>) {
    if let Some(Change::Paused { .. }) = change {
        add_up(metrics, &[("target_pauses_total".to_string(), 1)].into());
    }
}
