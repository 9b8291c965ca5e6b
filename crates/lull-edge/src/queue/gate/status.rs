//! The consumer's counters (a `Count`, stored as a change of the gate) and
//! the status: in flight, the bound, counters, requests served and the
//! oldest dead letters ([`GateStatus`]).

use super::dead_letters::is_full;
use super::{GateObject, STATUS_DEAD_LETTERS, not_loaded};
use crate::http::ApiError;
use crate::ports::{Clock, QueueSend};
use crate::queue::gate::{Counter, GateAnswer, GateState, GateStatus, GateStore, StatusLetter};
use crate::topic::{QueueDelivery, Topic};

impl<S: GateStore, Q: QueueSend, C: Clock> GateObject<S, Q, C> {
    /// Count one of the consumer's outcomes, stored before the answer.
    pub(super) async fn count(&self, topic: &Topic, counter: Counter) -> Result<GateAnswer, ApiError> {
        self.load(topic).await?;
        {
            let mut guard = self.state.borrow_mut();
            let Some(GateState { counters, .. }) = guard.as_mut() else { return Err(not_loaded()) };
            *counters.entry(counter.as_str().to_string()).or_default() += 1;
        }
        self.commit(Vec::new()).await?;
        Ok(GateAnswer::Counted { ok: true })
    }

    /// The status: the gate's part, the request counts and the dead letters.
    pub(super) async fn status(
        &self,
        name: &str,
        topic: &Topic,
        queue: &QueueDelivery,
    ) -> Result<GateAnswer, ApiError> {
        self.load(topic).await?;
        let now = self.clock.now();
        let (in_flight, counters) = match self.state.borrow().as_ref() {
            Some(GateState { gate, counters, .. }) => (gate.in_flight(now), counters.clone()),
            None => return Err(not_loaded()),
        };
        let waiting = self.waiters.borrow().len();
        self.prepare().await?;
        let totals = self.store.dead_totals()?;
        let oldest = self.store.dead_page(None, STATUS_DEAD_LETTERS)?;
        let requests = self.requests.borrow().iter().map(|(op, n)| (op.to_string(), *n)).collect();
        let requests_total = self.requests.borrow().values().sum();
        let bounds = queue.dead_letters;
        Ok(GateAnswer::Status(GateStatus {
            counters,
            dead_letter_bytes: totals.bytes,
            dead_letter_count: totals.count,
            dead_letters: oldest
                .into_iter()
                .map(|r| StatusLetter {
                    attempts: r.letter.attempts,
                    id: r.id,
                    idempotency_key: r.letter.idempotency_key,
                })
                .collect(),
            dead_letters_full: is_full(totals.count, totals.bytes, bounds),
            forward_concurrency: topic.forward.map_or(1, |f| f.concurrency),
            forward_rate_per_s: topic.forward.and_then(|f| f.rate_per_s),
            in_flight,
            max_queue_dead_letter_bytes: bounds.bytes,
            max_queue_dead_letters: bounds.count,
            requests,
            requests_total,
            topic: name.to_string(),
            waiting,
        }))
    }
}
