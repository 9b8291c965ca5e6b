//! [`GateOp`]: the one form of a call to a topic's gate object, from the
//! queue consumer or the router, and [`GateAnswer`], its answer. A call
//! crosses to the object as one line of JSON, a [`GateCall`] (the argument of
//! its `call` over RPC: [`GateCall::to_wire`]); the answer comes back as JSON
//! written by serde ([`GateAnswer::to_text`]) and read by serde
//! ([`GateAnswer::from_text`]). Both forms are the first releases' byte for
//! byte (an object and a consumer or router of two releases meet during a
//! rollout); the test below pins them. [`Gates`] is the port through which
//! the consumer asks.

use std::collections::BTreeMap;
use std::future::Future;

use serde::{Deserialize, Serialize};

use crate::http::ApiError;
use crate::ports::Outcome;
use crate::queue::gate::lease::Grant;
use crate::target::{LastAnswer, Target, TargetState, TargetView, Verdict};

/// A counter of the topic's consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// A message forwarded and acked.
    Acked,
    /// A message retried through the queue.
    Retried,
    /// A message sent to the queue again to wait (for room, or on the dead-letter queue).
    Requeued,
    /// A message the consumer sent to the dead-letter queue itself (its failed
    /// forwards reached `forward_max_attempts`, or it waited [`crate::queue::consume::MAX_WAITS`] times).
    DeadLettered,
}

impl Counter {
    /// Its name in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Counter::Acked => "acked",
            Counter::Retried => "retried",
            Counter::Requeued => "requeued",
            Counter::DeadLettered => "dead_lettered",
        }
    }
}

/// How a forward under a lease ended (told with its release).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Forwarded {
    /// The message's idempotency key.
    pub idempotency_key: String,
    /// Its attempt number (`Lull-Attempt`).
    pub attempt: u32,
    /// A 2xx answer.
    pub ok: bool,
    /// The status code, `timeout`, or the network error.
    pub detail: String,
    /// The HTTP status, if the target answered (absent from the first releases' calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Its `Retry-After`, as ms from the answer, if it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl Forwarded {
    /// How the delivery of `idempotency_key`'s attempt `attempt` ended, as `outcome` says.
    pub fn of(idempotency_key: &str, attempt: u32, outcome: &Outcome) -> Forwarded {
        Forwarded {
            idempotency_key: idempotency_key.to_string(),
            attempt,
            ok: outcome.ok,
            detail: outcome.detail.clone(),
            status: outcome.status,
            retry_after_ms: outcome.retry_after_ms,
        }
    }

    /// The outcome it tells of.
    pub fn as_outcome(&self) -> Outcome {
        Outcome { ok: self.ok, detail: self.detail.clone(), status: self.status, retry_after_ms: self.retry_after_ms }
    }

    /// What it says of the target.
    pub fn verdict(&self) -> Verdict {
        Verdict::of(&self.as_outcome())
    }
}

/// What the consumer (or the router) asks a topic's gate object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum GateOp {
    /// A lease to forward now, waiting up to `wait_ms` for one.
    Acquire {
        /// How long the call may wait for room (ms; at most [`MAX_HOLD_MS`](super::MAX_HOLD_MS)).
        #[serde(default)]
        wait_ms: u64,
    },
    /// The forward under `lease` ended (and how, counted: acked or retried).
    Release {
        /// The lease.
        lease: u64,
        /// How it ended, if it was forwarded.
        #[serde(default)]
        outcome: Option<Forwarded>,
    },
    /// Count one of the consumer's outcomes.
    Count {
        /// Which.
        counter: Counter,
    },
    /// Keep a dead-lettered message (its text, byte for byte).
    DeadLetter {
        /// The message's text.
        message: String,
    },
    /// Whether the topic's dead letters are at their bound (the router asks before accepting events).
    Room,
    /// In flight, bound, counters, requests served and the oldest dead letters.
    Status,
    /// A page of kept dead letters, bodies included.
    DeadLetters {
        /// Ids after this one.
        after: Option<u64>,
        /// At most this many (1..=500).
        limit: usize,
    },
    /// Send dead letter `id` back to the topic's queue, then forget it.
    Replay {
        /// The row's id.
        id: u64,
    },
    /// Replay the oldest dead letters, at most [`REPLAY_ALL_BATCH`](super::REPLAY_ALL_BATCH) per call.
    ReplayAll,
    /// Forget dead letter `id`.
    Discard {
        /// The row's id.
        id: u64,
    },
    /// A delivery made without a lease (a topic with no bound, its target
    /// active as the key last heard) ended in trouble, or after trouble: the
    /// target's state learns from it.
    Report {
        /// How it ended.
        outcome: Forwarded,
    },
    /// The target's state, for a key's copy ([`crate::target::TargetCache`]).
    Target,
    /// Start a paused or disabled target again (an operator's).
    Resume,
    /// The topic's status: its target, bound, leases and requests served.
    Topic,
    /// An isolate's sums for the topic's counters (`crate::metrics::Tally`), to add.
    Tally {
        /// Series → how many.
        counts: BTreeMap<String, u64>,
    },
    /// The topic's counters and target state, for `GET /v1/metrics`.
    Metrics,
    /// Key `key` holds dead letters, the newest dead-lettered at `at` (unix ms): remembered for a recover.
    DeadKey {
        /// The key, percent-encoded (as in paths).
        key: String,
        /// Its newest dead letter's time.
        at: u64,
    },
    /// Keys whose newest dead letter is at or after `since`, after `after`, at most `limit`.
    DeadKeys {
        /// Unix ms.
        since: u64,
        /// Keys after this one (key order).
        after: Option<String>,
        /// At most this many.
        limit: usize,
    },
    /// Forget these keys: they hold no dead letter now.
    ForgetDeadKeys {
        /// The keys.
        keys: Vec<String>,
    },
}

impl GateOp {
    /// A short name for logs, errors and the request counts.
    pub fn name(&self) -> &'static str {
        match self {
            GateOp::Acquire { .. } => "acquire",
            GateOp::Release { .. } => "release",
            GateOp::Count { .. } => "count",
            GateOp::DeadLetter { .. } => "dead_letter",
            GateOp::Room => "room",
            GateOp::Status => "status",
            GateOp::DeadLetters { .. } => "dead_letters",
            GateOp::Replay { .. } => "replay",
            GateOp::ReplayAll => "replay_all",
            GateOp::Discard { .. } => "discard",
            GateOp::Report { .. } => "report",
            GateOp::Target => "target",
            GateOp::Resume => "resume",
            GateOp::Topic => "topic",
            GateOp::Tally { .. } => "tally",
            GateOp::Metrics => "metrics",
            GateOp::DeadKey { .. } => "dead_key",
            GateOp::DeadKeys { .. } => "dead_keys",
            GateOp::ForgetDeadKeys { .. } => "forget_dead_keys",
        }
    }

    /// Whether the object needs the topic's configuration to serve it: dead
    /// letters are kept, listed and discarded whatever the configuration is
    /// (even none that loads).
    pub fn needs_configuration(&self) -> bool {
        match self {
            GateOp::DeadLetter { .. } | GateOp::DeadLetters { .. } | GateOp::Discard { .. } => false,
            GateOp::Acquire { .. }
            | GateOp::Release { .. }
            | GateOp::Count { .. }
            | GateOp::Room
            | GateOp::Status
            | GateOp::Replay { .. }
            | GateOp::ReplayAll
            | GateOp::Report { .. }
            | GateOp::Target
            | GateOp::Resume
            | GateOp::Topic
            | GateOp::Tally { .. }
            | GateOp::Metrics
            | GateOp::DeadKey { .. }
            | GateOp::DeadKeys { .. }
            | GateOp::ForgetDeadKeys { .. } => true,
        }
    }

    /// Whether it may make room among the topic's dead letters (the router
    /// then forgets what it last heard of the topic's room).
    pub fn frees_room(&self) -> bool {
        match self {
            GateOp::Replay { .. } | GateOp::ReplayAll | GateOp::Discard { .. } => true,
            GateOp::Acquire { .. }
            | GateOp::Release { .. }
            | GateOp::Count { .. }
            | GateOp::DeadLetter { .. }
            | GateOp::Room
            | GateOp::Status
            | GateOp::DeadLetters { .. }
            | GateOp::Report { .. }
            | GateOp::Target
            | GateOp::Resume
            | GateOp::Topic
            | GateOp::Tally { .. }
            | GateOp::Metrics
            | GateOp::DeadKey { .. }
            | GateOp::DeadKeys { .. }
            | GateOp::ForgetDeadKeys { .. } => false,
        }
    }
}

/// A gate operation addressed to its topic: what crosses from the consumer
/// (or the router) to the gate object, as one line of JSON
/// (`{"topic","op":{"op",…}}`), the argument of its `call` over RPC.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateCall {
    /// The topic.
    pub topic: String,
    /// What to do.
    pub op: GateOp,
}

impl GateCall {
    /// The text the object reads ([`GateCall::from_wire`]).
    pub fn to_wire(&self) -> Result<String, ApiError> {
        serde_json::to_string(self).map_err(|e| ApiError::Internal(format!("gate call: {e}")))
    }

    /// The call a text carries ([`GateCall::to_wire`]).
    pub fn from_wire(text: &str) -> Result<GateCall, ApiError> {
        serde_json::from_str(text).map_err(|e| ApiError::Internal(format!("gate call: {e}")))
    }
}

/// The gate object's answer, as it crosses back: each variant's fields are
/// its JSON object's (in the order the first releases wrote them:
/// alphabetical). Read back knowing the operation ([`GateAnswer::from_text`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GateAnswer {
    /// To [`GateOp::Acquire`]: `{"expires_at", "go": lease}` or `{"wait_until": ms}`.
    Grant(Grant),
    /// To [`GateOp::Release`]: `{"released": bool, "target"}`.
    Released {
        /// `false`: the lease had expired (or was released already).
        released: bool,
        /// The target's state after it (absent from the first releases' answers).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<TargetView>,
    },
    /// To [`GateOp::Count`]: `{"ok": true}`.
    Counted {
        /// Always `true`.
        ok: bool,
    },
    /// To [`GateOp::DeadLetter`]: `{"kept": id}`.
    Kept {
        /// The row's id (the row kept before, for a message kept already).
        kept: u64,
    },
    /// To [`GateOp::Room`]: `{"full": bool, "clients_full": bool}`.
    Room {
        /// The topic's dead letters are at their bound: the count reached, or
        /// no room for one more message of the largest size.
        full: bool,
        /// They are at half their bound: client tokens' events are refused
        /// (a page cannot fill the bound backends' events are refused at).
        /// Absent from an older gate's answer: `false`.
        #[serde(default)]
        clients_full: bool,
    },
    /// To [`GateOp::Replay`] and [`GateOp::ReplayAll`]: `{"remaining", "replayed"}`.
    Replayed {
        /// Dead letters still kept.
        remaining: u64,
        /// Dead letters sent back to the queue (and forgotten) by this call.
        replayed: u64,
    },
    /// To [`GateOp::Discard`]: `{"discarded": id}`.
    Discarded {
        /// The row's id.
        discarded: u64,
    },
    /// To [`GateOp::Status`]: the status as the API shows it.
    Status(GateStatus),
    /// To [`GateOp::Topic`]: the status as the API shows it (before
    /// [`GateAnswer::Targeted`]: its `target` would read as a view).
    Topic(TopicStatus),
    /// To [`GateOp::DeadKeys`]: `{"keys", "remaining"}`.
    DeadKeys {
        /// The keys, in key order.
        keys: Vec<String>,
        /// How many more keys match after them.
        remaining: u64,
    },
    /// To [`GateOp::Metrics`]: `{"totals", "state"}` (before [`GateAnswer::Targeted`]).
    Totals {
        /// Series → total.
        totals: BTreeMap<String, u64>,
        /// The target's state.
        state: TargetState,
    },
    /// To [`GateOp::Report`], [`GateOp::Target`] and [`GateOp::Resume`]: `{"target"}`.
    Targeted {
        /// The target's state.
        target: TargetView,
    },
    /// To [`GateOp::DeadLetters`]: the page as JSON text, written once by the
    /// gate object (by serde, `dead_letters.rs`) and passed on unparsed, so
    /// bodies reach the caller byte for byte (a number of any size or
    /// precision stays as it was). Its text is the answer, as it is.
    #[serde(skip)]
    Page(String),
}

impl GateAnswer {
    /// The body as sent: a page's text as written, any other answer's JSON.
    pub fn to_text(&self) -> Result<String, ApiError> {
        match self {
            GateAnswer::Page(text) => Ok(text.clone()),
            other => serde_json::to_string(other).map_err(|e| ApiError::Internal(format!("gate answer: {e}"))),
        }
    }

    /// The answer to `op` that the body `text` holds (as [`GateAnswer::to_text`]
    /// wrote it; fields it does not know are passed over): a page is kept as
    /// text, unparsed. `None` for an answer of another shape.
    pub fn from_text(op: &GateOp, text: &str) -> Option<GateAnswer> {
        let answer = match op {
            GateOp::DeadLetters { .. } => GateAnswer::Page(text.to_string()),
            _ => serde_json::from_str(text).ok()?,
        };
        answer.answers(op).then_some(answer)
    }

    /// Whether it is of the shape `op` is answered with.
    fn answers(&self, op: &GateOp) -> bool {
        match op {
            GateOp::Acquire { .. } => matches!(self, GateAnswer::Grant(_)),
            GateOp::Release { .. } => matches!(self, GateAnswer::Released { .. }),
            GateOp::Count { .. } => matches!(self, GateAnswer::Counted { .. }),
            GateOp::DeadLetter { .. } => matches!(self, GateAnswer::Kept { .. }),
            GateOp::Room => matches!(self, GateAnswer::Room { .. }),
            GateOp::Status => matches!(self, GateAnswer::Status(_)),
            GateOp::DeadLetters { .. } => matches!(self, GateAnswer::Page(_)),
            GateOp::Replay { .. } | GateOp::ReplayAll => matches!(self, GateAnswer::Replayed { .. }),
            GateOp::Discard { .. } => matches!(self, GateAnswer::Discarded { .. }),
            GateOp::Report { .. } | GateOp::Target | GateOp::Resume => matches!(self, GateAnswer::Targeted { .. }),
            GateOp::Topic => matches!(self, GateAnswer::Topic(_)),
            GateOp::Tally { .. } => matches!(self, GateAnswer::Counted { .. }),
            GateOp::Metrics => matches!(self, GateAnswer::Totals { .. }),
            GateOp::DeadKey { .. } | GateOp::ForgetDeadKeys { .. } => matches!(self, GateAnswer::Counted { .. }),
            GateOp::DeadKeys { .. } => matches!(self, GateAnswer::DeadKeys { .. }),
        }
    }
}

/// A topic's target, bound, leases and requests served: the answer to
/// [`GateOp::Topic`], passed on as `GET /v1/topics/{topic}`'s body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopicStatus {
    /// The topic.
    pub topic: String,
    /// Its target: `state` (`active`, `paused` with `until`, `disabled`), `since`, `last_answer`.
    pub target: TargetStatus,
    /// Its bound on forwards in flight (`null`: none).
    pub forward_concurrency: Option<u32>,
    /// Its bound on forwards started per second, if any.
    pub forward_rate_per_s: Option<f64>,
    /// Leases held now.
    pub in_flight: usize,
    /// Requests held open waiting for a lease.
    pub waiting: usize,
    /// Requests its object served since it started, by operation (status excluded).
    pub requests: BTreeMap<String, u64>,
}

/// A target's state as the topic's status shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetStatus {
    /// `active`, `paused` (with `until`, unix ms) or `disabled`.
    #[serde(flatten)]
    pub state: TargetState,
    /// Since when (unix ms; 0: since the topic began).
    pub since: u64,
    /// Its last answer lull was told of (trouble, and the first delivery after it): status and time.
    pub last_answer: Option<LastAnswer>,
    /// Failing (no delivery) since this time, if it is (unix ms).
    pub failing_since: Option<u64>,
}

impl TargetStatus {
    /// The status of `target`.
    pub fn of(target: &Target) -> TargetStatus {
        TargetStatus {
            state: target.state,
            since: target.since,
            last_answer: target.last_answer.clone(),
            failing_since: target.failing_since,
        }
    }
}

/// A queue topic's forwards in flight, bound, counters, requests served and
/// oldest dead letters: the answer to [`GateOp::Status`], passed on as
/// `GET /v1/topics/{topic}/queue`'s body (fields in the order the first
/// releases wrote them: alphabetical).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateStatus {
    /// The consumer's counters ([`Counter::as_str`] → count), since the gate was first stored.
    pub counters: BTreeMap<String, u64>,
    /// Bytes of the kept dead letters' messages.
    pub dead_letter_bytes: u64,
    /// Dead letters kept.
    pub dead_letter_count: u64,
    /// The oldest dead letters (at most `STATUS_DEAD_LETTERS`).
    pub dead_letters: Vec<StatusLetter>,
    /// The dead letters are at their bound (the topic's events get `429`).
    pub dead_letters_full: bool,
    /// The topic's bound on forwards in flight.
    pub forward_concurrency: u32,
    /// The topic's bound on forwards started per second, if any.
    pub forward_rate_per_s: Option<f64>,
    /// Leases held now.
    pub in_flight: usize,
    /// `max_queue_dead_letter_bytes`: the bytes of dead letters kept at most.
    pub max_queue_dead_letter_bytes: u64,
    /// `max_queue_dead_letters`: the dead letters kept at most.
    pub max_queue_dead_letters: u64,
    /// Requests served since the object started, by [`GateOp::name`] (status requests not counted).
    pub requests: BTreeMap<String, u64>,
    /// Their sum.
    pub requests_total: u64,
    /// The topic's name.
    pub topic: String,
    /// `Acquire`s held open, waiting for room.
    pub waiting: usize,
}

/// A dead letter as the status shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusLetter {
    /// Its forwards (the last attempt number).
    pub attempts: u32,
    /// The row's id.
    pub id: u64,
    /// Its idempotency key.
    pub idempotency_key: String,
}

/// The queue consumer's (and the router's) calls to a topic's gate object:
/// the runtime's `GateClient` sends a [`GateCall`] over RPC.
pub trait Gates {
    /// Ask `topic`'s gate object for `op`; `Err` says why it gave no answer.
    fn ask(&self, topic: &str, op: GateOp) -> impl Future<Output = Result<GateAnswer, String>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_answers_cross_byte_for_byte_as_the_first_releases_wrote_them() {
        let message = r#"{"topic":"q","idempotency_key":"q/k/x.1","attempt":3,"body":{"n":"é\u0000"}}"#.to_string();
        let forwarded = Forwarded {
            idempotency_key: "q/k/x.1".into(),
            attempt: 2,
            ok: false,
            detail: "503".into(),
            status: None,
            retry_after_ms: None,
        };
        let calls = [
            (GateOp::Acquire { wait_ms: 2_000 }, r#"{"topic":"q","op":{"op":"acquire","wait_ms":2000}}"#),
            (
                GateOp::Release { lease: 7, outcome: Some(forwarded) },
                r#"{"topic":"q","op":{"op":"release","lease":7,"outcome":{"idempotency_key":"q/k/x.1","attempt":2,"ok":false,"detail":"503"}}}"#,
            ),
            (
                GateOp::Release { lease: 7, outcome: None },
                r#"{"topic":"q","op":{"op":"release","lease":7,"outcome":null}}"#,
            ),
            (GateOp::Count { counter: Counter::Requeued }, r#"{"topic":"q","op":{"op":"count","counter":"requeued"}}"#),
            (
                GateOp::DeadLetter { message },
                r#"{"topic":"q","op":{"op":"dead_letter","message":"{\"topic\":\"q\",\"idempotency_key\":\"q/k/x.1\",\"attempt\":3,\"body\":{\"n\":\"é\\u0000\"}}"}}"#,
            ),
            (GateOp::Room, r#"{"topic":"q","op":{"op":"room"}}"#),
            (GateOp::Status, r#"{"topic":"q","op":{"op":"status"}}"#),
            (
                GateOp::DeadLetters { after: Some(3), limit: 20 },
                r#"{"topic":"q","op":{"op":"dead_letters","after":3,"limit":20}}"#,
            ),
            (GateOp::Replay { id: 4 }, r#"{"topic":"q","op":{"op":"replay","id":4}}"#),
            (GateOp::ReplayAll, r#"{"topic":"q","op":{"op":"replay_all"}}"#),
            (GateOp::Discard { id: 5 }, r#"{"topic":"q","op":{"op":"discard","id":5}}"#),
        ];
        for (op, wire) in calls {
            let call = GateCall { topic: "q".into(), op };
            assert_eq!(call.to_wire().unwrap(), wire);
            assert_eq!(GateCall::from_wire(wire).unwrap(), call);
        }
        assert_eq!(GateCall::from_wire(r#"{"topic":"q","op":{"op":"explode"}}"#).unwrap_err().code(), "internal");
        let old = GateCall::from_wire(r#"{"topic":"q","op":{"op":"acquire"}}"#).unwrap();
        assert_eq!(old.op, GateOp::Acquire { wait_ms: 0 }, "an acquire without a wait does not wait");

        let status = GateStatus {
            counters: BTreeMap::new(),
            dead_letter_bytes: 163,
            dead_letter_count: 2,
            dead_letters: vec![
                StatusLetter { attempts: 1, id: 1, idempotency_key: "q/k0/x.1".into() },
                StatusLetter { attempts: 1, id: 2, idempotency_key: "q/k1/x.1".into() },
            ],
            dead_letters_full: false,
            forward_concurrency: 2,
            forward_rate_per_s: None,
            in_flight: 1,
            max_queue_dead_letter_bytes: 268_435_456,
            max_queue_dead_letters: 3,
            requests: [("acquire", 2), ("dead_letter", 2), ("release", 2)].map(|(k, n)| (k.to_string(), n)).into(),
            requests_total: 6,
            topic: "q".into(),
            waiting: 0,
        };
        let rated =
            GateStatus { forward_rate_per_s: Some(2.5), counters: [("acked".into(), 3)].into(), ..status.clone() };
        let answers = [
            (
                GateOp::Acquire { wait_ms: 0 },
                GateAnswer::Grant(Grant::Go { lease: 4, expires_at: 99 }),
                r#"{"expires_at":99,"go":4}"#,
            ),
            (GateOp::Acquire { wait_ms: 0 }, GateAnswer::Grant(Grant::Wait { retry_at: 50 }), r#"{"wait_until":50}"#),
            (
                GateOp::Release { lease: 4, outcome: None },
                GateAnswer::Released { released: false, target: None },
                r#"{"released":false}"#,
            ),
            (GateOp::Count { counter: Counter::Acked }, GateAnswer::Counted { ok: true }, r#"{"ok":true}"#),
            (GateOp::DeadLetter { message: String::new() }, GateAnswer::Kept { kept: 12 }, r#"{"kept":12}"#),
            (GateOp::Room, GateAnswer::Room { full: true, clients_full: true }, r#"{"full":true,"clients_full":true}"#),
            (GateOp::ReplayAll, GateAnswer::Replayed { replayed: 3, remaining: 9 }, r#"{"remaining":9,"replayed":3}"#),
            (
                GateOp::Replay { id: 1 },
                GateAnswer::Replayed { replayed: 0, remaining: 0 },
                r#"{"remaining":0,"replayed":0}"#,
            ),
            (GateOp::Discard { id: 2 }, GateAnswer::Discarded { discarded: 2 }, r#"{"discarded":2}"#),
            (
                GateOp::Status,
                GateAnswer::Status(status),
                r#"{"counters":{},"dead_letter_bytes":163,"dead_letter_count":2,"dead_letters":[{"attempts":1,"id":1,"idempotency_key":"q/k0/x.1"},{"attempts":1,"id":2,"idempotency_key":"q/k1/x.1"}],"dead_letters_full":false,"forward_concurrency":2,"forward_rate_per_s":null,"in_flight":1,"max_queue_dead_letter_bytes":268435456,"max_queue_dead_letters":3,"requests":{"acquire":2,"dead_letter":2,"release":2},"requests_total":6,"topic":"q","waiting":0}"#,
            ),
            (
                GateOp::Status,
                GateAnswer::Status(rated),
                r#"{"counters":{"acked":3},"dead_letter_bytes":163,"dead_letter_count":2,"dead_letters":[{"attempts":1,"id":1,"idempotency_key":"q/k0/x.1"},{"attempts":1,"id":2,"idempotency_key":"q/k1/x.1"}],"dead_letters_full":false,"forward_concurrency":2,"forward_rate_per_s":2.5,"in_flight":1,"max_queue_dead_letter_bytes":268435456,"max_queue_dead_letters":3,"requests":{"acquire":2,"dead_letter":2,"release":2},"requests_total":6,"topic":"q","waiting":0}"#,
            ),
            (
                GateOp::DeadLetters { after: None, limit: 1 },
                GateAnswer::Page(r#"{"n":1e400, "x" : 0.10000000000000000000000000000000000001}"#.into()),
                r#"{"n":1e400, "x" : 0.10000000000000000000000000000000000001}"#,
            ),
        ];
        for (op, answer, text) in answers {
            assert_eq!(answer.to_text().unwrap(), text);
            assert_eq!(GateAnswer::from_text(&op, text), Some(answer), "{text}");
        }

        // Read as before: fields it does not know are passed over; another shape is no answer.
        let later = GateAnswer::from_text(&GateOp::Room, r#"{"full":false,"since":1}"#);
        assert_eq!(later, Some(GateAnswer::Room { full: false, clients_full: false }), "an older gate's answer");
        let error = r#"{"error":{"code":"x","message":"y"}}"#;
        assert_eq!(GateAnswer::from_text(&GateOp::Acquire { wait_ms: 0 }, error), None);
        assert_eq!(GateAnswer::from_text(&GateOp::Release { lease: 1, outcome: None }, r#"{"ok":true}"#), None);
        assert_eq!(GateAnswer::from_text(&GateOp::Status, r#"{"kept":1}"#), None);
        assert_eq!(GateAnswer::from_text(&GateOp::Room, "not json"), None);
    }
}
