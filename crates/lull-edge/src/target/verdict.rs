//! [`Verdict`]: what one delivery's answer says of its target, and
//! [`retry_after_ms`], a `Retry-After` header read (seconds, or an HTTP date).

use std::time::{Duration, UNIX_EPOCH};

use crate::ports::Outcome;

/// What a delivery's answer says of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A 2xx.
    Delivered,
    /// `429` or `503` (slow down), `502` or `504` (its gateway is struggling):
    /// pause the topic, for `retry_after_ms` if it said.
    Throttled {
        /// Its `Retry-After`, as ms from the answer.
        retry_after_ms: Option<u64>,
    },
    /// `410 Gone`: stop sending.
    Gone,
    /// Any other failure (another status, a timeout, a network error, a redirect).
    Failed,
}

impl Verdict {
    /// The verdict on `outcome`.
    pub fn of(outcome: &Outcome) -> Verdict {
        if outcome.ok {
            return Verdict::Delivered;
        }
        match outcome.status {
            Some(429 | 502 | 503 | 504) => Verdict::Throttled { retry_after_ms: outcome.retry_after_ms },
            Some(410) => Verdict::Gone,
            _ => Verdict::Failed,
        }
    }

    /// Whether the target should hear of it: anything but a delivery.
    pub fn is_trouble(&self) -> bool {
        *self != Verdict::Delivered
    }

    /// Whether the try spends nothing and waits: a throttle or a `410`.
    pub fn is_held(&self) -> bool {
        matches!(self, Verdict::Throttled { .. } | Verdict::Gone)
    }
}

/// A `Retry-After` header's value as ms from `now_ms` (unix ms): whole
/// seconds, or an HTTP date (one past is 0). `None` if it is neither.
pub fn retry_after_ms(value: &str, now_ms: u64) -> Option<u64> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Past u64: as long as can be (the topic's `max_retry_after_ms` bounds it).
        return Some(value.parse::<u64>().map_or(u64::MAX, |secs| secs.saturating_mul(1000)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let at_ms = at.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis();
    Some(u64::try_from(at_ms).unwrap_or(u64::MAX).saturating_sub(now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: u16, retry_after_ms: Option<u64>) -> Outcome {
        Outcome { ok: (200..300).contains(&status), detail: status.to_string(), status: Some(status), retry_after_ms }
    }

    #[test]
    fn each_answer_has_its_verdict() {
        assert_eq!(Verdict::of(&outcome(204, None)), Verdict::Delivered);
        for status in [429, 502, 503, 504] {
            assert_eq!(Verdict::of(&outcome(status, Some(5))), Verdict::Throttled { retry_after_ms: Some(5) });
        }
        assert_eq!(Verdict::of(&outcome(503, None)), Verdict::Throttled { retry_after_ms: None });
        assert_eq!(Verdict::of(&outcome(410, None)), Verdict::Gone);
        assert_eq!(Verdict::of(&outcome(500, None)), Verdict::Failed);
        assert_eq!(Verdict::of(&outcome(404, None)), Verdict::Failed);
        let timeout = Outcome { ok: false, detail: "timeout".into(), status: None, retry_after_ms: None };
        assert_eq!(Verdict::of(&timeout), Verdict::Failed);
        assert!(!Verdict::Delivered.is_trouble() && Verdict::Gone.is_trouble());
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        assert_eq!(retry_after_ms("30", 0), Some(30_000));
        assert_eq!(retry_after_ms(" 0 ", 0), Some(0));
        // 2015-10-21 07:28:00 GMT, as the RFC's example.
        let at = 1_445_412_480_000;
        assert_eq!(retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", at - 2_500), Some(2_500));
        assert_eq!(retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", at + 9), Some(0), "a date past is now");
        assert_eq!(retry_after_ms("soon", 0), None);
        assert_eq!(retry_after_ms("-1", 0), None);
        assert_eq!(retry_after_ms("99999999999999999999", 0), Some(u64::MAX), "past u64: the longest");
    }
}
