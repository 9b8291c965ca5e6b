//! Standard Webhooks signatures (<https://www.standardwebhooks.com>): how a
//! target knows a delivery came from lull, unchanged, and only once.
//!
//! Every delivery carries three headers:
//!
//! - `webhook-id`: the window's idempotency key (the same value as `Idempotency-Key`);
//! - `webhook-timestamp`: when this attempt was signed, in unix seconds;
//! - `webhook-signature`: `v1,<base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}"))>`,
//!   one space-separated entry per active secret (all of them sign during a rotation).
//!
//! A secret is `whsec_<base64>`; the HMAC key is its decoded part (at least
//! [`MIN_SECRET_BYTES`]). The id and the timestamp are signed with the body, so
//! a captured delivery cannot be replayed under a fresh id, nor after the
//! tolerance. Off-the-shelf verifiers (the `standardwebhooks` and `svix`
//! packages, and their ports) check lull deliveries; [`verify`] is the same in
//! Rust.

use core::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header naming the message: the window's idempotency key.
pub const ID_HEADER: &str = "webhook-id";
/// The header with the signing time (unix seconds).
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// The header with the signatures.
pub const SIGNATURE_HEADER: &str = "webhook-signature";
/// What every secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";
/// The shortest key a secret may decode to (the specification's lower bound).
pub const MIN_SECRET_BYTES: usize = 24;
/// The specification's tolerance for a timestamp, either way (5 minutes).
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;

type HmacSha256 = Hmac<Sha256>;

/// One signing secret: the key `whsec_<base64>` decodes to. Its `Debug`
/// never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

/// Why a secret was refused. Never carries the secret itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretError {
    /// The variable holds no secret at all.
    Empty,
    /// It does not start with `whsec_`.
    NoPrefix,
    /// The part after `whsec_` is not standard base64.
    NotBase64,
    /// It decodes to fewer than [`MIN_SECRET_BYTES`].
    TooShort {
        /// The bytes it decodes to.
        bytes: usize,
    },
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::Empty => f.write_str("holds no secret (expected whsec_<base64>, several separated by spaces)"),
            SecretError::NoPrefix => {
                f.write_str("does not start with `whsec_` (Standard Webhooks secrets are whsec_ followed by base64)")
            }
            SecretError::NotBase64 => f.write_str(
                "is not whsec_ followed by standard base64 (A-Z a-z 0-9 + /, padded with = to a multiple of 4)",
            ),
            SecretError::TooShort { bytes } => write!(
                f,
                "decodes to {bytes} bytes; a signing key needs at least {MIN_SECRET_BYTES} \
                 (e.g. `whsec_$(openssl rand -base64 32)`)"
            ),
        }
    }
}

impl std::error::Error for SecretError {}

/// A secret among several that was refused: which one, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecretsError {
    /// Its position, from 1.
    pub position: usize,
    /// How many the variable holds.
    pub count: usize,
    /// Why.
    pub error: SecretError,
}

impl fmt::Display for SecretsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count <= 1 {
            write!(f, "the secret {}", self.error)
        } else {
            write!(f, "secret {} of {} {}", self.position, self.count, self.error)
        }
    }
}

impl std::error::Error for SecretsError {}

impl Secret {
    /// `whsec_<base64>`, decoding to at least [`MIN_SECRET_BYTES`].
    pub fn parse(text: &str) -> Result<Secret, SecretError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(SecretError::Empty);
        }
        let encoded = text.strip_prefix(SECRET_PREFIX).ok_or(SecretError::NoPrefix)?;
        let key = base64_decode(encoded).ok_or(SecretError::NotBase64)?;
        if key.len() < MIN_SECRET_BYTES {
            return Err(SecretError::TooShort { bytes: key.len() });
        }
        Ok(Secret(key))
    }

    /// Every secret in `text`, separated by whitespace (one or several, in order).
    pub fn parse_all(text: &str) -> Result<Vec<Secret>, SecretsError> {
        let parts: Vec<&str> = text.split_whitespace().collect();
        if parts.is_empty() {
            return Err(SecretsError { position: 0, count: 0, error: SecretError::Empty });
        }
        let count = parts.len();
        parts
            .iter()
            .enumerate()
            .map(|(i, part)| Secret::parse(part).map_err(|error| SecretsError { position: i + 1, count, error }))
            .collect()
    }

    /// HMAC takes a key of any length: `None` never happens.
    fn mac(&self, id: &str, timestamp: u64, body: &[u8]) -> Option<HmacSha256> {
        let mut mac = HmacSha256::new_from_slice(&self.0).ok()?;
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        Some(mac)
    }
}

/// The `webhook-signature` value for `body` sent as message `id` at
/// `timestamp` (unix seconds): one `v1,<base64>` entry per secret, separated
/// by spaces.
pub fn sign(secrets: &[Secret], id: &str, timestamp: u64, body: &[u8]) -> String {
    secrets
        .iter()
        .filter_map(|secret| secret.mac(id, timestamp, body))
        .map(|mac| format!("v1,{}", base64_encode(&mac.finalize().into_bytes())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The secrets deliveries are signed with: the global ones
/// (`LULL_SIGNING_SECRET`), and a topic's own (`signing_secret_env`) instead
/// for that topic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Keyring {
    global: Vec<Secret>,
    topics: std::collections::BTreeMap<String, Vec<Secret>>,
}

impl Keyring {
    /// Every topic signs with `global`, until given its own.
    pub fn new(global: Vec<Secret>) -> Keyring {
        Keyring { global, topics: Default::default() }
    }

    /// `topic` signs with `secrets` instead of the global ones.
    pub fn set_topic(&mut self, topic: &str, secrets: Vec<Secret>) {
        self.topics.insert(topic.to_string(), secrets);
    }

    /// The secrets `topic`'s deliveries are signed with.
    pub fn for_topic(&self, topic: &str) -> &[Secret] {
        self.topics.get(topic).unwrap_or(&self.global)
    }
}

/// Why a delivery's signature was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// No secret to verify with.
    NoSecret,
    /// `webhook-timestamp` is not unix seconds.
    BadTimestamp,
    /// The timestamp is further than the tolerance from now (either way).
    Stale {
        /// Seconds between the timestamp and now.
        skew_secs: u64,
    },
    /// `webhook-signature` has no `v1` entry.
    NoSignature,
    /// No `v1` entry matches any secret: a wrong secret, or the id, timestamp or body changed.
    Mismatch,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::NoSecret => f.write_str("no secret to verify with"),
            VerifyError::BadTimestamp => f.write_str("webhook-timestamp is not unix seconds"),
            VerifyError::Stale { skew_secs } => write!(f, "webhook-timestamp is {skew_secs} s away from now"),
            VerifyError::NoSignature => f.write_str("webhook-signature has no v1 entry"),
            VerifyError::Mismatch => f.write_str("signature does not match"),
        }
    }
}

impl std::error::Error for VerifyError {}

/// Check a delivery: its `webhook-id` (`id`), `webhook-timestamp`
/// (`timestamp_header`) and `webhook-signature` (`signature_header`) over the
/// exact `body` bytes, at `now` (unix seconds), allowing `tolerance_secs` of
/// skew either way ([`DEFAULT_TOLERANCE_SECS`] is the specification's).
/// Any of `secrets` matching any `v1` entry is enough (rotation); entries of
/// other versions are ignored. Returns the signed timestamp.
pub fn verify(
    secrets: &[Secret],
    id: &str,
    timestamp_header: &str,
    signature_header: &str,
    body: &[u8],
    now: u64,
    tolerance_secs: u64,
) -> Result<u64, VerifyError> {
    if secrets.is_empty() {
        return Err(VerifyError::NoSecret);
    }
    let digits = timestamp_header.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::BadTimestamp);
    }
    let timestamp = digits.parse::<u64>().map_err(|_| VerifyError::BadTimestamp)?;
    let skew_secs = now.abs_diff(timestamp);
    if skew_secs > tolerance_secs {
        return Err(VerifyError::Stale { skew_secs });
    }
    let entries: Vec<&str> = signature_header
        .split_whitespace()
        .filter_map(|entry| entry.split_once(','))
        .filter(|(version, _)| *version == "v1")
        .map(|(_, signature)| signature)
        .collect();
    if entries.is_empty() {
        return Err(VerifyError::NoSignature);
    }
    let candidates: Vec<Vec<u8>> = entries.iter().filter_map(|s| base64_decode(s)).collect();
    for expected in secrets.iter().filter_map(|secret| secret.mac(id, timestamp, body)) {
        // `verify_slice` compares in constant time.
        if candidates.iter().any(|c| expected.clone().verify_slice(c).is_ok()) {
            return Ok(timestamp);
        }
    }
    Err(VerifyError::Mismatch)
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64_encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Standard base64 with padding; `None` unless it is exactly that.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(text: &str) -> Secret {
        Secret::parse(text).unwrap()
    }

    fn key(byte: u8) -> Secret {
        secret(&format!("whsec_{}", base64_encode(&[byte; 32])))
    }

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
    fn base64_matches_rfc_4648() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(plain.as_bytes()), encoded);
            assert_eq!(base64_decode(encoded).as_deref(), Some(plain.as_bytes()));
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(base64_decode(&base64_encode(&all)), Some(all));
        for bad in ["Zg", "Zg=", "Z===", "Zg==Zg==", "Zm9v!A==", "Zm=v", "Zm9v Zg=="] {
            assert_eq!(base64_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_specifications_own_test_vector() {
        // From the Standard Webhooks reference library's tests (`sign function works`).
        let s = [secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")];
        let (id, ts, body) = ("msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, br#"{"test": 2432232314}"#);
        let header = sign(&s, id, ts, body);
        assert_eq!(header, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert_eq!(verify(&s, id, "1614265330", &header, body, ts + 10, 300), Ok(ts));
        // Its `multi sig payload is valid`: other versions and non-matching v1 entries around the one that matches.
        let multi = format!(
            "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= {header} \
             v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
        );
        assert_eq!(verify(&s, id, "1614265330", &multi, body, ts, 300), Ok(ts));
        // Its refusals: a bogus or truncated signature, a non-numeric timestamp.
        for bad in ["v1,dawfeoifkpqwoekfpqoekf", "v1,", &header[..8]] {
            assert_eq!(verify(&s, id, "1614265330", bad, body, ts, 300), Err(VerifyError::Mismatch), "{bad}");
        }
        assert_eq!(verify(&s, id, "hello", &header, body, ts, 300), Err(VerifyError::BadTimestamp));
    }

    #[test]
    fn the_id_the_timestamp_and_the_body_are_all_signed() {
        let s = [key(1)];
        let body = br#"{"topic":"orders","key":"42","window":7}"#;
        let header = sign(&s, "orders/42/k3x9q0m2ab.7", 1_700_000_000, body);
        assert!(header.starts_with("v1,") && header.len() == 3 + 44, "{header}");
        let check = |id: &str, ts: &str, body: &[u8]| verify(&s, id, ts, &header, body, 1_700_000_030, 300);
        assert_eq!(check("orders/42/k3x9q0m2ab.7", "1700000000", body), Ok(1_700_000_000));
        assert_eq!(check("orders/42/k3x9q0m2ab.8", "1700000000", body), Err(VerifyError::Mismatch));
        assert_eq!(check("orders/42/k3x9q0m2ab.7", "1700000001", body), Err(VerifyError::Mismatch));
        assert_eq!(check("orders/42/k3x9q0m2ab.7", "1700000000", b"{}"), Err(VerifyError::Mismatch));
        assert_eq!(
            verify(&[key(2)], "orders/42/k3x9q0m2ab.7", "1700000000", &header, body, 1_700_000_000, 300),
            Err(VerifyError::Mismatch)
        );
    }

    #[test]
    fn timestamps_outside_the_tolerance_either_way_are_refused() {
        let s = [key(1)];
        let header = sign(&s, "id", 1_000, b"x");
        assert_eq!(verify(&s, "id", "1000", &header, b"x", 1_300, 300), Ok(1_000));
        assert_eq!(verify(&s, "id", "1000", &header, b"x", 1_301, 300), Err(VerifyError::Stale { skew_secs: 301 }));
        assert_eq!(verify(&s, "id", "1000", &header, b"x", 699, 300), Err(VerifyError::Stale { skew_secs: 301 }));
        for bad in ["", " ", "+1000", "-1000", "1000.0", "1e3", "99999999999999999999999"] {
            assert_eq!(verify(&s, "id", bad, &header, b"x", 1_000, 300), Err(VerifyError::BadTimestamp), "{bad:?}");
        }
        for none in ["", "v2,abc", "v1abc", "t=1000,v1=00"] {
            assert_eq!(verify(&s, "id", "1000", none, b"x", 1_000, 300), Err(VerifyError::NoSignature), "{none:?}");
        }
        assert_eq!(verify(&[], "id", "1000", &header, b"x", 1_000, 300), Err(VerifyError::NoSecret));
    }

    #[test]
    fn every_secret_of_a_rotation_signs_and_any_one_verifies() {
        let (old, new, other) = ([key(1)], [key(2)], [key(3)]);
        let header = sign(&[key(1), key(2)], "id", 50, b"payload");
        let entries: Vec<&str> = header.split(' ').collect();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0], sign(&old, "id", 50, b"payload"));
        assert_eq!(entries[1], sign(&new, "id", 50, b"payload"));
        assert_eq!(verify(&old, "id", "50", &header, b"payload", 50, 0), Ok(50));
        assert_eq!(verify(&new, "id", "50", &header, b"payload", 50, 0), Ok(50));
        assert_eq!(verify(&other, "id", "50", &header, b"payload", 50, 0), Err(VerifyError::Mismatch));
        assert_eq!(verify(&[key(3), key(2)], "id", "50", &header, b"payload", 50, 0), Ok(50));
    }

    #[test]
    fn secrets_are_whsec_and_base64_of_at_least_24_bytes() {
        let ok = format!("whsec_{}", base64_encode(&[7; 24]));
        assert!(Secret::parse(&ok).is_ok());
        assert_eq!(Secret::parse("dev-signing-secret"), Err(SecretError::NoPrefix));
        assert_eq!(Secret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), Err(SecretError::NoPrefix));
        assert_eq!(Secret::parse("whsec_not*base64!"), Err(SecretError::NotBase64));
        assert_eq!(Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS"), Err(SecretError::NotBase64));
        let short = format!("whsec_{}", base64_encode(&[7; 16]));
        assert_eq!(Secret::parse(&short), Err(SecretError::TooShort { bytes: 16 }));
        assert_eq!(Secret::parse("  "), Err(SecretError::Empty));
        // Several, separated by any whitespace; the refusal names which, never the secret.
        let two = format!(" {ok}\n\twhsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw ");
        assert_eq!(Secret::parse_all(&two).map(|s| s.len()), Ok(2));
        let refused = Secret::parse_all(&format!("{ok} {short}")).unwrap_err();
        assert_eq!(refused, SecretsError { position: 2, count: 2, error: SecretError::TooShort { bytes: 16 } });
        let said = refused.to_string();
        assert!(said.starts_with("secret 2 of 2 decodes to 16 bytes"), "{said}");
        assert!(!said.contains(&short[6..]), "{said}");
        assert_eq!(Secret::parse_all(" \n").unwrap_err().error, SecretError::Empty);
        assert!(Secret::parse_all("oops").unwrap_err().to_string().starts_with("the secret does not start with"));
        assert_eq!(format!("{:?}", secret(&ok)), "Secret(24 bytes)");
    }

    #[test]
    fn a_topic_with_its_own_secrets_signs_with_them_alone() {
        let mut keyring = Keyring::new(vec![key(1), key(2)]);
        keyring.set_topic("billing", vec![key(9)]);
        assert_eq!(keyring.for_topic("orders"), &[key(1), key(2)]);
        assert_eq!(keyring.for_topic("billing"), &[key(9)]);
        let header = sign(keyring.for_topic("billing"), "id", 5, b"x");
        assert_eq!(verify(keyring.for_topic("orders"), "id", "5", &header, b"x", 5, 0), Err(VerifyError::Mismatch));
        assert_eq!(verify(keyring.for_topic("billing"), "id", "5", &header, b"x", 5, 0), Ok(5));
    }
}
