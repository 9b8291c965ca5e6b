//! A client of lull-edge, the distributed debounce service on Cloudflare
//! Workers: post events, call its admin routes, and consume a queue topic's
//! windows through Cloudflare Queues' HTTP pull API.
//!
//! - **Producer** ([`Lull::send`], [`Lull::send_json`], [`Lull::send_batch`]):
//!   every call carries idempotency keys (the caller's, or generated per
//!   call) that stay the same across its retries; 429, 502, 503, 504 and
//!   transport failures are retried with backoff and full jitter, honouring
//!   `Retry-After`, bounded by a [`RetryPolicy`].
//! - **Admin** ([`Lull::key_status`], [`Lull::queue_status`], dead letters,
//!   [`Lull::mint_client_token`]): an admin token's routes, typed answers.
//! - **Consumer** ([`PullQueue`]): pull and settle lull's queued messages,
//!   decoded as [`QueuedMessage`]; [`PullQueue::pull_new`] sets apart what a
//!   run already handled ([`Seen`]), to ack instead of handling it twice.
//!
//! Errors are one enum, [`Error`]; lull-edge's refusals are [`ApiError`]
//! with a typed [`ErrorCode`]. Every default and limit is in [`defaults`].
//!
//! Not here: a consumer loop (a time budget, handlers) — `lull pull` (the
//! `lull-cli` crate) builds one on [`PullQueue`] and `lull_core::Budget`.
#![deny(missing_docs)]

mod admin;
mod answer;
mod client;
mod code;
mod consumer;
pub mod defaults;
mod error;
mod producer;
mod retry;
mod seen;

pub use admin::{
    KeyDeadLetter, KeyDeadLetterPage, KeyState, KeyStatus, MintRequest, MintedToken, Page, QueueCounters,
    QueueDeadLetter, QueueDeadLetterPage, QueueDeadLetterSummary, QueueDiscarded, QueueReplayed, QueueStatus, Reason,
    Span, TokenOp, TokenScope,
};
pub use answer::{Accepted, BatchRefusal, BatchResult};
pub use client::Lull;
pub use code::ErrorCode;
pub use consumer::{
    Fresh, LeaseId, Message, PullConfig, PullQueue, Pulled, QueuedMessage, Retry, Settled, Undecodable,
};
pub use error::{ApiError, CloudflareError, CloudflareMessage, Error, Result, retryable_status};
pub use producer::{BatchEvent, check_idempotency_key, check_key, new_idempotency_key};
pub use retry::{RetryNotice, RetryObserver, RetryPolicy, parse_retry_after};
pub use seen::Seen;
