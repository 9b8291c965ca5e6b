//! Every default and limit of the crate, each documented once here.
//!
//! Defaults are what a caller gets without saying otherwise; limits are the
//! API's (lull-edge's or Cloudflare's) and are checked before a request is sent.

use std::time::Duration;

// ---- Retries (`RetryPolicy::default()`) ----

/// Requests made at most for one call, the first included (so 4 retries).
pub const MAX_ATTEMPTS: u32 = 5;
/// Time one call may take at most, its retries and their waits included: a
/// wait that would end past it is not started (the last error is returned).
/// Long enough to wait out the API's longest `Retry-After` (60 s).
pub const MAX_ELAPSED: Duration = Duration::from_secs(90);
/// The first backoff's ceiling; each retry doubles it (full jitter: the wait
/// is a random duration from zero to the ceiling).
pub const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// The largest backoff ceiling (a `Retry-After` may ask for more, and is honoured).
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);

// ---- HTTP ----

/// One request's timeout (connecting, sending and reading the answer).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Connecting's timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Characters of a non-JSON error body kept in an error's message.
pub const ERROR_TEXT_CHARS: usize = 300;

// ---- lull-edge's limits ----

/// Events one `events:batch` request holds at most; `send_batch` splits above it.
pub const BATCH_MAX_EVENTS: usize = 1_000;
/// Bytes one `events:batch` request's body holds at most; `send_batch` splits above it.
pub const BATCH_MAX_BYTES: usize = 4 * 1024 * 1024;
/// A key's length in bytes at most (UTF-8).
pub const KEY_MAX_BYTES: usize = 512;
/// An idempotency key's length at most (printable ASCII, no spaces).
pub const IDEMPOTENCY_KEY_MAX: usize = 200;
/// Dead letters one list page holds at most (`limit`); the API's default is 100.
pub const PAGE_MAX: u32 = 500;

// ---- Cloudflare Queues HTTP pull API ----

/// Where Cloudflare's API lives (`CLOUDFLARE_API_BASE_URL` overrides it in the CLI).
pub const CLOUDFLARE_API_BASE: &str = "https://api.cloudflare.com/client/v4";
/// Messages one pull takes at most (and at least 1).
pub const PULL_MAX_BATCH: u8 = 100;
/// The longest visibility timeout a pull may ask for (12 hours).
pub const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 60 * 60);
/// The longest delay a retried message may be given (12 hours).
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(12 * 60 * 60);
/// Retries of a pull or settle request (`PullQueue::new`'s policy): few and
/// short, so a budgeted consumer loop keeps its budget.
pub const PULL_MAX_ATTEMPTS: u32 = 3;
/// Time a pull or settle request may take at most, its retries included.
pub const PULL_MAX_ELAPSED: Duration = Duration::from_secs(10);

// ---- Deduplication (`Seen`) ----

/// Idempotency keys a `Seen` remembers by default; past it the oldest is forgotten.
pub const SEEN_CAPACITY: usize = 65_536;
