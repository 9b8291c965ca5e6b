//! Topic and key names as they arrive in request paths, and the host names of this machine.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

use crate::error::ApiError;

/// Longest key, in bytes of UTF-8 after percent-decoding.
pub const MAX_KEY_BYTES: usize = 512;

/// A debounce key: non-empty UTF-8 of at most [`MAX_KEY_BYTES`] bytes, without
/// control characters (keys appear in headers and logs).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(String);

impl Key {
    /// The key from a percent-encoded path segment (`/keys/{key}/…`).
    pub fn from_path_segment(segment: &str) -> Result<Key, ApiError> {
        let bytes = percent_decode(segment)?;
        let key = String::from_utf8(bytes).map_err(|_| ApiError::InvalidKey("the key is not valid UTF-8".into()))?;
        Key::new(key)
    }

    /// The key `key` (not encoded), checked.
    pub fn new(key: String) -> Result<Key, ApiError> {
        check_text(&key)?;
        if key == "." || key == ".." {
            // In a path they are dot segments: `…/keys/./timeline` would reach the key `timeline`.
            return Err(ApiError::InvalidKey(format!("the key {key:?} is a path's dot segment")));
        }
        Ok(Key(key))
    }

    /// The key itself.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key percent-encoded (every byte but `A-Z a-z 0-9 - . _ ~`), for
    /// headers, which must be ASCII.
    pub fn encoded(&self) -> String {
        utf8_percent_encode(&self.0, UNRESERVED).to_string()
    }
}

/// How log lines name a key: as it is when its topic sets `log_keys`, else
/// by a short hash (`k:` and 12 hex digits of its SHA-256), since keys can be
/// emails. The hash is a label for matching lines, not a secret.
pub(crate) fn key_label(key: &str, log_keys: bool) -> String {
    use sha2::{Digest, Sha256};
    if log_keys {
        return key.to_string();
    }
    let digest = Sha256::digest(key.as_bytes());
    format!("k:{}", hex::encode(&digest[..6]))
}

/// An idempotency key (`{topic}/{key, percent-encoded}/{rest}`) as log lines
/// show it: its key part labelled as [`key_label`] does.
pub(crate) fn idempotency_label(idempotency_key: &str, log_keys: bool) -> String {
    match idempotency_key.splitn(3, '/').collect::<Vec<_>>().as_slice() {
        _ if log_keys => idempotency_key.to_string(),
        [topic, key, rest] => {
            let key = percent_decode_str(key).decode_utf8_lossy();
            format!("{topic}/{}/{rest}", key_label(&key, false))
        }
        _ => key_label(idempotency_key, false),
    }
}

/// What every key, and every key prefix, must be: 1 to [`MAX_KEY_BYTES`]
/// bytes of UTF-8 without control characters.
pub(crate) fn check_text(key: &str) -> Result<(), ApiError> {
    if key.is_empty() {
        return Err(ApiError::InvalidKey("the key is empty".into()));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(ApiError::InvalidKey(format!("the key is {} bytes long; the limit is {MAX_KEY_BYTES}", key.len())));
    }
    if key.chars().any(char::is_control) {
        return Err(ApiError::InvalidKey("the key contains control characters".into()));
    }
    Ok(())
}

/// The Durable Object name for `(topic, key)`. Topic names cannot contain `/`,
/// so it is unambiguous.
pub(crate) fn object_name(topic: &str, key: &Key) -> String {
    format!("{topic}/{}", key.as_str())
}

/// Whether `name` is a valid topic name: 1 to 64 of `A-Z a-z 0-9 _ . -`.
pub(crate) fn is_topic_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Every byte but the URL-unreserved ones (`A-Z a-z 0-9 - . _ ~`) is escaped.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Decode %-escapes, refusing a `%` not followed by two hex digits (the
/// decoder would pass it through).
fn percent_decode(segment: &str) -> Result<Vec<u8>, ApiError> {
    let bytes = segment.as_bytes();
    let malformed = bytes
        .iter()
        .enumerate()
        .any(|(i, b)| *b == b'%' && !bytes.get(i + 1..i + 3).is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)));
    if malformed {
        return Err(ApiError::InvalidKey("the key has a malformed %-escape".into()));
    }
    Ok(percent_decode_str(segment).collect())
}

/// Whether `host` (a parsed URL's) is `localhost`, in `127.0.0.0/8` or `::1`:
/// the one name of this machine a demo route answers and an `http://` target may have.
pub(crate) fn is_loopback_host(host: Option<url::Host<&str>>) -> bool {
    match host {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_percent_decoded_utf8_of_at_most_512_bytes() {
        assert_eq!(Key::from_path_segment("customer-42").unwrap().as_str(), "customer-42");
        assert_eq!(Key::from_path_segment("a%2Fb%20c").unwrap().as_str(), "a/b c");
        assert_eq!(Key::from_path_segment("%E2%9C%93").unwrap().as_str(), "✓");
        assert_eq!(Key::from_path_segment(&"k".repeat(512)).unwrap().as_str().len(), 512);
        let refused = |s: &str| Key::from_path_segment(s).unwrap_err().code();
        assert_eq!(refused(""), "invalid_key");
        assert_eq!(refused(&"k".repeat(513)), "invalid_key");
        assert_eq!(refused("%FF%FE"), "invalid_key", "not UTF-8");
        assert_eq!(refused("bad%2"), "invalid_key");
        assert_eq!(refused("bad%zz"), "invalid_key");
        assert_eq!(refused("line%0Abreak"), "invalid_key");
        for dots in [".", "..", "%2E", "%2e%2E"] {
            assert_eq!(refused(dots), "invalid_key", "{dots}");
        }
        assert_eq!(Key::from_path_segment("...").unwrap().as_str(), "...", "only the two dot segments");
    }

    #[test]
    fn encoded_keys_are_ascii_and_round_trip() {
        let key = Key::from_path_segment("a/b c%E2%9C%93").unwrap();
        let encoded = key.encoded();
        assert_eq!(encoded, "a%2Fb%20c%E2%9C%93");
        assert!(encoded.is_ascii());
        assert_eq!(Key::from_path_segment(&encoded).unwrap(), key);
    }

    #[test]
    fn logs_name_keys_by_a_short_hash_unless_asked() {
        let label = key_label("ada@example.com", false);
        assert!(label.starts_with("k:") && label.len() == 14 && !label.contains("ada"), "{label}");
        assert_eq!(key_label("ada@example.com", false), label, "the same key, the same label");
        assert_ne!(key_label("bob@example.com", false), label);
        assert_eq!(key_label("ada@example.com", true), "ada@example.com");
        let idem = "orders/ada%40example.com/k3x9.7.part-0-of-2";
        assert_eq!(idempotency_label(idem, false), format!("orders/{label}/k3x9.7.part-0-of-2"));
        assert_eq!(idempotency_label(idem, true), idem);
    }

    #[test]
    fn topic_names_and_object_names() {
        assert!(is_topic_name("orders.v2-eu_1"));
        assert!(!is_topic_name(""));
        assert!(!is_topic_name("a/b"));
        assert!(!is_topic_name(&"t".repeat(65)));
        let key = Key::from_path_segment("x%2Fy").unwrap();
        assert_eq!(object_name("orders", &key), "orders/x/y");
    }
}
