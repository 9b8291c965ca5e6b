//! `POST /v1/topics/{topic}/recover {"since": …}`: replay every window of the
//! topic dead-lettered since a time, across its keys (Svix's *recover*), over
//! two ports — the topic's object ([`Gates`]: which keys hold dead letters
//! since then, [`GateOp::DeadKeys`]) and the keys' objects ([`KeyReplays`]:
//! each replays its own, `KeyRequest::ReplaySince`). At most
//! [`RECOVER_KEYS`] keys per call; the answer says how many remain and where
//! to go on from (`next_after`). A replay keeps the window's idempotency key,
//! so receivers dedupe.
//!
//! Keys tell their topic's object when they dead-letter a window (the
//! newest time, once per newer one); a key that holds none after the replay is
//! forgotten there.

use std::future::Future;

use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::queue::gate::{GateAnswer, GateOp, Gates, RECOVER_KEYS};

/// The key objects' part of a recover.
pub trait KeyReplays {
    /// Key `key` (percent-encoded) of `topic` replays its dead letters
    /// dead-lettered at or after `since`: how many, and how many it still holds.
    fn replay_since(&self, topic: &str, key: &str, since: u64) -> impl Future<Output = Result<(u64, u64), ApiError>>;
}

/// A recover's request body: `{"since": RFC 3339 or unix ms, "after": key?}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoverRequest {
    /// Unix ms.
    pub since: u64,
    /// Go on after this key (the previous answer's `next_after`).
    pub after: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    since: serde_json::Value,
    #[serde(default)]
    after: Option<String>,
}

impl RecoverRequest {
    /// Read a body; `400 bad_request` naming what is wrong.
    pub fn parse(body: &[u8]) -> Result<RecoverRequest, ApiError> {
        let bad = |why: String| ApiError::BadRequest(why);
        let body: Body = serde_json::from_slice(body).map_err(|e| bad(format!("recover: {e}")))?;
        let since = match &body.since {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => rfc3339_ms(s),
            _ => None,
        }
        .ok_or_else(|| bad(format!("since: {} is neither RFC 3339 nor unix ms", body.since)))?;
        Ok(RecoverRequest { since, after: body.after.filter(|a| !a.is_empty()) })
    }
}

/// What one call did: windows replayed, keys still to go, and where to go on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovered {
    /// Windows replayed by this call.
    pub replayed: u64,
    /// Keys with dead letters since then still to go (call again with `after: next_after`).
    pub remaining: u64,
    /// The last key this call went through (`null` when none remain).
    pub next_after: Option<String>,
}

/// Replay `topic`'s windows dead-lettered since `asked.since`, for at most [`RECOVER_KEYS`] keys.
pub async fn recover(
    gates: &impl Gates,
    keys: &impl KeyReplays,
    topic: &str,
    asked: &RecoverRequest,
) -> Result<Recovered, ApiError> {
    let op = GateOp::DeadKeys { since: asked.since, after: asked.after.clone(), limit: RECOVER_KEYS };
    let unavailable =
        |why: String| ApiError::Unavailable { why, retry_after_secs: crate::error::UNAVAILABLE_RETRY_SECS };
    let (page, remaining) = match gates.ask(topic, op).await.map_err(unavailable)? {
        GateAnswer::DeadKeys { keys, remaining } => (keys, remaining),
        other => return Err(ApiError::Internal(format!("dead keys: {other:?}"))),
    };
    let replies = futures::future::join_all(page.iter().map(|key| keys.replay_since(topic, key, asked.since))).await;
    let mut replayed = 0;
    let mut done = Vec::new();
    for (key, reply) in page.iter().zip(replies) {
        // A key that failed stops the call here: the next goes on from the last that answered.
        let (n, left) = reply?;
        replayed += n;
        if left == 0 {
            done.push(key.clone());
        }
    }
    if !done.is_empty() {
        // Best effort: a key left there is asked again, and replays nothing new.
        let _ = gates.ask(topic, GateOp::ForgetDeadKeys { keys: done }).await;
    }
    let next_after = if remaining > 0 { page.last().cloned() } else { None };
    Ok(Recovered { replayed, remaining, next_after })
}

/// An RFC 3339 date-time (`2026-12-01T00:00:00Z`, `…T01:00:00.5+01:00`) as unix ms; `None` if it is not one.
pub fn rfc3339_ms(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let s = text.get(from..from + len)?;
        s.bytes().all(|c| c.is_ascii_digit()).then(|| s.parse().ok())?
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut at = 19;
    let mut millis = 0;
    if b.get(at) == Some(&b'.') {
        let digits = b[at + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        let frac = &text[at + 1..at + 1 + digits];
        millis = format!("{:0<3}", &frac[..digits.min(3)]).parse::<i64>().ok()?;
        at += 1 + digits;
    }
    let offset_min = match b.get(at)? {
        b'Z' | b'z' if b.len() == at + 1 => 0,
        sign @ (b'+' | b'-') if b.len() == at + 6 && b[at + 3] == b':' => {
            let minutes = num(at + 1, 2)? * 60 + num(at + 4, 2)?;
            if *sign == b'+' { minutes } else { -minutes }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second.min(59) - offset_min * 60;
    u64::try_from(secs.checked_mul(1_000)?.checked_add(millis)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_rfc3339_or_unix_ms() {
        assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_ms("2026-12-01T00:00:00Z"), Some(1_796_083_200_000));
        assert_eq!(rfc3339_ms("2026-12-01T01:00:00.25+01:00"), Some(1_796_083_200_250));
        assert_eq!(rfc3339_ms("2024-02-29T12:00:00-00:30"), Some(1_709_209_800_000));
        for bad in [
            "2026-13-01T00:00:00Z",
            "2026-12-01",
            "2026-12-01T00:00:00",
            "2026-12-01T00:00:00.Z",
            "1969-12-31T23:59:59Z",
            "soon",
        ] {
            assert_eq!(rfc3339_ms(bad), None, "{bad}");
        }
        let ok = |body: &str| RecoverRequest::parse(body.as_bytes());
        assert_eq!(
            ok(r#"{"since": 1700000000000}"#).unwrap(),
            RecoverRequest { since: 1_700_000_000_000, after: None }
        );
        assert_eq!(ok(r#"{"since": "1970-01-01T00:00:01Z", "after": "k9"}"#).unwrap().after.as_deref(), Some("k9"));
        for bad in [r#"{"since": -1}"#, r#"{"since": "yesterday"}"#, r#"{}"#, r#"{"since": 1, "until": 2}"#, "nope"] {
            assert_eq!(ok(bad).unwrap_err().code(), "bad_request", "{bad}");
        }
    }
}
