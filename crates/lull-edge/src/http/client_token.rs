//! Client tokens: short-lived JWTs (HS256) a browser page holds instead of an
//! ingest token, scoped to one topic and one key or a key prefix. A backend
//! mints them with any JWT library (or the admin route
//! `POST /v1/topics/{topic}/client-tokens`); the worker verifies them with no
//! storage and no round trip.
//!
//! ```text
//! header  {"alg": "HS256", "typ": "JWT", "kid": "0"}       kid: which secret (0-based), optional
//! claims  {"topic": "docs", "key": "doc-42" | "key_prefix": "user-7/",
//!          "exp": 1767225600, "iat": 1767222000, "nbf"?: …, "events_per_minute"?: 60}
//! ```
//!
//! Guarantees:
//! - **Only HS256**, signed with a secret of `LULL_CLIENT_TOKEN_SECRET`
//!   (whitespace-separated, for rotation): `alg: none` and every other
//!   algorithm are refused. A `kid` names the secret to check; without one,
//!   each is tried. Signatures are compared in constant time.
//! - **Short-lived**: `exp` is required, and a lifetime over
//!   [`MAX_LIFETIME_S`] (from `iat`, or from now without one) is refused.
//! - **Scoped**: `topic` and exactly one of `key` or `key_prefix`.
//! - A refusal names what is wrong (expired, not yet valid, bad signature,
//!   malformed), never a secret.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::error::ApiError;
use crate::names::Key;

/// The longest a client token may live: 24 h.
pub const MAX_LIFETIME_S: u64 = 24 * 60 * 60;
/// The lifetime the mint route gives unless asked: 1 h.
pub const DEFAULT_TTL_S: u64 = 60 * 60;
/// The shortest client token secret accepted (characters).
pub const MIN_SECRET_CHARS: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// What a client token may do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Claims {
    /// The one topic it may post to.
    pub topic: String,
    /// The one key it may post to (or `key_prefix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Every key starting with this (or `key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// When it expires (unix seconds).
    pub exp: u64,
    /// When it was issued (unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// Not valid before (unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// At most this many of its events per key and minute, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_per_minute: Option<u32>,
    /// Any other registered claim a JWT library adds (`sub`, `jti`, `aud`, `iss`) is
    /// accepted and ignored.
    #[serde(default, skip_serializing)]
    sub: Option<serde_json::Value>,
    #[serde(default, skip_serializing)]
    jti: Option<serde_json::Value>,
    #[serde(default, skip_serializing)]
    aud: Option<serde_json::Value>,
    #[serde(default, skip_serializing)]
    iss: Option<serde_json::Value>,
}

impl Claims {
    /// Claims for `topic` and a key (`prefix: false`) or a key prefix, valid
    /// from `now` for `ttl_s` seconds.
    pub(crate) fn new(
        topic: &str,
        key: &str,
        prefix: bool,
        now: u64,
        ttl_s: u64,
        events_per_minute: Option<u32>,
    ) -> Claims {
        let (key, key_prefix) = if prefix { (None, Some(key.to_string())) } else { (Some(key.to_string()), None) };
        Claims {
            topic: topic.to_string(),
            key,
            key_prefix,
            exp: now.saturating_add(ttl_s),
            iat: Some(now),
            nbf: None,
            events_per_minute,
            sub: None,
            jti: None,
            aud: None,
            iss: None,
        }
    }

    /// Whether it covers `key` of `topic`.
    pub(crate) fn covers(&self, topic: &str, key: &str) -> bool {
        self.topic == topic
            && match (&self.key, &self.key_prefix) {
                (Some(k), None) => k == key,
                (None, Some(prefix)) => key.starts_with(prefix.as_str()),
                _ => false,
            }
    }
}

/// The body of `POST /v1/topics/{topic}/client-tokens` (admin): a key or a
/// key prefix, and optionally a lifetime and a per-key event bound.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MintRequest {
    /// One key.
    #[serde(default)]
    pub key: Option<String>,
    /// Every key starting with it.
    #[serde(default)]
    pub key_prefix: Option<String>,
    /// Its lifetime in seconds: 1..=[`MAX_LIFETIME_S`], default [`DEFAULT_TTL_S`].
    #[serde(default)]
    pub ttl_s: Option<u64>,
    /// At most this many of its events per key and minute (1 or more).
    #[serde(default)]
    pub events_per_minute: Option<u32>,
}

impl MintRequest {
    /// The request a body holds: `400 malformed_json` if it is not JSON,
    /// `400 bad_request` if it is not such a request (an unknown field, say).
    pub(crate) fn parse(body: &[u8]) -> Result<MintRequest, ApiError> {
        crate::http::json_body(body, r#"{"key" | "key_prefix", "ttl_s"?, "events_per_minute"?}"#)
    }

    /// The claims it asks for on `topic`, from `now` (unix seconds): `400
    /// bad_request` says what is wrong, `400 invalid_key` (as for a path's
    /// key) if the key or prefix is not one.
    pub(crate) fn claims(self, topic: &str, now: u64) -> Result<Claims, ApiError> {
        let bad = |why: String| Err(ApiError::BadRequest(why));
        let ttl = self.ttl_s.unwrap_or(DEFAULT_TTL_S);
        if !(1..=MAX_LIFETIME_S).contains(&ttl) {
            return bad(format!("ttl_s must be 1..={MAX_LIFETIME_S}, not {ttl}"));
        }
        if self.events_per_minute == Some(0) {
            return bad("events_per_minute must be at least 1".into());
        }
        let (scope, prefix) = match (self.key, self.key_prefix) {
            (Some(key), None) => (key, false),
            (None, Some(prefix)) => (prefix, true),
            _ => return bad("give exactly one of key and key_prefix".into()),
        };
        // A key is checked as every key is; a prefix as its text (it may be `.`).
        let checked = if prefix { crate::names::check_text(&scope) } else { Key::new(scope.clone()).map(drop) };
        let field = if prefix { "key_prefix" } else { "key" };
        checked.map_err(|e| ApiError::InvalidKey(format!("{field}: {}", e.message())))?;
        Ok(Claims::new(topic, &scope, prefix, now, ttl, self.events_per_minute))
    }
}

/// Why a client token was refused (`401 unauthorized`, with this reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenError {
    /// Not three base64url parts of JSON, or claims missing or wrong.
    Malformed(String),
    /// An algorithm other than HS256 (`none` included).
    Algorithm(String),
    /// No secret signed it.
    BadSignature,
    /// Past `exp`.
    Expired,
    /// Before `nbf`.
    NotYetValid,
    /// A lifetime over [`MAX_LIFETIME_S`].
    TooLong,
}

impl core::fmt::Display for TokenError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TokenError::Malformed(why) => write!(f, "the client token is malformed: {why}"),
            TokenError::Algorithm(alg) => write!(f, "the client token's algorithm {alg:?} is not HS256"),
            TokenError::BadSignature => f.write_str("the client token's signature does not verify"),
            TokenError::Expired => f.write_str("the client token has expired"),
            TokenError::NotYetValid => f.write_str("the client token is not valid yet (nbf)"),
            TokenError::TooLong => {
                write!(f, "the client token lives longer than {MAX_LIFETIME_S} s (from iat, or from now)")
            }
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    typ: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kid: Option<String>,
}

/// The secrets of `LULL_CLIENT_TOKEN_SECRET`, in order (a `kid` is a position).
#[derive(Clone, Debug, Default)]
pub(crate) struct ClientSecrets(Vec<Vec<u8>>);

impl ClientSecrets {
    /// The secrets in `text` (whitespace-separated), each at least
    /// [`MIN_SECRET_CHARS`]; none at all when `text` is `None` (client tokens are off).
    pub(crate) fn parse(text: Option<&str>) -> Result<ClientSecrets, ApiError> {
        let secrets: Vec<&str> = text.unwrap_or("").split_whitespace().collect();
        if let Some(short) = secrets.iter().find(|s| s.chars().count() < MIN_SECRET_CHARS) {
            return Err(ApiError::Config(format!(
                "LULL_CLIENT_TOKEN_SECRET holds a secret of {} characters; secrets are at least {MIN_SECRET_CHARS}",
                short.chars().count()
            )));
        }
        Ok(ClientSecrets(secrets.into_iter().map(|s| s.as_bytes().to_vec()).collect()))
    }

    /// Whether any secret is configured (else client tokens are refused).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A token with `claims`, signed with the first secret (`kid` "0").
    pub(crate) fn mint(&self, claims: &Claims) -> Result<String, ApiError> {
        let secret = self.0.first().ok_or_else(|| {
            ApiError::Config("LULL_CLIENT_TOKEN_SECRET is not set: no client token can be minted".into())
        })?;
        let header = Header { alg: "HS256".into(), typ: Some("JWT".into()), kid: Some("0".into()) };
        let signed = format!("{}.{}", part(&header)?, part(claims)?);
        let mac = mac(secret, signed.as_bytes()).ok_or_else(|| ApiError::Internal("HMAC key".into()))?;
        let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        Ok(format!("{signed}.{signature}"))
    }

    /// The claims of `token` at `now` (unix seconds), if a secret signed it and it is valid now.
    pub(crate) fn verify(&self, token: &str, now: u64) -> Result<Claims, TokenError> {
        let malformed = |why: &str| TokenError::Malformed(why.into());
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed("not three dot-separated parts"));
        };
        let json = |part: &str| URL_SAFE_NO_PAD.decode(part).map_err(|_| malformed("a part is not base64url"));
        let head: Header = serde_json::from_slice(&json(header)?).map_err(|_| malformed("the header is not JSON"))?;
        if head.alg != "HS256" {
            return Err(TokenError::Algorithm(head.alg));
        }
        let signature = json(signature)?;
        let signed = &token[..header.len() + 1 + claims.len()];
        let candidates: Vec<&Vec<u8>> = match head.kid.as_deref() {
            Some(kid) => kid.parse::<usize>().ok().and_then(|i| self.0.get(i)).into_iter().collect(),
            None => self.0.iter().collect(),
        };
        let verifies =
            |secret: &&Vec<u8>| mac(secret, signed.as_bytes()).is_some_and(|m| m.verify_slice(&signature).is_ok());
        if !candidates.iter().any(verifies) {
            return Err(TokenError::BadSignature);
        }
        let claims: Claims =
            serde_json::from_slice(&json(claims)?).map_err(|e| TokenError::Malformed(format!("its claims: {e}")))?;
        if claims.key.is_some() == claims.key_prefix.is_some() {
            return Err(malformed("exactly one of key and key_prefix is required"));
        }
        if claims.events_per_minute == Some(0) {
            return Err(malformed("events_per_minute must be at least 1"));
        }
        if now >= claims.exp {
            return Err(TokenError::Expired);
        }
        if claims.nbf.is_some_and(|nbf| now < nbf) {
            return Err(TokenError::NotYetValid);
        }
        // From `iat`, and from now whatever `iat` says (an `iat` in the future would stretch it).
        let lifetime = claims.exp.saturating_sub(claims.iat.unwrap_or(now).min(now));
        if lifetime > MAX_LIFETIME_S {
            return Err(TokenError::TooLong);
        }
        Ok(claims)
    }
}

/// HMAC-SHA256 of `data` under `secret` (any length of key is valid: `None` never happens).
fn mac(secret: &[u8], data: &[u8]) -> Option<HmacSha256> {
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(secret).ok()?;
    mac.update(data);
    Some(mac)
}

/// One part of a token: its JSON, base64url without padding.
fn part<T: Serialize>(value: &T) -> Result<String, ApiError> {
    serde_json::to_vec(value).map(|json| URL_SAFE_NO_PAD.encode(json)).map_err(|e| ApiError::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: &str = "client-secret-one-0123456789abcdef";
    const SECOND: &str = "client-secret-two-0123456789abcdef";
    const NOW: u64 = 1_767_222_000;

    fn secrets() -> ClientSecrets {
        ClientSecrets::parse(Some(&format!("{FIRST}\n{SECOND}"))).unwrap()
    }

    /// A token signed by hand: `header` and `claims` as JSON, with `secret`.
    fn signed(header: &str, claims: &str, secret: &str) -> String {
        let signed = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(claims));
        let sig = URL_SAFE_NO_PAD.encode(mac(secret.as_bytes(), signed.as_bytes()).unwrap().finalize().into_bytes());
        format!("{signed}.{sig}")
    }

    #[test]
    fn a_minted_token_verifies_and_covers_its_scope_only() {
        let claims = Claims::new("docs", "doc-", true, NOW, DEFAULT_TTL_S, Some(60));
        let token = secrets().mint(&claims).unwrap();
        let back = secrets().verify(&token, NOW + 10).unwrap();
        assert_eq!(back, claims);
        assert!(back.covers("docs", "doc-42") && !back.covers("docs", "note-1") && !back.covers("orders", "doc-1"));
        let one = Claims::new("docs", "doc-1", false, NOW, 60, None);
        assert!(one.covers("docs", "doc-1") && !one.covers("docs", "doc-10"));
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let s = secrets();
        let claims = |extra: &str| format!(r#"{{"topic":"docs","key":"d","exp":{}{extra}}}"#, NOW + 600);
        let hs = r#"{"alg":"HS256","typ":"JWT"}"#;
        assert_eq!(s.verify(&signed(hs, &claims(""), FIRST), NOW).map(|c| c.topic), Ok("docs".into()));
        assert_eq!(s.verify(&signed(hs, &claims(""), SECOND), NOW).map(|c| c.topic), Ok("docs".into()), "rotation");
        let kid1 = r#"{"alg":"HS256","kid":"1"}"#;
        assert!(s.verify(&signed(kid1, &claims(""), SECOND), NOW).is_ok(), "kid 1 is the second secret");
        assert_eq!(s.verify(&signed(kid1, &claims(""), FIRST), NOW), Err(TokenError::BadSignature), "kid pins it");
        let other = "another-secret-0123456789abcdefghij";
        assert_eq!(s.verify(&signed(hs, &claims(""), other), NOW), Err(TokenError::BadSignature));
        let none = format!("{}.{}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#), URL_SAFE_NO_PAD.encode(claims("")));
        assert_eq!(s.verify(&none, NOW), Err(TokenError::Algorithm("none".into())));
        assert_eq!(s.verify(&signed(hs, &claims(""), FIRST), NOW + 600), Err(TokenError::Expired));
        let later = claims(&format!(r#","nbf":{}"#, NOW + 60));
        assert_eq!(s.verify(&signed(hs, &later, FIRST), NOW), Err(TokenError::NotYetValid));
        let long = format!(r#"{{"topic":"docs","key":"d","exp":{},"iat":{NOW}}}"#, NOW + MAX_LIFETIME_S + 1);
        assert_eq!(s.verify(&signed(hs, &long, FIRST), NOW), Err(TokenError::TooLong));
        let far = format!(r#"{{"topic":"docs","key":"d","exp":{}}}"#, NOW + MAX_LIFETIME_S + 1);
        assert_eq!(s.verify(&signed(hs, &far, FIRST), NOW), Err(TokenError::TooLong), "no iat: from now");
        let ahead = NOW + 10 * 365 * 86_400;
        let future = format!(r#"{{"topic":"docs","key":"d","iat":{ahead},"exp":{}}}"#, ahead + 3_600);
        assert_eq!(
            s.verify(&signed(hs, &future, FIRST), NOW),
            Err(TokenError::TooLong),
            "an iat ahead stretches nothing"
        );
        let both = format!(r#"{{"topic":"docs","key":"d","key_prefix":"x","exp":{}}}"#, NOW + 60);
        assert!(matches!(s.verify(&signed(hs, &both, FIRST), NOW), Err(TokenError::Malformed(_))));
        let no_exp = r#"{"topic":"docs","key":"d"}"#;
        assert!(matches!(s.verify(&signed(hs, no_exp, FIRST), NOW), Err(TokenError::Malformed(_))));
        assert!(matches!(s.verify("a.b", NOW), Err(TokenError::Malformed(_))));
        let with_sub = claims(r#","sub":"user-7","jti":"x1""#);
        assert!(s.verify(&signed(hs, &with_sub, FIRST), NOW).is_ok(), "a library's other claims are fine");
        for e in [TokenError::BadSignature, TokenError::Expired, TokenError::TooLong] {
            assert!(!e.to_string().contains(FIRST));
        }
    }

    #[test]
    fn the_mint_route_checks_what_it_is_asked() {
        let ask = |json: &str| serde_json::from_str::<MintRequest>(json).unwrap().claims("docs", NOW);
        let one = ask(r#"{"key": "doc-1", "events_per_minute": 30}"#).unwrap();
        assert_eq!(
            (one.key.as_deref(), one.exp, one.events_per_minute),
            (Some("doc-1"), NOW + DEFAULT_TTL_S, Some(30))
        );
        let prefix = ask(r#"{"key_prefix": "user-7/", "ttl_s": 86400}"#).unwrap();
        assert_eq!((prefix.key_prefix.as_deref(), prefix.exp), (Some("user-7/"), NOW + MAX_LIFETIME_S));
        for bad in [
            r#"{}"#,
            r#"{"key": "a", "key_prefix": "b"}"#,
            r#"{"key": "a", "ttl_s": 0}"#,
            r#"{"key": "a", "ttl_s": 86401}"#,
            r#"{"key": "a", "events_per_minute": 0}"#,
        ] {
            assert_eq!(ask(bad).unwrap_err().code(), "bad_request", "{bad}");
        }
        let long = format!(r#"{{"key": "{}"}}"#, "k".repeat(513));
        // A key that is not one is refused as a path's key is (and a batch's): one problem, one code.
        for bad in [
            r#"{"key": ""}"#,
            r#"{"key": "."}"#,
            r#"{"key": ".."}"#,
            r#"{"key": "a\u0000b"}"#,
            &long,
            r#"{"key_prefix": ""}"#,
        ] {
            let error = ask(bad).unwrap_err();
            assert_eq!((error.status(), error.code()), (400, "invalid_key"), "{bad}");
            assert_eq!(error.code(), crate::names::Key::new(String::new()).unwrap_err().code());
        }
        assert!(ask(r#"{"key": "."}"#).unwrap_err().message().starts_with("key: "), "names the field");
        assert!(ask(r#"{"key_prefix": "."}"#).is_ok(), "a prefix may be a dot");
        let parse = |body: &str| MintRequest::parse(body.as_bytes()).map(drop).map_err(|e| e.code());
        assert_eq!(parse(r#"{"key": "a", "ttl_s": 60}"#), Ok(()));
        assert_eq!(parse(r#"{"key": "a", "scope": "all"}"#), Err("bad_request"), "unknown fields");
        assert_eq!(parse(r#"{"key": 7}"#), Err("bad_request"));
        assert_eq!(parse(r#"{"key": "a", "ttl_s": 1e400}"#), Err("bad_request"), "JSON, as an event's body would be");
        for not_json in ["", "{ not json", r#"{"key": "a"} x"#, r#"{"key": "a""#] {
            assert_eq!(parse(not_json), Err("malformed_json"), "as an event's body: {not_json:?}");
        }
    }

    #[test]
    fn secrets_are_long_or_refused() {
        assert!(ClientSecrets::parse(None).unwrap().is_empty());
        let Err(ApiError::Config(why)) = ClientSecrets::parse(Some("short")) else { panic!() };
        assert!(why.contains("5 characters") && !why.contains("short"));
        assert!(ClientSecrets::default().mint(&Claims::new("t", "k", false, NOW, 60, None)).is_err());
    }
}
