//! Dead letters: a message the consumer dead-lettered kept as a row (once
//! per idempotency key, within the topic's bounds), whether the topic has
//! room for more, a page of them with bodies byte for byte, a replay to the
//! topic's queue (one, or the oldest [`REPLAY_ALL_BATCH`]), a discard; and the
//! tables made, with the first releases' list migrated, on the first call.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{DEAD_LETTERED_BY_QUEUE, FULL_RETRY_SECS, GateObject, PAGE_BYTES, REPLAY_ALL_BATCH};
use crate::delivery::queue_message::{self, QueueMessage};
use crate::http::ApiError;
use crate::key::{MAX_PAGE, UNAVAILABLE_RETRY_SECS};
use crate::ports::{Clock, QueueSend};
use crate::queue::gate::{DeadLetterRow, GateAnswer, GateStore, NewDeadLetter};
use crate::topic::DeadLetterBounds;

impl<S: GateStore, Q: QueueSend, C: Clock> GateObject<S, Q, C> {
    /// Whether the topic's dead letters are at `bounds`, and at half of them
    /// (the router asks before accepting events; client tokens' from half).
    pub(super) async fn room(&self, bounds: DeadLetterBounds) -> Result<GateAnswer, ApiError> {
        self.prepare().await?;
        let totals = self.store.dead_totals()?;
        let full = is_full(totals.count, totals.bytes, bounds);
        let clients_full = is_full(totals.count.saturating_mul(2), totals.bytes.saturating_mul(2), bounds);
        Ok(GateAnswer::Room { full, clients_full })
    }

    /// Forget dead letter `id` (`404` if unknown, `409` while its replay is being sent).
    pub(super) async fn discard(&self, id: u64) -> Result<GateAnswer, ApiError> {
        self.not_replaying(id)?;
        self.prepare().await?;
        match self.store.forget_dead(&[id])? {
            0 => Err(ApiError::NotFound(format!("queue dead letter {id}"))),
            _ => Ok(GateAnswer::Discarded { discarded: id }),
        }
    }

    /// Send dead letter `id` back to `binding`'s queue, then forget it.
    pub(super) async fn replay_one(&self, binding: &str, id: u64) -> Result<GateAnswer, ApiError> {
        self.prepare().await?;
        let row = self.store.dead_letter(id)?;
        let row = row.ok_or_else(|| ApiError::NotFound(format!("queue dead letter {id}")))?;
        self.not_replaying(id)?;
        let replayed = self.replay(binding, vec![row]).await?;
        let remaining = self.store.dead_totals()?.count;
        Ok(GateAnswer::Replayed { replayed, remaining })
    }

    /// Replay the oldest dead letters not already being replayed, at most [`REPLAY_ALL_BATCH`].
    pub(super) async fn replay_all(&self, binding: &str) -> Result<GateAnswer, ApiError> {
        self.prepare().await?;
        let busy = self.replaying.borrow().clone();
        let mut rows = Vec::new();
        let mut after = None;
        // The oldest not already being replayed by another call.
        while rows.len() < REPLAY_ALL_BATCH {
            let page = self.store.dead_page(after, REPLAY_ALL_BATCH)?;
            let Some(last) = page.last().map(|r| r.id) else { break };
            rows.extend(page.into_iter().filter(|r| !busy.contains(&r.id)));
            after = Some(last);
        }
        rows.truncate(REPLAY_ALL_BATCH);
        let replayed = self.replay(binding, rows).await?;
        let remaining = self.store.dead_totals()?.count;
        Ok(GateAnswer::Replayed { replayed, remaining })
    }

    /// `409 replay_in_progress` while dead letter `id`'s replay is being sent.
    fn not_replaying(&self, id: u64) -> Result<(), ApiError> {
        if self.replaying.borrow().contains(&id) { Err(ApiError::ReplayInProgress(id)) } else { Ok(()) }
    }

    /// Keep a dead-lettered message (whatever the topic's configuration is
    /// now), within `bounds`; past them `429 dead_letters_full`.
    pub(super) async fn keep(&self, message: String, bounds: DeadLetterBounds) -> Result<GateAnswer, ApiError> {
        let parsed: QueueMessage = serde_json::from_str(&message)
            .map_err(|e| ApiError::BadRequest(format!("a dead letter is a lull queue message: {e}")))?;
        self.prepare().await?;
        // Kept already (its answer or its ack was lost, and the queue delivered it
        // again): the same row, never a second one, even at the bound.
        if let Some(id) = self.store.dead_letter_of(&parsed.idempotency_key)? {
            return Ok(GateAnswer::Kept { kept: id });
        }
        let totals = self.store.dead_totals()?;
        let bytes = message.len() as u64;
        if totals.count.saturating_add(1) > bounds.count || totals.bytes.saturating_add(bytes) > bounds.bytes {
            return Err(ApiError::DeadLettersFull { retry_after_secs: FULL_RETRY_SECS });
        }
        let now = self.clock.now();
        let failing = self.store.failing(&parsed.idempotency_key)?;
        let letter = NewDeadLetter {
            idempotency_key: parsed.idempotency_key,
            attempts: failing.as_ref().map_or(parsed.attempt, |f| f.attempt.max(parsed.attempt)),
            first_failed_at: failing.as_ref().map_or(now, |f| f.first_failed_at),
            kept_at: now,
            // Why the consumer dead-lettered it, else the failing forward's last outcome.
            outcome: parsed.outcome.or(failing.map(|f| f.outcome)).unwrap_or_else(|| DEAD_LETTERED_BY_QUEUE.into()),
            message,
            legacy: None,
        };
        let id = self.store.keep_dead(std::slice::from_ref(&letter))?;
        Ok(GateAnswer::Kept { kept: id })
    }

    /// A page of dead letters, bodies included: ids after `after`, at most
    /// `limit` (1..=500) and [`PAGE_BYTES`] of bodies (at least one).
    pub(super) async fn page(&self, after: Option<u64>, limit: usize) -> Result<GateAnswer, ApiError> {
        let limit = limit.clamp(1, MAX_PAGE);
        self.prepare().await?;
        let totals = self.store.dead_totals()?;
        let rows = self.store.dead_page(after, limit + 1)?;
        let mut page = Vec::new();
        let mut bytes = 0;
        let mut more = false;
        for (i, row) in rows.iter().enumerate() {
            bytes += row.letter.message.len();
            if i == limit || (i > 0 && bytes > PAGE_BYTES) {
                more = true;
                break;
            }
            page.push(row);
        }
        let next_after = if more { page.last().map(|r| r.id) } else { None };
        let dead_letters: Vec<Listed<'_>> = page.iter().map(|r| Listed::of(r)).collect();
        let page = Page { dead_letters, count: totals.count, bytes: totals.bytes, next_after };
        let text = serde_json::to_string(&page).map_err(|e| ApiError::Internal(format!("dead-letter page: {e}")))?;
        Ok(GateAnswer::Page(text))
    }

    /// Send `rows` back to `binding`'s queue, in order and in batches the queue
    /// takes; a batch's rows go once it is sent. How many went.
    async fn replay(&self, binding: &str, rows: Vec<DeadLetterRow>) -> Result<u64, ApiError> {
        let busy = self.replaying.borrow().clone();
        let rows: Vec<DeadLetterRow> = rows.into_iter().filter(|r| !busy.contains(&r.id)).collect();
        self.replaying.borrow_mut().extend(rows.iter().map(|r| r.id));
        let texts: Vec<String> = rows.iter().map(replayed_text).collect();
        let mut done = 0;
        let mut failed = None;
        for batch in queue_message::batches(&texts) {
            let ids: Vec<u64> = rows[done..done + batch.len()].iter().map(|r| r.id).collect();
            if let Err(e) = self.queue.send(binding, batch, 0).await {
                failed = Some(e);
                break;
            }
            // Sent: the rows go (a failure here sends them again on the next replay: at least once).
            if let Err(e) = self.store.forget_dead(&ids) {
                failed = Some(e.0);
                done += batch.len();
                break;
            }
            done += batch.len();
        }
        let mut replaying = self.replaying.borrow_mut();
        for row in &rows {
            replaying.remove(&row.id);
        }
        match failed {
            Some(why) if done == 0 => Err(ApiError::Unavailable { why, retry_after_secs: UNAVAILABLE_RETRY_SECS }),
            _ => Ok(done as u64),
        }
    }

    /// Make the tables and migrate the first releases' list of dead letters, once per object life.
    pub(super) async fn prepare(&self) -> Result<(), ApiError> {
        if self.prepared.get() {
            return Ok(());
        }
        self.store.prepare()?;
        if let Some(old) = self.store.legacy_dead_letters().await? {
            let now = self.clock.now();
            let letters: Vec<NewDeadLetter> = old
                .into_iter()
                .enumerate()
                .map(|(place, message)| {
                    let parsed = serde_json::from_str::<QueueMessage>(&message).ok();
                    NewDeadLetter {
                        idempotency_key: parsed.as_ref().map(|m| m.idempotency_key.clone()).unwrap_or_default(),
                        attempts: parsed.as_ref().map_or(0, |m| m.attempt),
                        first_failed_at: now,
                        kept_at: now,
                        outcome: "kept before dead letters were rows".into(),
                        message,
                        legacy: Some(u32::try_from(place).unwrap_or(u32::MAX)),
                    }
                })
                .collect();
            // Rows first (a place kept twice is one row), then the list goes.
            self.store.keep_dead(&letters)?;
            self.store.forget_legacy_dead_letters().await?;
        }
        self.prepared.set(true);
        Ok(())
    }
}

/// Whether a topic's dead letters are at `bounds`: the count reached, or no
/// room left for a message of the largest size.
pub(super) fn is_full(count: u64, bytes: u64, bounds: DeadLetterBounds) -> bool {
    count >= bounds.count || bytes.saturating_add(queue_message::MAX_MESSAGE_BYTES as u64) > bounds.bytes
}

/// A page of dead letters as the API lists it.
#[derive(Serialize)]
struct Page<'a> {
    dead_letters: Vec<Listed<'a>>,
    count: u64,
    bytes: u64,
    next_after: Option<u64>,
}

/// What a listing reads of a kept message: its topic and body, borrowed as they are.
#[derive(Deserialize)]
struct Envelope<'a> {
    topic: String,
    #[serde(borrow)]
    body: &'a RawValue,
}

/// A kept row as the API lists it: the delivery's body as it was (its JSON
/// text, never parsed into numbers), or the message's text if it is not a lull message.
#[derive(Serialize)]
struct Listed<'a> {
    id: u64,
    idempotency_key: &'a str,
    attempts: u32,
    first_failed_at: u64,
    kept_at: u64,
    last_outcome: &'a str,
    bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}

impl<'a> Listed<'a> {
    fn of(row: &'a DeadLetterRow) -> Listed<'a> {
        let l = &row.letter;
        let envelope = serde_json::from_str::<Envelope<'a>>(&l.message).ok();
        let message = envelope.is_none().then_some(l.message.as_str());
        let (topic, body) = envelope.map_or((None, None), |e| (Some(e.topic), Some(e.body)));
        Listed {
            id: row.id,
            idempotency_key: &l.idempotency_key,
            attempts: l.attempts,
            first_failed_at: l.first_failed_at,
            kept_at: l.kept_at,
            last_outcome: &l.outcome,
            bytes: l.message.len(),
            topic,
            body,
            message,
        }
    }
}

/// The message a replay sends: the kept one, its next attempt after those
/// made, waits and failures reset (a replay starts a fresh `forward_max_attempts`) (the same idempotency key and body, byte for byte).
fn replayed_text(row: &DeadLetterRow) -> String {
    match serde_json::from_str::<QueueMessage>(&row.letter.message) {
        Ok(m) => {
            QueueMessage { attempt: row.letter.attempts.saturating_add(1), waits: 0, failed: 0, outcome: None, ..m }
                .to_text()
        }
        Err(_) => row.letter.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_means_no_room_for_one_more_message_of_the_largest_size() {
        let bounds = DeadLetterBounds { count: 3, bytes: 1_000_000 };
        assert!(!is_full(2, 0, bounds));
        assert!(is_full(3, 0, bounds), "the count");
        assert!(!is_full(0, 1_000_000 - 128_000, bounds));
        assert!(is_full(0, 1_000_000 - 127_999, bounds), "the bytes: a largest message would not fit");
    }

    #[test]
    fn a_replay_sends_the_same_key_and_body_as_its_next_attempt() {
        let message =
            r#"{"topic":"q","idempotency_key":"q/k/x.1","attempt":1,"waits":4,"body":{"big":12345678901234567890}}"#;
        let letter = NewDeadLetter {
            idempotency_key: "q/k/x.1".into(),
            attempts: 4,
            first_failed_at: 1,
            kept_at: 2,
            outcome: "503".into(),
            message: message.into(),
            legacy: None,
        };
        let row = DeadLetterRow { id: 9, letter };
        assert_eq!(
            replayed_text(&row),
            r#"{"topic":"q","idempotency_key":"q/k/x.1","attempt":5,"body":{"big":12345678901234567890}}"#
        );
        let listed = serde_json::to_string(&Listed::of(&row)).unwrap();
        assert!(listed.contains(r#""body":{"big":12345678901234567890}"#), "the body as it was: {listed}");
        assert!(listed.contains(r#""id":9"#) && listed.contains(r#""last_outcome":"503""#), "{listed}");
        let lossy = r#"{"n":123456789012345678901234,"d":0.10000000000000000000000000000000000001,"e":1e400}"#;
        let message = format!(r#"{{"topic":"q","idempotency_key":"q/k/x.2","attempt":1,"body":{lossy}}}"#);
        let row = DeadLetterRow { id: 10, letter: NewDeadLetter { message, ..row.letter } };
        let listed = serde_json::to_string(&Listed::of(&row)).unwrap();
        assert!(listed.contains(&format!(r#""body":{lossy}"#)), "never parsed into numbers: {listed}");
        let garbage = DeadLetterRow { id: 11, letter: NewDeadLetter { message: "not json".into(), ..row.letter } };
        let listed = serde_json::to_string(&Listed::of(&garbage)).unwrap();
        assert!(listed.contains(r#""message":"not json""#) && !listed.contains("body"), "{listed}");
    }
}
