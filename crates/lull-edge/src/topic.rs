//! Topics: configured by the operator (`[vars] LULL_TOPICS` in `wrangler.toml`,
//! a JSON object), never sent by callers, so a caller cannot point the worker
//! at an address of its choosing. Validated once, at startup.
//!
//! ```json
//! { "orders": { "target": "https://example.com/hook", "wait_ms": 10000, "max_wait_ms": 60000,
//!               "payload": "all", "max_batch": 100, "retry": { "max_attempts": 5 } } }
//! ```

use std::collections::BTreeMap;
use std::fmt;

use crate::target::TargetTerms;
use lull_core::{Adaptive, JitterMode, MAX_DURATION_MS, Overlap, Policy, PolicyConfig, PolicyError, Retry, Wait};
use serde::Deserialize;

use crate::delivery::queue_message::MAX_QUEUE_EVENT_BYTES;
use crate::names::{is_loopback_host, is_topic_name};
use crate::queue::gate::lease::MAX_LIMIT;

// Each topic setting's default is in `impl Default for TopicConfig` (below),
// stated once with its value; the limits a topic may set are these.

/// Largest body limit a topic may set: 1 MiB (a Durable Object value may be 2 MB).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Longest delivery timeout a topic may set: 5 minutes.
pub const MAX_DELIVERY_TIMEOUT_MS: u64 = 300_000;
/// Largest bound on pending windows a topic may set.
pub const MAX_PENDING_WINDOWS: usize = 1_000_000;
/// Longest a topic may remember a producer's `Idempotency-Key`: 7 days.
pub const MAX_DEDUPE_WINDOW_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// Most forwards a queue topic may start per second.
pub const MAX_FORWARD_RATE_PER_S: f64 = 1000.0;
/// Most events a topic may let one window hold (`max_window_events`).
pub const MAX_WINDOW_EVENTS: u64 = 1_000_000;
/// Most bytes of events a topic may let one window hold (`max_window_bytes`):
/// 32 MiB, so a delivery's body (built and sent in a 128 MB isolate) stays buildable.
pub const MAX_WINDOW_BYTES: u64 = 32 * 1024 * 1024;

// Queue dead letters (`delivery = "queue"`): how many a topic's gate object
// keeps, and their bytes. Past either, the topic's events answer
// `429 dead_letters_full` and new dead letters wait on the dead-letter queue.

/// `max_queue_dead_letters` unless set: dead letters a queue topic keeps.
pub(crate) const DEFAULT_MAX_QUEUE_DEAD_LETTERS: u64 = 10_000;
/// Largest `max_queue_dead_letters` a topic may set.
pub const MAX_QUEUE_DEAD_LETTERS: u64 = 1_000_000;
/// `max_queue_dead_letter_bytes` unless set: 256 MiB of kept messages.
pub(crate) const DEFAULT_MAX_QUEUE_DEAD_LETTER_BYTES: u64 = 256 * 1024 * 1024;
/// Largest `max_queue_dead_letter_bytes` a topic may set: 4 GiB (a Durable Object holds 10 GB).
pub const MAX_QUEUE_DEAD_LETTER_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// `forward_max_attempts` unless set: the fourth failed forward of a message
/// sends it to the dead-letter queue (the queue's own `max_retries`, 100 in
/// `wrangler.toml`, is the backstop for deliveries that never reach a forward).
pub(crate) const DEFAULT_FORWARD_MAX_ATTEMPTS: u32 = 4;
/// Largest `forward_max_attempts` a topic may set.
pub const MAX_FORWARD_MAX_ATTEMPTS: u32 = 100;
/// Smallest `max_queue_dead_letter_bytes`: room for one message of the largest size.
pub(crate) const MIN_QUEUE_DEAD_LETTER_BYTES: u64 = crate::delivery::queue_message::MAX_MESSAGE_BYTES as u64;

/// Where a numeric setting's accepted range starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Floor {
    /// At this number.
    Value(u64),
    /// At another setting's value (`max_window_bytes` at `max_body_bytes`: one event always fits).
    Setting(&'static str),
}

/// Every numeric setting's accepted range, `(field, min, max)`, both ends
/// included: what the checks refuse ([`Problem::OutOfRange`]) and what the
/// manual's settings table states. `wait_ms` and `max_wait_ms` are checked by
/// `lull-core` ([`PolicyError`]) against the same bounds. (`forward_rate_per_s`,
/// a fraction above 0, has its own check; `max_batch` is 1 or more.)
pub(crate) const RANGES: [(&str, Floor, u64); 16] = [
    ("wait_ms", Floor::Value(0), MAX_DURATION_MS),
    ("max_wait_ms", Floor::Setting("wait_ms"), MAX_DURATION_MS),
    ("max_body_bytes", Floor::Value(1), MAX_BODY_BYTES as u64),
    ("max_window_events", Floor::Value(1), MAX_WINDOW_EVENTS),
    ("max_window_bytes", Floor::Setting("max_body_bytes"), MAX_WINDOW_BYTES),
    ("delivery_timeout_ms", Floor::Value(1), MAX_DELIVERY_TIMEOUT_MS),
    ("max_pending_windows", Floor::Value(1), MAX_PENDING_WINDOWS as u64),
    ("dedupe_window_ms", Floor::Value(1), MAX_DEDUPE_WINDOW_MS),
    ("retention_ms", Floor::Setting("dedupe_window_ms"), MAX_DURATION_MS),
    ("forward_concurrency", Floor::Value(1), MAX_LIMIT as u64),
    ("forward_max_attempts", Floor::Value(1), MAX_FORWARD_MAX_ATTEMPTS as u64),
    ("max_queue_dead_letters", Floor::Value(1), MAX_QUEUE_DEAD_LETTERS),
    ("max_queue_dead_letter_bytes", Floor::Value(MIN_QUEUE_DEAD_LETTER_BYTES), MAX_QUEUE_DEAD_LETTER_BYTES),
    ("max_retry_after_ms", Floor::Value(1_000), MAX_TARGET_MS),
    ("max_throttled_ms", Floor::Value(0), MAX_TARGET_MS),
    ("disable_after_failing_ms", Floor::Value(60_000), MAX_TARGET_MS),
];

/// The longest `max_retry_after_ms`, `max_throttled_ms` and `disable_after_failing_ms` (30 days).
pub const MAX_TARGET_MS: u64 = 30 * 24 * 60 * 60 * 1000;

/// `field`'s range in [`RANGES`] (a field not there takes any number, starting at none).
fn range_of(field: &str) -> (Floor, u64) {
    RANGES.iter().find(|(name, _, _)| *name == field).map_or((Floor::Value(0), u64::MAX), |&(_, min, max)| (min, max))
}

/// `value` of `field` within its range ([`RANGES`]); a range that starts at
/// another setting starts at `setting`, that setting's value.
fn in_range(field: &'static str, value: u64, setting: u64) -> Result<(), Problem> {
    let (floor, max) = range_of(field);
    let min = match floor {
        Floor::Value(min) => min,
        Floor::Setting(_) => setting,
    };
    if (min..=max).contains(&value) { Ok(()) } else { Err(Problem::OutOfRange { field, value, min, max }) }
}

/// `n` of `field` as people read it, where it is a round number of days,
/// hours or minutes (a field in ms) or of GiB, MiB or KiB (in bytes).
fn readable(field: &str, n: u64) -> Option<String> {
    let units: &[(u64, &str)] = if field.ends_with("_ms") {
        &[(86_400_000, "days"), (3_600_000, "hours"), (60_000, "minutes")]
    } else if field.ends_with("_bytes") {
        &[(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
    } else {
        &[]
    };
    let &(size, unit) = units.iter().find(|(size, _)| n >= *size && n.is_multiple_of(*size))?;
    Some(format!("{} {unit}", n / size))
}

/// Which payloads a delivery carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadMode {
    /// The window's last event (`event`).
    #[default]
    Last,
    /// The window's first event (`event`).
    First,
    /// Every event, in order (`events`), at most `max_batch` per window.
    All,
}

/// `retry`: a topic's retry policy (defaults: `impl Default for RetryConfig`).
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(default, deny_unknown_fields)]
struct RetryConfig {
    max_attempts: u32,
    base_ms: u64,
    cap_ms: u64,
    jitter: JitterMode,
}

/// `wait_ms`: milliseconds, or `"auto"`.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(untagged)]
enum WaitConfig {
    Millis(u64),
    Word(String),
}

/// One topic as written in `LULL_TOPICS`: `target` and `wait_ms` are
/// required, everything else has the default `impl Default for TopicConfig` gives.
/// The manual's settings table (`crates/lull-edge/README.md`) is checked
/// against it and the limits above (`settings_table_matches_the_defaults`).
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(default, deny_unknown_fields)]
struct TopicConfig {
    target: Option<String>,
    wait_ms: Option<WaitConfig>,
    max_wait_ms: Option<u64>,
    leading: bool,
    payload: PayloadMode,
    max_batch: Option<u64>,
    max_body_bytes: usize,
    max_window_events: u64,
    max_window_bytes: u64,
    delivery_timeout_ms: u64,
    retry: RetryConfig,
    max_pending_windows: usize,
    dedupe_window_ms: u64,
    retention_ms: u64,
    delivery: DeliveryKind,
    queue: Option<String>,
    forward_concurrency: Option<u32>,
    forward_rate_per_s: Option<f64>,
    max_retry_after_ms: u64,
    max_throttled_ms: u64,
    disable_after_failing_ms: u64,
    forward_max_attempts: u32,
    ingest_token_env: Option<String>,
    signing_secret_env: Option<String>,
    client_tokens: bool,
    client_token_secret_env: Option<String>,
    allow_http: bool,
    log_keys: bool,
    coalesce: bool,
    // Queue dead letters: the bounds of what the topic's gate object keeps.
    max_queue_dead_letters: u64,
    max_queue_dead_letter_bytes: u64,
}

/// Every default of a topic's settings, each stated once with its value.
impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            // Required: no default.
            target: None,
            wait_ms: None,
            // No bound on a window's delay beyond its quiet period.
            max_wait_ms: None,
            // Fire on the trailing edge only.
            leading: false,
            // The window's last event.
            payload: PayloadMode::Last,
            // No cap, except `DEFAULT_MAX_BATCH` (100) with `payload: "all"`.
            max_batch: None,
            // 64 KiB per event.
            max_body_bytes: 64 * 1024,
            // A window fires `full` at 10,000 events (or `max_batch`, if smaller)…
            max_window_events: 10_000,
            // …or when its next event would take it past 8 MiB of events.
            max_window_bytes: 8 * 1024 * 1024,
            // 10 s per delivery.
            delivery_timeout_ms: 10_000,
            retry: RetryConfig::default(),
            // 10,000 pending windows (queued, due and dead letters) per key.
            max_pending_windows: 10_000,
            // A producer's `Idempotency-Key` is remembered for 24 h.
            dedupe_window_ms: 24 * 60 * 60 * 1000,
            // An idle key is kept 7 days before its storage is deleted.
            retention_ms: DEFAULT_RETENTION_MS,
            // POSTed by the key's object.
            delivery: DeliveryKind::Webhook,
            // `DEFAULT_QUEUE_BINDING` with `delivery = "queue"`.
            queue: None,
            // One forward in flight per queue topic; no bound for a webhook topic.
            forward_concurrency: None,
            // No rate bound.
            forward_rate_per_s: None,
            // A target's throttle: its `Retry-After` honoured up to an hour; a
            // window's tries throttled for an hour before they count; disabled
            // after five days of failing answers only (as Svix).
            max_retry_after_ms: TargetTerms::default().max_retry_after_ms,
            max_throttled_ms: TargetTerms::default().max_throttled_ms,
            disable_after_failing_ms: TargetTerms::default().disable_after_ms,
            // The fourth failed forward (across the copies sent back to wait) dead-letters a message.
            forward_max_attempts: DEFAULT_FORWARD_MAX_ATTEMPTS,
            // Only the global ingest tokens (and client tokens, where accepted) post events.
            ingest_token_env: None,
            // Signed with the global `LULL_SIGNING_SECRET`.
            signing_secret_env: None,
            // No client tokens: a topic opts in to those signed with `LULL_CLIENT_TOKEN_SECRET`…
            client_tokens: false,
            // …or names its own secret(s), which then alone sign its client tokens.
            client_token_secret_env: None,
            // `https://` targets only.
            allow_http: false,
            // Log lines name a key by a short hash (keys can be emails).
            log_keys: false,
            // A key's single events that arrive while its object request is in
            // flight ride the next one (bounds: `crate::http::coalesce`).
            coalesce: true,
            // Queue topics: 10,000 dead letters kept, and 256 MiB of them.
            max_queue_dead_letters: DEFAULT_MAX_QUEUE_DEAD_LETTERS,
            max_queue_dead_letter_bytes: DEFAULT_MAX_QUEUE_DEAD_LETTER_BYTES,
        }
    }
}

/// Five attempts, backoff from 1 s doubling up to 60 s, full jitter.
impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig { max_attempts: 5, base_ms: 1_000, cap_ms: 60_000, jitter: JitterMode::Full }
    }
}

/// The batch cap of `payload: "all"` unless `max_batch` is set.
pub(crate) const DEFAULT_MAX_BATCH: u64 = 100;
/// How long an idle key is kept (7 days): also what a key assumes before it knows its topic.
pub(crate) const DEFAULT_RETENTION_MS: u64 = 7 * 24 * 60 * 60 * 1000;

/// How a topic's fired windows leave the key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "snake_case")]
pub(crate) enum DeliveryKind {
    /// The key's object `POST`s the window to the target (the default).
    #[default]
    Webhook,
    /// The window goes to a Cloudflare Queue; the worker's consumer forwards it to the target.
    Queue,
}

/// A queue topic's settings (`delivery = "queue"`).
#[derive(Clone, Debug, PartialEq)]
pub struct QueueDelivery {
    /// The producer binding's name in `wrangler.toml` (`queue`, default [`DEFAULT_QUEUE_BINDING`]).
    pub binding: String,
    /// Failed forwards of a message, counted across the copies sent back to
    /// wait, after which the consumer sends it to the dead-letter queue (1..=100, default 4).
    pub forward_max_attempts: u32,
    /// The bounds of the dead letters its gate object keeps.
    pub dead_letters: DeadLetterBounds,
}

/// A topic's bound on forwards to its target (`forward_concurrency`,
/// `forward_rate_per_s`), held by its object's gate across keys, batches and isolates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ForwardBound {
    /// Forwards in flight at most (1..=64; a queue topic's default 1).
    pub concurrency: u32,
    /// Forwards started per second at most, if set (0 < rate ≤ 1000).
    pub rate_per_s: Option<f64>,
}

impl Eq for ForwardBound {}

/// How many dead letters a queue topic's gate object keeps, and how many
/// bytes of them (`max_queue_dead_letters`, `max_queue_dead_letter_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeadLetterBounds {
    /// Dead letters kept at most.
    pub count: u64,
    /// Bytes of kept messages at most.
    pub bytes: u64,
}

/// The defaults: also the bounds of a topic no longer configured.
impl Default for DeadLetterBounds {
    fn default() -> Self {
        DeadLetterBounds { count: DEFAULT_MAX_QUEUE_DEAD_LETTERS, bytes: DEFAULT_MAX_QUEUE_DEAD_LETTER_BYTES }
    }
}

impl Eq for QueueDelivery {}

/// The queue binding a queue topic uses unless it names one.
pub(crate) const DEFAULT_QUEUE_BINDING: &str = "LULL_QUEUE";

/// One configured topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topic {
    /// Its name (the path segment).
    pub name: String,
    /// Where windows are delivered (`http://` or `https://`).
    pub target: String,
    /// The timing and lifecycle policy every key of the topic runs.
    pub policy: Policy,
    /// Which payloads a delivery carries.
    pub payload: PayloadMode,
    /// Largest event body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Most bytes of events one window holds: the event that would pass it
    /// fires the open window (`full`) and opens the next. (Its event bound is
    /// the policy's `max_batch`.)
    pub max_window_bytes: u64,
    /// How long one delivery may take.
    pub delivery_timeout_ms: u64,
    /// Most windows a key may hold pending (queued, due, dead letters); past it events get `429`.
    pub max_pending_windows: usize,
    /// How long a producer's `Idempotency-Key` is remembered (ms).
    pub dedupe_window_ms: u64,
    /// How long a key with nothing open, queued, running or dead-lettered is
    /// kept before all its storage is deleted (ms); at least `dedupe_window_ms`.
    pub retention_ms: u64,
    /// `Some` when windows go through a queue (`delivery = "queue"`), `None` for webhooks.
    pub queue: Option<QueueDelivery>,
    /// The bound on forwards to the target in flight and their rate, across
    /// the topic's keys (or its queue consumer); `None`: no bound (a webhook
    /// topic that sets neither `forward_concurrency` nor `forward_rate_per_s`).
    pub forward: Option<ForwardBound>,
    /// How the topic treats its target's throttles and failures.
    pub target_terms: TargetTerms,
    /// The secret or var holding this topic's own ingest token(s), if any (`ingest_token_env`).
    pub ingest_token_env: Option<String>,
    /// The secret or var holding this topic's own signing secret(s), if any (`signing_secret_env`).
    pub signing_secret_env: Option<String>,
    /// Whether it accepts client tokens (`client_tokens`, or its own `client_token_secret_env`).
    pub client_tokens: bool,
    /// The secret or var holding the secret(s) its client tokens are signed
    /// with, if its own (`client_token_secret_env`); else `LULL_CLIENT_TOKEN_SECRET`.
    pub client_token_secret_env: Option<String>,
    /// Whether log lines name keys as they are (`log_keys`), else by a short hash.
    pub log_keys: bool,
    /// Whether a key's single events that arrive while its object request is
    /// in flight ride the next one, in one transaction (`coalesce`; `crate::http::coalesce`).
    pub coalesce: bool,
}

/// Whether `name` can name a Worker secret or var: 1 to 64 of `A-Z a-z 0-9 _`.
fn is_env_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Every configured topic, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topics(BTreeMap<String, Topic>);

impl Topics {
    /// Parse and check the `LULL_TOPICS` JSON.
    pub fn parse(json: &str) -> Result<Topics, TopicError> {
        let raw: BTreeMap<String, TopicConfig> =
            serde_json::from_str(json).map_err(|e| TopicError::Json(e.to_string()))?;
        if raw.is_empty() {
            return Err(TopicError::NoTopics);
        }
        let mut topics = BTreeMap::new();
        for (name, config) in raw {
            let topic = Topic::from_config(&name, config)?;
            topics.insert(name, topic);
        }
        Ok(Topics(topics))
    }

    /// The topic called `name`.
    pub fn get(&self, name: &str) -> Option<&Topic> {
        self.0.get(name)
    }

    /// Every topic, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Topic> {
        self.0.values()
    }
}

impl Topic {
    fn from_config(name: &str, c: TopicConfig) -> Result<Topic, TopicError> {
        let fail = |problem: Problem| TopicError::Topic { topic: name.to_string(), problem };
        if !is_topic_name(name) {
            return Err(fail(Problem::Name));
        }
        let target = c.target.ok_or(fail(Problem::Missing("target")))?;
        let wait = c.wait_ms.ok_or(fail(Problem::Missing("wait_ms")))?;
        let parsed = url::Url::parse(&target).ok();
        let valid = parsed
            .as_ref()
            .is_some_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty()));
        if !valid || target.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
            return Err(fail(Problem::Target(target)));
        }
        if let Some(url) = parsed.filter(|u| u.scheme() == "http") {
            if !c.allow_http {
                return Err(fail(Problem::Http(target)));
            }
            // `allow_http` is for a receiver on this machine; the demo build (local use) takes any.
            if !crate::demo::BUILT && !is_loopback_host(url.host()) {
                return Err(fail(Problem::HttpNotLoopback(target)));
            }
        }
        for (field, name) in [
            ("ingest_token_env", &c.ingest_token_env),
            ("signing_secret_env", &c.signing_secret_env),
            ("client_token_secret_env", &c.client_token_secret_env),
        ] {
            // Not one of lull's own variables: a topic's producers or receiver would hold it.
            if let Some(name) = name
                && (!is_env_name(name) || name.starts_with("LULL_"))
            {
                return Err(fail(Problem::EnvName { field, name: name.clone() }));
            }
        }
        let wait = match wait {
            WaitConfig::Millis(ms) => Wait::Fixed(ms),
            WaitConfig::Word(word) if word == "auto" => Wait::Auto(Adaptive::default()),
            WaitConfig::Word(word) => return Err(fail(Problem::Wait(word))),
        };
        let body = c.max_body_bytes as u64;
        in_range("max_body_bytes", body, 0).map_err(fail)?;
        in_range("max_window_events", c.max_window_events, 0).map_err(fail)?;
        in_range("max_window_bytes", c.max_window_bytes, body).map_err(fail)?;
        in_range("delivery_timeout_ms", c.delivery_timeout_ms, 0).map_err(fail)?;
        in_range("dedupe_window_ms", c.dedupe_window_ms, 0).map_err(fail)?;
        in_range("retention_ms", c.retention_ms, c.dedupe_window_ms).map_err(fail)?;
        in_range("max_pending_windows", c.max_pending_windows as u64, 0).map_err(fail)?;
        in_range("max_retry_after_ms", c.max_retry_after_ms, 0).map_err(fail)?;
        in_range("max_throttled_ms", c.max_throttled_ms, 0).map_err(fail)?;
        in_range("disable_after_failing_ms", c.disable_after_failing_ms, 0).map_err(fail)?;
        let target_terms = TargetTerms {
            max_retry_after_ms: c.max_retry_after_ms,
            max_throttled_ms: c.max_throttled_ms,
            disable_after_ms: c.disable_after_failing_ms,
        };
        // The bound on forwards in flight and their rate: any topic's; a queue topic's is 1 unless set.
        if let Some(limit) = c.forward_concurrency {
            in_range("forward_concurrency", limit.into(), 0).map_err(fail)?;
        }
        if c.forward_rate_per_s.is_some_and(|r| !(r.is_finite() && r > 0.0 && r <= MAX_FORWARD_RATE_PER_S)) {
            return Err(fail(Problem::Queue(QueueProblem::Rate)));
        }
        let forward = match (c.delivery, c.forward_concurrency, c.forward_rate_per_s) {
            (DeliveryKind::Webhook, None, None) => None,
            (_, limit, rate_per_s) => Some(ForwardBound { concurrency: limit.unwrap_or(1), rate_per_s }),
        };
        let queue = match c.delivery {
            DeliveryKind::Webhook
                if c.queue.is_some()
                    || c.forward_max_attempts != DEFAULT_FORWARD_MAX_ATTEMPTS
                    || c.max_queue_dead_letters != DEFAULT_MAX_QUEUE_DEAD_LETTERS
                    || c.max_queue_dead_letter_bytes != DEFAULT_MAX_QUEUE_DEAD_LETTER_BYTES =>
            {
                return Err(fail(Problem::Queue(QueueProblem::NotQueueDelivery)));
            }
            DeliveryKind::Webhook => None,
            DeliveryKind::Queue => {
                let binding = c.queue.unwrap_or_else(|| DEFAULT_QUEUE_BINDING.to_string());
                if binding.is_empty() || !binding.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') {
                    return Err(fail(Problem::Queue(QueueProblem::Binding(binding))));
                }
                in_range("forward_max_attempts", c.forward_max_attempts.into(), 0).map_err(fail)?;
                if c.max_body_bytes > MAX_QUEUE_EVENT_BYTES {
                    return Err(fail(Problem::Queue(QueueProblem::BodyLimit)));
                }
                in_range("max_queue_dead_letters", c.max_queue_dead_letters, 0).map_err(fail)?;
                let bytes = c.max_queue_dead_letter_bytes;
                in_range("max_queue_dead_letter_bytes", bytes, 0).map_err(fail)?;
                Some(QueueDelivery {
                    binding,
                    forward_max_attempts: c.forward_max_attempts,
                    dead_letters: DeadLetterBounds { count: c.max_queue_dead_letters, bytes },
                })
            }
        };
        // A window holds at most `max_window_events`, whatever `max_batch` says.
        let max_batch = match (c.payload, c.max_batch) {
            (PayloadMode::All, None) => DEFAULT_MAX_BATCH,
            (_, batch) => batch.unwrap_or(u64::MAX),
        }
        .min(c.max_window_events);
        let policy = PolicyConfig {
            wait,
            max_wait: c.max_wait_ms,
            leading: c.leading,
            // Accepted events are never dropped: every burst has a trailing edge.
            trailing: true,
            max_batch: Some(max_batch),
            overlap: Overlap::Queue,
            retry: Retry {
                max_attempts: c.retry.max_attempts,
                base_ms: c.retry.base_ms,
                cap_ms: c.retry.cap_ms,
                jitter: c.retry.jitter,
            },
            // The delivery call is bounded by `delivery_timeout_ms`, and a
            // delivery cut short by a crash is found at load: no engine timeout.
            run_timeout: None,
        }
        .build()
        .map_err(|e| fail(Problem::Policy(e)))?;
        Ok(Topic {
            name: name.to_string(),
            target,
            policy,
            payload: c.payload,
            max_body_bytes: c.max_body_bytes,
            max_window_bytes: c.max_window_bytes,
            delivery_timeout_ms: c.delivery_timeout_ms,
            max_pending_windows: c.max_pending_windows,
            dedupe_window_ms: c.dedupe_window_ms,
            retention_ms: c.retention_ms,
            queue,
            forward,
            target_terms,
            ingest_token_env: c.ingest_token_env,
            signing_secret_env: c.signing_secret_env,
            client_tokens: c.client_tokens || c.client_token_secret_env.is_some(),
            client_token_secret_env: c.client_token_secret_env,
            log_keys: c.log_keys,
            coalesce: c.coalesce,
        })
    }
}

/// What is wrong with one topic's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The name is not 1–64 of `A-Z a-z 0-9 _ . -`.
    Name,
    /// The target is not an absolute `http(s)://host…` URL.
    Target(String),
    /// `wait_ms` is neither a number nor `"auto"`.
    Wait(String),
    /// A numeric setting is outside its range ([`RANGES`]).
    OutOfRange {
        /// The setting.
        field: &'static str,
        /// What it holds.
        value: u64,
        /// Its least accepted value (another setting's value, where its range starts at one).
        min: u64,
        /// Its largest accepted value.
        max: u64,
    },
    /// A required setting is missing.
    Missing(&'static str),
    /// An `http://` target without `allow_http = true`.
    Http(String),
    /// An `http://` target with `allow_http = true` that is not on this
    /// machine (`localhost`, `127.0.0.0/8`, `[::1]`), outside the demo build.
    HttpNotLoopback(String),
    /// `ingest_token_env`, `signing_secret_env` or `client_token_secret_env` is not a variable's name.
    EnvName {
        /// Which setting.
        field: &'static str,
        /// What it holds.
        name: String,
    },
    /// The timing or retry settings (see [`PolicyError`]).
    Policy(PolicyError),
    /// The queue delivery settings.
    Queue(QueueProblem),
}

/// What is wrong with a topic's queue delivery settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueProblem {
    /// A queue topic's setting (`queue`, `forward_max_attempts`, dead-letter bounds) on a webhook topic.
    NotQueueDelivery,
    /// `queue` is not a binding's name (`A-Z a-z 0-9 _`).
    Binding(String),
    /// `forward_rate_per_s` is not above 0 and at most [`MAX_FORWARD_RATE_PER_S`].
    Rate,
    /// `max_body_bytes` is over [`MAX_QUEUE_EVENT_BYTES`] (an event must fit in one message).
    BodyLimit,
}

impl fmt::Display for QueueProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueProblem::NotQueueDelivery => f.write_str(
                "queue, forward_max_attempts, max_queue_dead_letters and max_queue_dead_letter_bytes need \
                 delivery = \"queue\"",
            ),
            QueueProblem::Binding(b) => write!(f, "queue must name a binding (A-Z a-z 0-9 _), not {b:?}"),
            QueueProblem::Rate => {
                write!(f, "forward_rate_per_s must be above 0 and at most {MAX_FORWARD_RATE_PER_S}")
            }
            QueueProblem::BodyLimit => write!(
                f,
                "max_body_bytes must be at most {MAX_QUEUE_EVENT_BYTES} with delivery = \"queue\" (an event fits in one message)"
            ),
        }
    }
}

/// Why `LULL_TOPICS` was refused; the worker does not start with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopicError {
    /// Not a JSON object of topic objects (unknown fields included).
    Json(String),
    /// No topic at all.
    NoTopics,
    /// One topic is wrong.
    Topic {
        /// Its name.
        topic: String,
        /// What is wrong.
        problem: Problem,
    },
}

impl fmt::Display for TopicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopicError::Json(e) => write!(f, "LULL_TOPICS: {e}"),
            TopicError::NoTopics => f.write_str("LULL_TOPICS: no topic is configured"),
            TopicError::Topic { topic, problem } => {
                write!(f, "LULL_TOPICS: topic {topic:?}: ")?;
                match problem {
                    Problem::Name => f.write_str("names are 1 to 64 of A-Z a-z 0-9 _ . -"),
                    Problem::Target(t) => write!(f, "target {t:?} is not an absolute http(s) URL"),
                    Problem::Wait(w) => write!(f, "wait_ms must be milliseconds or \"auto\", not {w:?}"),
                    Problem::OutOfRange { field, value, min, max } => {
                        let max = match readable(field, *max) {
                            Some(readable) => format!("{max} ({readable})"),
                            None => max.to_string(),
                        };
                        match range_of(field).0 {
                            Floor::Setting(setting) => {
                                write!(f, "{field} must be at least {setting} ({min}) and at most {max}, not {value}")
                            }
                            Floor::Value(_) => write!(f, "{field} must be {min}..={max}, not {value}"),
                        }
                    }
                    Problem::Missing(field) => write!(f, "{field} is required"),
                    Problem::Http(t) => {
                        write!(
                            f,
                            "target {t:?} is http://: deliveries would travel in clear (set allow_http = true for local use)"
                        )
                    }
                    Problem::HttpNotLoopback(t) => write!(
                        f,
                        "target {t:?} is http:// and not a loopback address: allow_http takes \
                         localhost, 127.0.0.0/8 or [::1] only (use https:// for any other receiver)"
                    ),
                    Problem::EnvName { field, name } => {
                        write!(
                            f,
                            "{field} must name a secret or var of its own (A-Z a-z 0-9 _, not LULL_…), not {name:?}"
                        )
                    }
                    Problem::Policy(e) => write!(f, "{e}"),
                    Problem::Queue(problem) => write!(f, "{problem}"),
                }
            }
        }
    }
}

impl std::error::Error for TopicError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The manual's topic settings table: one row per setting, its default
    /// as `impl Default for TopicConfig` gives it (JSON; `none` for an unset
    /// option, `required` for the two without a default), and its range as
    /// [`RANGES`] states it (the checks accept that range).
    #[test]
    fn settings_table_matches_the_defaults() {
        let manual = include_str!("../README.md");
        let table = manual
            .split_once("<!-- topic-settings:")
            .and_then(|(_, rest)| rest.split_once("<!-- /topic-settings -->"))
            .map(|(table, _)| table)
            .expect("the manual has the settings table between its markers");
        let rows: Vec<(String, String, String)> = table
            .lines()
            .filter(|line| line.starts_with("| `"))
            .map(|line| {
                let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
                assert!(cells.len() >= 4, "a row has field, default, range and meaning: {line}");
                (cells[0].trim_matches('`').to_string(), cells[1].to_string(), cells[2].to_string())
            })
            .collect();
        let defaults = serde_json::to_value(TopicConfig::default()).unwrap();
        let defaults = defaults.as_object().unwrap();
        let documented: Vec<&str> = rows.iter().map(|(field, _, _)| field.as_str()).collect();
        let fields: Vec<&str> = defaults.keys().map(String::as_str).collect();
        let mut sorted = documented.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, fields, "every setting has one row, and every row is a setting");
        let mut ranges: BTreeMap<&str, String> = RANGES
            .iter()
            .map(|&(field, min, max)| match min {
                Floor::Value(min) => (field, format!("{min} to {max}")),
                Floor::Setting(setting) => (field, format!("{setting} to {max}")),
            })
            .collect();
        // The two ranges that are not whole numbers from a floor to a largest value.
        ranges.insert("max_batch", "1 or more".into());
        ranges.insert("forward_rate_per_s", format!("above 0, at most {MAX_FORWARD_RATE_PER_S}"));
        for (field, default, range) in &rows {
            match &defaults[field] {
                serde_json::Value::Null if matches!(field.as_str(), "target" | "wait_ms") => {
                    assert_eq!(default, "required", "{field}'s default");
                }
                serde_json::Value::Null => assert_eq!(default, "none", "{field}'s default"),
                value => {
                    let written = default.strip_prefix('`').and_then(|d| d.strip_suffix('`'));
                    let written: Option<serde_json::Value> = written.and_then(|d| serde_json::from_str(d).ok());
                    assert_eq!(written.as_ref(), Some(value), "{field}'s default: {default}");
                }
            }
            let want = ranges.get(field.as_str()).map_or("–", String::as_str);
            assert_eq!(range, want, "{field}'s range");
        }
    }

    #[test]
    fn a_topic_becomes_a_policy_that_never_drops_events() {
        let topics = Topics::parse(
            r#"{"orders": {"target": "https://example.com/hook", "wait_ms": 10000, "max_wait_ms": 60000,
                           "payload": "all", "retry": {"max_attempts": 3}}}"#,
        )
        .unwrap();
        let orders = topics.get("orders").unwrap();
        let policy = orders.policy.config();
        assert_eq!(policy.wait, Wait::Fixed(10_000));
        assert_eq!(policy.max_wait, Some(60_000));
        assert!(policy.trailing && !orders.policy.drops_events());
        assert_eq!(policy.max_batch, Some(DEFAULT_MAX_BATCH), "mode all is capped by default");
        assert_eq!(policy.overlap, Overlap::Queue, "singleton runs per key");
        assert_eq!(policy.retry, Retry::backoff(3, 1_000, 60_000), "full jitter by default");
        assert_eq!(policy.run_timeout, None, "deliveries are bounded by the call's own timeout");
        assert_eq!(orders.max_pending_windows, 10_000);
        assert_eq!((orders.payload, orders.max_body_bytes), (PayloadMode::All, 64 * 1024));
        assert!(orders.coalesce, "coalescing is on by default");
        let off = Topics::parse(r#"{"t": {"target": "https://a", "wait_ms": 1, "coalesce": false}}"#).unwrap();
        assert!(!off.get("t").unwrap().coalesce);
        let exact = Topics::parse(
            r#"{"t": {"target": "https://a", "wait_ms": 1, "retry": {"base_ms": 5, "cap_ms": 9, "jitter": "none"}}}"#,
        )
        .unwrap();
        assert_eq!(exact.get("t").unwrap().policy.config().retry.jitter, JitterMode::None);
        let auto =
            Topics::parse(r#"{"search": {"target": "http://127.0.0.1:9/x", "wait_ms": "auto", "allow_http": true}}"#)
                .unwrap();
        assert!(matches!(auto.get("search").unwrap().policy.config().wait, Wait::Auto(_)));
        assert_eq!(auto.get("search").unwrap().payload, PayloadMode::Last);
    }

    /// `allow_http` is for a receiver on this machine: outside the demo
    /// build (the production worker) an `http://` target elsewhere is refused,
    /// naming the topic, even with `allow_http`; the demo build (local use
    /// and the tests) takes any.
    #[test]
    fn allow_http_takes_a_loopback_target_only_outside_the_demo_build() {
        let parsed = |target: &str| {
            Topics::parse(&format!(r#"{{"hooks": {{"target": "{target}", "wait_ms": 1, "allow_http": true}}}}"#))
        };
        for local in ["http://127.0.0.1:9/x", "http://127.3.4.5/x", "http://localhost:8787/sink", "http://[::1]:9/x"] {
            assert!(parsed(local).is_ok(), "{local}: {:?}", parsed(local));
        }
        let built = crate::demo::BUILT;
        for elsewhere in [
            "http://receiver.example.com/hook",
            "http://10.0.0.7:8080/hook",
            "http://0.0.0.0:9/x",
            "http://127.0.0.1.nip.io/x",
            "http://localhost.example.com/x",
        ] {
            let result = parsed(elsewhere);
            assert_eq!(result.is_ok(), built, "{elsewhere}: accepted in the demo build only: {result:?}");
            if let Err(e) = result {
                let text = e.to_string();
                assert!(text.starts_with(r#"LULL_TOPICS: topic "hooks": "#), "{text}");
                assert!(text.contains("allow_http") && text.contains("loopback"), "{text}");
            }
        }
        assert!(
            Topics::parse(r#"{"t": {"target": "https://receiver.example.com", "wait_ms": 1, "allow_http": true}}"#)
                .is_ok(),
            "https needs nothing"
        );
    }

    #[test]
    fn bad_settings_are_refused_with_a_clear_message() {
        let refused = |json: &str| Topics::parse(json).unwrap_err().to_string();
        assert!(refused("[]").starts_with("LULL_TOPICS: "));
        assert_eq!(refused("{}"), "LULL_TOPICS: no topic is configured");
        assert!(refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "colour": 1}}"#).contains("unknown field"));
        assert!(refused(r#"{"t": {"wait_ms": 1}}"#).ends_with("target is required"));
        assert!(refused(r#"{"t": {"target": "http://a/x", "wait_ms": 1}}"#).contains("allow_http = true"));
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "ingest_token_env": "a-b"}}"#)
                .contains("ingest_token_env must name a secret or var")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "ingest_token_env": "LULL_CLIENT_TOKEN_SECRET"}}"#)
                .contains("not LULL_…")
        );
        assert!(refused(r#"{"t": {"target": "https://a"}}"#).ends_with("wait_ms is required"));
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "coalesce": "no"}}"#)
                .contains("invalid type: string \"no\", expected a boolean")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "retry": {"tries": 1}}}"#).contains("unknown field")
        );
        assert!(refused(r#"{"a/b": {"target": "https://a", "wait_ms": 1}}"#).contains("names are"));
        for target in ["ftp://a", "https://", "example.com", "https://a b", "http://[::1", "https://exa mple.com/x"] {
            let json = format!(r#"{{"t": {{"target": "{target}", "wait_ms": 1}}}}"#);
            assert!(refused(&json).contains("not an absolute http(s) URL"), "{target}");
        }
        assert!(refused(r#"{"t": {"target": "https://a", "wait_ms": "soon"}}"#).contains("\"auto\""));
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 100, "max_wait_ms": 50}}"#)
                .contains("max_wait (50 ms) must be at least wait (100 ms)")
        );
        assert!(refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "max_body_bytes": 0}}"#).contains("max_body"));
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "max_window_bytes": 33554433}}"#)
                .contains("at most 33554432 (32 MiB), not 33554433")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "max_body_bytes": 1000, "max_window_bytes": 999}}"#)
                .contains("at least max_body_bytes (1000)")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "max_window_events": 0}}"#)
                .contains("max_window_events must be 1..=1000000, not 0")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "delivery_timeout_ms": 0}}"#).contains("delivery")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "retention_ms": 10, "dedupe_window_ms": 20}}"#)
                .contains("retention_ms must be at least dedupe_window_ms (20) and at most 9007199254740991, not 10")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "max_pending_windows": 0}}"#)
                .contains("max_pending_windows must be 1..=1000000, not 0")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "retry": {"jitter": "some"}}}"#)
                .contains("unknown variant `some`, expected `full` or `none`")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "retry": {"max_attempts": 0}}}"#)
                .contains("max_attempts")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "forward_max_attempts": 2}}"#)
                .contains("need delivery = \"queue\"")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "forward_concurrency": 65}}"#)
                .contains("forward_concurrency must be 1..=64, not 65"),
            "a webhook topic's bound is checked as a queue topic's"
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "max_retry_after_ms": 999}}"#)
                .contains("max_retry_after_ms must be 1000..=2592000000 (30 days), not 999")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "disable_after_failing_ms": 1000}}"#)
                .contains("disable_after_failing_ms")
        );
        let queue =
            |extra: &str| format!(r#"{{"t": {{"target": "https://a", "wait_ms": 1, "delivery": "queue"{extra}}}}}"#);
        assert!(refused(&queue(r#", "forward_concurrency": 0"#)).contains("forward_concurrency must be 1..=64, not 0"));
        assert!(refused(&queue(r#", "forward_concurrency": 65"#)).contains("not 65"));
        assert!(refused(&queue(r#", "forward_rate_per_s": 0"#)).contains("forward_rate_per_s"));
        assert!(
            refused(&queue(r#", "forward_max_attempts": 0"#)).contains("forward_max_attempts must be 1..=100, not 0")
        );
        assert!(refused(&queue(r#", "forward_max_attempts": 101"#)).contains("not 101"));
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "forward_max_attempts": 2}}"#)
                .contains("need delivery = \"queue\"")
        );
        assert!(refused(&queue(r#", "queue": "a-b""#)).contains("must name a binding"));
        assert!(refused(&queue(r#", "max_body_bytes": 200000"#)).contains("one message"));
        assert!(refused(&queue(r#", "max_queue_dead_letters": 0"#)).contains("max_queue_dead_letters must be 1..="));
        assert!(refused(&queue(r#", "max_queue_dead_letters": 1000001"#)).contains("not 1000001"));
        assert!(refused(&queue(r#", "max_queue_dead_letter_bytes": 1000"#)).contains("must be 128000..="));
        assert!(refused(&queue(r#", "max_queue_dead_letter_bytes": 4294967297"#)).contains("not 4294967297"));
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "max_queue_dead_letters": 5}}"#)
                .contains("need delivery = \"queue\"")
        );
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "delivery": "carrier-pigeon"}}"#)
                .contains("unknown variant")
        );
    }

    /// Each range of [`RANGES`] that this module checks refuses a value past
    /// either end with a message naming the field, the value and the range.
    #[test]
    fn every_range_refuses_past_either_end_naming_field_value_and_range() {
        for (field, floor, max) in RANGES {
            if matches!(field, "wait_ms" | "max_wait_ms") {
                continue; // lull-core's checks, with its own messages
            }
            let (min, shown) = match floor {
                Floor::Value(min) => (min, format!("{field} must be {min}..={max}")),
                // Every floor setting holds 1000 here: the default dedupe window is larger.
                Floor::Setting(setting) => {
                    (1_000, format!("{field} must be at least {setting} (1000) and at most {max}"))
                }
            };
            let queue = field.starts_with("forward_") || field.starts_with("max_queue_");
            for value in [min.checked_sub(1), max.checked_add(1)].into_iter().flatten() {
                let mut topic = serde_json::json!({"target": "https://a", "wait_ms": 1, "max_body_bytes": 1000,
                                                   "dedupe_window_ms": 1000});
                topic[field] = value.into();
                if queue {
                    topic["delivery"] = "queue".into();
                }
                let json = serde_json::json!({ "t": topic }).to_string();
                let message = Topics::parse(&json).unwrap_err().to_string();
                assert!(message.contains(&shown) && message.ends_with(&format!(", not {value}")), "{message}");
            }
        }
        let refused = |json: &str| Topics::parse(json).unwrap_err().to_string();
        assert!(
            refused(r#"{"t": {"target": "https://a", "wait_ms": 1, "dedupe_window_ms": 604800001}}"#)
                .contains("dedupe_window_ms must be 1..=604800000 (7 days), not 604800001"),
            "a round largest value is also said as people read it"
        );
    }

    #[test]
    fn a_queue_topic_names_its_binding_and_bound() {
        let topics = Topics::parse(
            r#"{"slow": {"target": "https://a/x", "wait_ms": 1, "delivery": "queue", "forward_concurrency": 4,
                         "forward_rate_per_s": 2.5, "max_queue_dead_letters": 3, "forward_max_attempts": 6,
                         "max_queue_dead_letter_bytes": 128000},
                "plain": {"target": "https://a/y", "wait_ms": 1, "delivery": "queue", "queue": "OTHER"}}"#,
        )
        .unwrap();
        assert_eq!(topics.get("slow").unwrap().forward, Some(ForwardBound { concurrency: 4, rate_per_s: Some(2.5) }));
        assert_eq!(topics.get("plain").unwrap().forward, Some(ForwardBound { concurrency: 1, rate_per_s: None }));
        let slow = topics.get("slow").unwrap().queue.clone().unwrap();
        assert_eq!(
            slow,
            QueueDelivery {
                binding: DEFAULT_QUEUE_BINDING.into(),
                forward_max_attempts: 6,
                dead_letters: DeadLetterBounds { count: 3, bytes: 128_000 },
            }
        );
        let plain = topics.get("plain").unwrap().queue.clone().unwrap();
        assert_eq!(plain.binding, "OTHER");
        assert_eq!(plain.forward_max_attempts, DEFAULT_FORWARD_MAX_ATTEMPTS);
        assert_eq!(plain.dead_letters, DeadLetterBounds { count: 10_000, bytes: 256 * 1024 * 1024 }, "the defaults");
        let hook = Topics::parse(
            r#"{"h": {"target": "https://a", "wait_ms": 1}, "bound": {"target": "https://a", "wait_ms": 1, "forward_concurrency": 4},
                "rated": {"target": "https://a", "wait_ms": 1, "forward_rate_per_s": 2, "max_retry_after_ms": 5000}}"#,
        )
        .unwrap();
        assert_eq!((hook.get("h").unwrap().queue.as_ref(), hook.get("h").unwrap().forward), (None, None), "no bound");
        assert_eq!(hook.get("h").unwrap().target_terms, TargetTerms::default());
        assert_eq!(hook.get("bound").unwrap().forward, Some(ForwardBound { concurrency: 4, rate_per_s: None }));
        let rated = hook.get("rated").unwrap();
        assert_eq!(rated.forward, Some(ForwardBound { concurrency: 1, rate_per_s: Some(2.0) }));
        assert_eq!(rated.target_terms.max_retry_after_ms, 5_000);
    }
}
