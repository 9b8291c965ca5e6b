//! Retrying a call: which failures are retried, how long to wait (exponential
//! backoff with full jitter, or the answer's `Retry-After`), and the bounds
//! ([`RetryPolicy`]: attempts and total time).
//!
//! Guarantees:
//! - Retried: statuses 429, 502, 503 and 504, and transport failures
//!   (connecting, timeouts, a connection lost mid-request). Every other
//!   refusal is returned at once.
//! - A `Retry-After` (seconds, or an HTTP date) is waited out as given, even
//!   past [`RetryPolicy::backoff_cap`]; without one the wait is random in
//!   `[0, min(cap, base · 2^(n−1)))` after the n-th failure.
//! - At most [`RetryPolicy::max_attempts`] requests, and no wait that would end
//!   past [`RetryPolicy::max_elapsed`] from the call's start: the last error is
//!   returned instead (a call may still run over by one request's timeout).
//! - The request is rebuilt identically for each attempt: an idempotency key
//!   chosen for a call is the same on every retry.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::defaults;
use crate::error::{Error, retryable_status};

/// How a call is retried. The defaults are in [`crate::defaults`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Requests at most, the first included (1: never retry). Default [`defaults::MAX_ATTEMPTS`].
    pub max_attempts: u32,
    /// The call's time at most, waits included. Default [`defaults::MAX_ELAPSED`].
    pub max_elapsed: Duration,
    /// The first backoff's ceiling. Default [`defaults::BACKOFF_BASE`].
    pub backoff_base: Duration,
    /// The largest backoff ceiling. Default [`defaults::BACKOFF_CAP`].
    pub backoff_cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: defaults::MAX_ATTEMPTS,
            max_elapsed: defaults::MAX_ELAPSED,
            backoff_base: defaults::BACKOFF_BASE,
            backoff_cap: defaults::BACKOFF_CAP,
        }
    }
}

impl RetryPolicy {
    /// One attempt, no retries.
    pub fn none() -> Self {
        RetryPolicy { max_attempts: 1, ..RetryPolicy::default() }
    }

    /// The backoff ceiling after the `failures`-th failure (from 1): `min(cap, base · 2^(failures−1))`.
    pub fn ceiling(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.backoff_base.saturating_mul(1u32 << doublings).min(self.backoff_cap)
    }

    /// A random wait in `[0, ceiling(failures))` (full jitter).
    pub fn jittered(&self, failures: u32) -> Duration {
        let ceiling = self.ceiling(failures);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(if nanos == 0 { 0 } else { fastrand::u64(0..nanos) })
    }
}

/// What a retry observer is told before each wait.
#[derive(Debug)]
pub struct RetryNotice<'a> {
    /// The attempt that failed (from 1).
    pub attempt: u32,
    /// The policy's attempts at most.
    pub max_attempts: u32,
    /// How long the call waits before the next attempt.
    pub wait: Duration,
    /// The wait is the answer's `Retry-After`.
    pub from_retry_after: bool,
    /// Why the attempt failed.
    pub error: &'a Error,
}

/// Called before each wait (e.g. to log it).
pub type RetryObserver = Arc<dyn Fn(&RetryNotice<'_>) + Send + Sync>;

/// Whether `error` is retried, and the wait its answer asked for.
fn retry_of(error: &Error) -> Option<Option<Duration>> {
    match error {
        Error::Api(e) if retryable_status(e.status) => Some(e.retry_after),
        Error::Cloudflare(e) if retryable_status(e.status) => Some(e.retry_after),
        Error::Transport(e) if !e.is_builder() && !e.is_redirect() => Some(None),
        _ => None,
    }
}

/// A `Retry-After` value: seconds, or an HTTP date (a date past is zero).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Run `call` until it succeeds, fails for good, or `policy`'s bounds end it.
pub(crate) async fn retrying<T, F, Fut>(
    policy: &RetryPolicy,
    observer: Option<&RetryObserver>,
    mut call: F,
) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let start = Instant::now();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let error = match call().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let Some(asked) = retry_of(&error) else { return Err(error) };
        if attempt >= policy.max_attempts {
            return Err(error);
        }
        let wait = asked.unwrap_or_else(|| policy.jittered(attempt));
        if start.elapsed().saturating_add(wait) > policy.max_elapsed {
            return Err(error);
        }
        if let Some(observe) = observer {
            observe(&RetryNotice {
                attempt,
                max_attempts: policy.max_attempts,
                wait,
                from_retry_after: asked.is_some(),
                error: &error,
            });
        }
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(30)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[test]
    fn backoff_doubles_up_to_its_cap_and_jitter_stays_under_the_ceiling() {
        let policy = RetryPolicy {
            backoff_base: Duration::from_millis(100),
            backoff_cap: Duration::from_millis(1_000),
            ..RetryPolicy::default()
        };
        let ceilings: Vec<u128> = (1..=6).map(|n| policy.ceiling(n).as_millis()).collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(policy.ceiling(u32::MAX), Duration::from_millis(1_000));
        for n in 1..=6 {
            for _ in 0..100 {
                assert!(policy.jittered(n) < policy.ceiling(n));
            }
        }
        let spread: std::collections::BTreeSet<_> = (0..50).map(|_| policy.jittered(4)).collect();
        assert!(spread.len() > 10, "full jitter spreads the waits: {spread:?}");
    }

    #[test]
    fn only_retryable_statuses_are_retried() {
        let statuses: Vec<u16> = (400..600).filter(|s| retryable_status(*s)).collect();
        assert_eq!(statuses, [429, 502, 503, 504]);
    }
}
