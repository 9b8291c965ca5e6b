//! `Lull-Signature`: how a target knows a delivery came from lull.
//!
//! `Lull-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`.
//! A receiver recomputes the HMAC over the exact body bytes, compares in
//! constant time, and refuses old timestamps (replays). Several `v1=` entries
//! may appear (secret rotation): any match is enough.

use core::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header's name.
pub const HEADER: &str = "Lull-Signature";

type HmacSha256 = Hmac<Sha256>;

fn mac(secret: &[u8], timestamp: u64, body: &[u8]) -> Option<HmacSha256> {
    let mut mac = HmacSha256::new_from_slice(secret).ok()?;
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(mac)
}

/// The header value for `body` sent at `timestamp` (unix seconds).
pub fn sign(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    let digest = mac(secret, timestamp, body).map(|m| hex::encode(m.finalize().into_bytes())).unwrap_or_default();
    format!("t={timestamp},v1={digest}")
}

/// Why a signature was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignatureError {
    /// The header is not `t=…,v1=…`.
    Malformed,
    /// The timestamp is further than the tolerance from now.
    Stale {
        /// Seconds between the timestamp and now.
        skew_secs: u64,
    },
    /// No `v1` matches: wrong secret, or the body changed.
    Mismatch,
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignatureError::Malformed => f.write_str("malformed Lull-Signature header"),
            SignatureError::Stale { skew_secs } => write!(f, "signature timestamp is {skew_secs} s away from now"),
            SignatureError::Mismatch => f.write_str("signature does not match"),
        }
    }
}

impl std::error::Error for SignatureError {}

/// Check `header` for `body` at `now` (unix seconds), allowing `tolerance_secs`
/// of clock skew. Returns the signed timestamp.
pub fn verify(secret: &[u8], header: &str, body: &[u8], now: u64, tolerance_secs: u64) -> Result<u64, SignatureError> {
    let mut timestamp = None;
    let mut candidates = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = Some(t.parse::<u64>().map_err(|_| SignatureError::Malformed)?),
            Some(("v1", v)) => candidates.push(hex::decode(v).map_err(|_| SignatureError::Malformed)?),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
    if candidates.is_empty() {
        return Err(SignatureError::Malformed);
    }
    let skew_secs = now.abs_diff(timestamp);
    if skew_secs > tolerance_secs {
        return Err(SignatureError::Stale { skew_secs });
    }
    let expected = mac(secret, timestamp, body).ok_or(SignatureError::Mismatch)?;
    // `verify_slice` compares in constant time.
    if candidates.iter().any(|c| expected.clone().verify_slice(c).is_ok()) {
        Ok(timestamp)
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?".
        let mut mac = HmacSha256::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_signature_verifies_with_the_secret_and_fails_otherwise() {
        let body = br#"{"topic":"orders","key":"42","window":7}"#;
        let header = sign(b"s3cret", 1_700_000_000, body);
        assert!(header.starts_with("t=1700000000,v1="));
        assert_eq!(verify(b"s3cret", &header, body, 1_700_000_030, 300), Ok(1_700_000_000));
        assert_eq!(verify(b"wrong", &header, body, 1_700_000_030, 300), Err(SignatureError::Mismatch));
        assert_eq!(verify(b"s3cret", &header, b"{}", 1_700_000_030, 300), Err(SignatureError::Mismatch));
        assert_eq!(verify(b"s3cret", &header, body, 1_700_000_400, 300), Err(SignatureError::Stale { skew_secs: 400 }));
        assert_eq!(verify(b"s3cret", "v1=00", body, 0, 300), Err(SignatureError::Malformed));
        assert_eq!(verify(b"s3cret", "t=1,v1=zz", body, 1, 300), Err(SignatureError::Malformed));
    }

    #[test]
    fn any_of_several_v1_entries_may_match_during_rotation() {
        let body = b"payload";
        let new = sign(b"new", 100, body);
        let old = sign(b"old", 100, body);
        let both = format!("{new},{}", old.split_once(',').unwrap().1);
        assert_eq!(verify(b"old", &both, body, 100, 0), Ok(100));
        assert_eq!(verify(b"new", &both, body, 100, 0), Ok(100));
    }
}
