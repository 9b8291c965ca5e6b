//! Every bound a caller can meet, in one list: what a request, a key, a topic's
//! settings, a client token and a queue topic may hold at most. Each is defined
//! (and documented) beside the code that enforces it; this list names them once,
//! so a harness, a client and the manual's *Bounds* section read the same values.

// Requests: a key's name, a producer's `Idempotency-Key`, a batch, a small admin body.
pub use crate::http::batch::{MAX_BATCH_BYTES, MAX_BATCH_EVENTS};
pub use crate::http::plan::SMALL_BODY_BYTES;
pub use crate::http::route::MAX_IDEMPOTENCY_KEY_BYTES;
pub use crate::names::MAX_KEY_BYTES;

// Credentials: the shortest bearer token and client-token secret, a client token's lifetime
// and clock leeway, the client token holders one key counts `events_per_minute` for at once.
pub use crate::http::auth::MIN_TOKEN_CHARS;
pub use crate::http::client_token::{
    CLIENT_RATE_BINDING, DEFAULT_TTL_S, MAX_LIFETIME_S, MIN_SECRET_CHARS, NBF_LEEWAY_S,
};
pub use crate::key::per_minute::MAX_MINUTE_HOLDERS;

// CORS: origins a topic may list.
pub use crate::http::cors::MAX_ORIGINS;

// Coalescing of same-key events in flight.
pub use crate::http::coalesce::{MAX_COALESCED_BYTES, MAX_COALESCED_EVENTS};

// A key: remembered idempotency keys, events and bytes per row, rows before a
// checkpoint, pages of dead letters and of the timeline.
pub use crate::key::timeline::{TIMELINE_KEEP, TIMELINE_PAGE};
pub use crate::key::{CHECKPOINT_ROWS, DEDUPE_SLOTS, DEFAULT_PAGE, MAX_PAGE, MAX_ROW_BYTES, MAX_ROW_EVENTS};

// A topic's settings: the largest value each may take (the whole table is `topic::RANGES`).
pub use crate::topic::{
    MAX_BODY_BYTES, MAX_DEDUPE_WINDOW_MS, MAX_DELIVERY_TIMEOUT_MS, MAX_FORWARD_MAX_ATTEMPTS, MAX_FORWARD_RATE_PER_S,
    MAX_PENDING_WINDOWS, MAX_QUEUE_DEAD_LETTER_BYTES, MAX_QUEUE_DEAD_LETTERS, MAX_TARGET_MS, MAX_WINDOW_BYTES,
    MAX_WINDOW_EVENTS,
};

// Queue delivery: a message, an event in it, the gate's bound and hold, waits on the queue.
pub use crate::delivery::queue_message::{MAX_MESSAGE_BYTES, MAX_QUEUE_EVENT_BYTES};
pub use crate::queue::consume::{GATE_WAIT_BUDGET_MS, MAX_DELAY_SECS, MAX_WAIT_SECS, MAX_WAITS};
// While the worker's configuration does not load: a message's retries, their delays.
pub use crate::queue::consume::{
    CONFIG_RETRY_BASE_SECS, CONFIG_RETRY_CAP_SECS, CONFIG_RETRY_SPAN_SECS, QUEUE_MAX_RETRIES,
};
pub use crate::queue::gate::{MAX_HOLD_MS, MAX_LIMIT, PAGE_BYTES, RECOVER_KEYS, REPLAY_ALL_BATCH};
