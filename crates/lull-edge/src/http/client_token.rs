//! Client tokens: short-lived JWTs (HS256) a browser page holds instead of an
//! ingest token, scoped to one topic and one key or a key prefix. A backend
//! mints them with any JWT library (or the admin route
//! `POST /v1/topics/{topic}/client-tokens`); the worker verifies them with no
//! storage and no round trip.
//!
//! ```text
//! header  {"alg": "HS256", "typ": "JWT", "kid": "Xq3…"}   kid: the secret's fingerprint, optional
//! claims  {"topic": "docs", "key": "doc-42" | "key_prefix": "user-7/",
//!          "exp": 1767225600, "iat": 1767222000, "nbf"?: …, "events_per_minute"?: 60,
//!          "ops"?: ["events", "flush", "cancel"], "sub"?: "user-7"}
//! ```
//!
//! Guarantees:
//! - **Only HS256**, signed with a secret of the topic's (its
//!   `client_token_secret_env`, or `LULL_CLIENT_TOKEN_SECRET` for a topic with
//!   `client_tokens = true`; whitespace-separated, for rotation): `alg: none`
//!   and every other algorithm are refused. A `kid` is a secret's fingerprint
//!   ([`fingerprint`]: it does not move when secrets are added or removed);
//!   a token whose `kid` names none (or has none) is checked against each
//!   secret. Signatures are compared in constant time.
//! - **Short-lived**: `exp` is required, and a lifetime over
//!   [`MAX_LIFETIME_S`] (from `iat`, or from now without one) is refused;
//!   `nbf` is honoured with [`NBF_LEEWAY_S`] of clock skew.
//! - **Scoped**: `topic` and exactly one of `key` or a non-empty `key_prefix`;
//!   events only, unless `ops` names `flush` or `cancel` too.
//! - **Its own budget**: a token's idempotency keys and `events_per_minute`
//!   are its holder's ([`Claims::holder`]: its `sub`, else the token itself),
//!   never shared with a backend's or another page's.
//! - A refusal names what is wrong (expired, not yet valid, bad signature,
//!   malformed), never a secret.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use std::collections::BTreeMap;

use crate::error::ApiError;
use crate::names::Key;
use crate::topic::Topics;

/// The longest a client token may live: 24 h.
pub const MAX_LIFETIME_S: u64 = 24 * 60 * 60;
/// The lifetime the mint route gives unless asked: 1 h.
pub const DEFAULT_TTL_S: u64 = 60 * 60;
/// The shortest client token secret accepted (characters).
pub const MIN_SECRET_CHARS: usize = 32;
/// The Rate Limiting binding (`[[ratelimits]]` in `wrangler.toml`) that
/// bounds a `key_prefix` client token's events across its keys, keyed by its
/// holder: each key's share of a request spends one (its limit and period are
/// the binding's). A worker without it refuses such tokens' events (`500 config`).
pub const CLIENT_RATE_BINDING: &str = "LULL_CLIENT_RATE";
/// How far ahead of the worker's clock a token's `nbf` may be and still be
/// valid (seconds): the clock skew between the minting backend and the edge.
pub const NBF_LEEWAY_S: u64 = 60;

type HmacSha256 = Hmac<Sha256>;

/// An operation a client token may be granted (`ops`): posting events is
/// always granted; flushing and cancelling the key's open window only when named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ClientOp {
    /// `POST …/events` and the batch route: the default.
    Events,
    /// `POST …/flush`.
    Flush,
    /// `DELETE …/keys/{key}`: drops the open window and every queued one, with
    /// events other producers posted too — grant it only to a page that owns the key.
    Cancel,
}

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
    /// At most this many of its holder's events per key and minute, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_per_minute: Option<u32>,
    /// The operations it may do besides posting events (`flush`, `cancel`);
    /// without it, events only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<Vec<ClientOp>>,
    /// Who holds it (a user, a session): tokens with one `sub` share their
    /// idempotency keys and `events_per_minute`. Without it, each token is its own holder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
    /// Its holder, as the key object names it ([`Claims::holder`]); set by [`ClientSecrets::verify`].
    #[serde(skip)]
    holder: String,
    /// Any other registered claim a JWT library adds (`jti`, `aud`, `iss`) is
    /// accepted and ignored.
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
            ops: None,
            sub: None,
            holder: String::new(),
            jti: None,
            aud: None,
            iss: None,
        }
    }

    /// Whether it may do `op` (posting events always; flush and cancel when `ops` names them).
    pub(crate) fn allows(&self, op: ClientOp) -> bool {
        op == ClientOp::Events || self.ops.as_ref().is_some_and(|ops| ops.contains(&op))
    }

    /// Who holds it, as the key object scopes idempotency keys and counts
    /// `events_per_minute`: `client:` and 16 hex digits of SHA-256 of its `sub`
    /// (`s` + sub), or, without one, of the token itself (`t` + token).
    pub(crate) fn holder(&self) -> &str {
        &self.holder
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
    /// At most this many of its holder's events per key and minute (1 or more).
    #[serde(default)]
    pub events_per_minute: Option<u32>,
    /// The operations it may do besides posting events (`flush`, `cancel`).
    #[serde(default)]
    pub ops: Option<Vec<ClientOp>>,
    /// Who holds it (see [`Claims::sub`]).
    #[serde(default)]
    pub sub: Option<String>,
}

impl MintRequest {
    /// The request a body holds: `400 malformed_json` if it is not JSON,
    /// `400 bad_request` if it is not such a request (an unknown field, say).
    pub(crate) fn parse(body: &[u8]) -> Result<MintRequest, ApiError> {
        crate::http::json_body(body, r#"{"key" | "key_prefix", "ttl_s"?, "events_per_minute"?, "ops"?, "sub"?}"#)
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
        if self.sub.as_deref() == Some("") {
            return bad("sub must not be empty".into());
        }
        let mut claims = Claims::new(topic, &scope, prefix, now, ttl, self.events_per_minute);
        claims.ops = self.ops.map(|mut ops| {
            ops.sort();
            ops.dedup();
            ops
        });
        claims.sub = self.sub;
        Ok(claims)
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

/// Topic → the secrets its client tokens are signed with, for each topic that
/// accepts them: its own (`client_token_secret_env`, the variable's text from
/// `read`) or `LULL_CLIENT_TOKEN_SECRET`'s (`global`, for `client_tokens = true`).
/// A topic that accepts them with no secret to check them is a configuration
/// error naming the topic and the variable.
pub(crate) fn topic_secrets(
    topics: &Topics,
    global: Option<&str>,
    read: impl Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, ClientSecrets>, ApiError> {
    let global = ClientSecrets::parse(global)?;
    let mut by_topic = BTreeMap::new();
    for topic in topics.iter().filter(|t| t.client_tokens) {
        let (var, secrets) = match &topic.client_token_secret_env {
            Some(var) => (var.as_str(), ClientSecrets::parse_var(var, read(var).as_deref())?),
            None => ("LULL_CLIENT_TOKEN_SECRET", global.clone()),
        };
        if secrets.is_empty() {
            return Err(ApiError::Config(format!(
                "topic {:?} accepts client tokens, but {var} holds no secret to check them with",
                topic.name
            )));
        }
        by_topic.insert(topic.name.clone(), secrets);
    }
    Ok(by_topic)
}

/// A secret's name in a token's `kid`: 8 bytes of its SHA-256, base64url (11
/// characters), as JWKS names keys by thumbprint: it names the secret
/// wherever it stands in the list, and tells nothing of it.
pub(crate) fn fingerprint(secret: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(&Sha256::digest(secret)[..8])
}

/// Client token secrets (one variable's, in order; the first signs), each with its fingerprint.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClientSecrets(Vec<(String, Vec<u8>)>);

impl ClientSecrets {
    /// The secrets of the variable `var` in `text` (whitespace-separated), each
    /// at least [`MIN_SECRET_CHARS`]; none at all when `text` is `None`.
    pub(crate) fn parse_var(var: &str, text: Option<&str>) -> Result<ClientSecrets, ApiError> {
        let secrets: Vec<&str> = text.unwrap_or("").split_whitespace().collect();
        if let Some(short) = secrets.iter().find(|s| s.chars().count() < MIN_SECRET_CHARS) {
            return Err(ApiError::Config(format!(
                "{var} holds a secret of {} characters; secrets are at least {MIN_SECRET_CHARS}",
                short.chars().count()
            )));
        }
        Ok(ClientSecrets(secrets.into_iter().map(|s| (fingerprint(s.as_bytes()), s.as_bytes().to_vec())).collect()))
    }

    /// The secrets of `LULL_CLIENT_TOKEN_SECRET` ([`ClientSecrets::parse_var`]).
    pub(crate) fn parse(text: Option<&str>) -> Result<ClientSecrets, ApiError> {
        ClientSecrets::parse_var("LULL_CLIENT_TOKEN_SECRET", text)
    }

    /// Whether any secret is configured (else client tokens are refused).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A token with `claims`, signed with the first secret (`kid`: its fingerprint).
    pub(crate) fn mint(&self, claims: &Claims) -> Result<String, ApiError> {
        let (kid, secret) = self
            .0
            .first()
            .ok_or_else(|| ApiError::Config("no client token secret is set: no client token can be minted".into()))?;
        let header = Header { alg: "HS256".into(), typ: Some("JWT".into()), kid: Some(kid.clone()) };
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
        // The secret the `kid` names; any other `kid` (an old token's position, say) or none: each.
        let named: Vec<&Vec<u8>> =
            self.0.iter().filter(|(id, _)| Some(id.as_str()) == head.kid.as_deref()).map(|(_, s)| s).collect();
        let candidates = if named.is_empty() { self.0.iter().map(|(_, s)| s).collect() } else { named };
        let verifies =
            |secret: &&Vec<u8>| mac(secret, signed.as_bytes()).is_some_and(|m| m.verify_slice(&signature).is_ok());
        if !candidates.iter().any(verifies) {
            return Err(TokenError::BadSignature);
        }
        let mut claims: Claims =
            serde_json::from_slice(&json(claims)?).map_err(|e| TokenError::Malformed(format!("its claims: {e}")))?;
        if claims.key.is_some() == claims.key_prefix.is_some() {
            return Err(malformed("exactly one of key and key_prefix is required"));
        }
        if claims.key_prefix.as_deref() == Some("") {
            return Err(malformed("key_prefix must not be empty (it would cover every key of the topic)"));
        }
        if claims.events_per_minute == Some(0) {
            return Err(malformed("events_per_minute must be at least 1"));
        }
        if claims.sub.as_deref() == Some("") {
            return Err(malformed("sub must not be empty"));
        }
        if now >= claims.exp {
            return Err(TokenError::Expired);
        }
        if claims.nbf.is_some_and(|nbf| now.saturating_add(NBF_LEEWAY_S) < nbf) {
            return Err(TokenError::NotYetValid);
        }
        // From `iat`, and from now whatever `iat` says (an `iat` in the future would stretch it).
        let lifetime = claims.exp.saturating_sub(claims.iat.unwrap_or(now).min(now));
        if lifetime > MAX_LIFETIME_S {
            return Err(TokenError::TooLong);
        }
        let named = match &claims.sub {
            Some(sub) => Sha256::new().chain_update("s").chain_update(sub),
            None => Sha256::new().chain_update("t").chain_update(token),
        };
        claims.holder = format!("client:{}", hex::encode(&named.finalize()[..8]));
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
        assert_eq!(back, Claims { holder: back.holder.clone(), ..claims });
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
        let kid = |secret: &str| format!(r#"{{"alg":"HS256","kid":"{}"}}"#, fingerprint(secret.as_bytes()));
        assert!(s.verify(&signed(&kid(SECOND), &claims(""), SECOND), NOW).is_ok(), "kid names the second secret");
        let pinned = s.verify(&signed(&kid(SECOND), &claims(""), FIRST), NOW);
        assert_eq!(pinned, Err(TokenError::BadSignature), "a kid that names a secret pins it");
        let old = r#"{"alg":"HS256","kid":"0"}"#;
        assert!(s.verify(&signed(old, &claims(""), SECOND), NOW).is_ok(), "an old positional kid: each secret");
        let other = "another-secret-0123456789abcdefghij";
        assert_eq!(s.verify(&signed(hs, &claims(""), other), NOW), Err(TokenError::BadSignature));
        let none = format!("{}.{}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#), URL_SAFE_NO_PAD.encode(claims("")));
        assert_eq!(s.verify(&none, NOW), Err(TokenError::Algorithm("none".into())));
        assert_eq!(s.verify(&signed(hs, &claims(""), FIRST), NOW + 600), Err(TokenError::Expired));
        let skewed = claims(&format!(r#","nbf":{}"#, NOW + NBF_LEEWAY_S));
        assert!(s.verify(&signed(hs, &skewed, FIRST), NOW).is_ok(), "nbf within the clock leeway");
        let later = claims(&format!(r#","nbf":{}"#, NOW + NBF_LEEWAY_S + 1));
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
        let everything = format!(r#"{{"topic":"docs","key_prefix":"","exp":{}}}"#, NOW + 60);
        let refused = s.verify(&signed(hs, &everything, FIRST), NOW);
        assert!(matches!(&refused, Err(TokenError::Malformed(why)) if why.contains("key_prefix")), "{refused:?}");
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
    fn a_kid_is_the_secrets_fingerprint_and_survives_a_rotation() {
        let minted = secrets().mint(&Claims::new("docs", "d", false, NOW, 60, None)).unwrap();
        let header: Header =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(minted.split('.').next().unwrap()).unwrap()).unwrap();
        assert_eq!(header.kid.as_deref(), Some(fingerprint(FIRST.as_bytes()).as_str()));
        assert_eq!(header.kid.as_deref().map(str::len), Some(11));
        // A new secret put first, and later the old one removed: the live token verifies throughout.
        let rotated = ClientSecrets::parse(Some(&format!("{SECOND} {FIRST}"))).unwrap();
        assert!(rotated.verify(&minted, NOW).is_ok(), "a secret prepended");
        let third = "client-secret-three-0123456789abcd";
        let removed = ClientSecrets::parse(Some(&format!("{third} {FIRST}"))).unwrap();
        assert!(removed.verify(&minted, NOW).is_ok(), "the secret before it removed");
    }

    #[test]
    fn a_holder_is_its_sub_or_the_token_itself() {
        let s = secrets();
        let mint = |sub: Option<&str>, ttl| {
            let mut claims = Claims::new("docs", "d", false, NOW, ttl, None);
            claims.sub = sub.map(str::to_string);
            s.verify(&s.mint(&claims).unwrap(), NOW).unwrap().holder().to_string()
        };
        assert_eq!(mint(Some("alice"), 60), mint(Some("alice"), 120), "one sub, one holder");
        assert_ne!(mint(Some("alice"), 60), mint(Some("bob"), 60));
        assert_ne!(mint(None, 60), mint(None, 120), "no sub: each token its own");
        assert!(mint(None, 60).starts_with("client:") && !mint(Some("alice"), 60).contains("alice"));
    }

    #[test]
    fn the_mint_route_checks_what_it_is_asked() {
        let ask = |json: &str| serde_json::from_str::<MintRequest>(json).unwrap().claims("docs", NOW);
        let one = ask(r#"{"key": "doc-1", "events_per_minute": 30}"#).unwrap();
        assert_eq!(
            (one.key.as_deref(), one.exp, one.events_per_minute),
            (Some("doc-1"), NOW + DEFAULT_TTL_S, Some(30))
        );
        let granted = ask(r#"{"key": "doc-1", "ops": ["cancel", "flush", "cancel"], "sub": "u7"}"#).unwrap();
        assert_eq!(granted.ops, Some(vec![ClientOp::Flush, ClientOp::Cancel]));
        assert!(granted.allows(ClientOp::Events) && granted.allows(ClientOp::Cancel));
        assert_eq!(granted.sub.as_deref(), Some("u7"));
        let events_only = ask(r#"{"key": "doc-1"}"#).unwrap();
        assert!(!events_only.allows(ClientOp::Flush) && !events_only.allows(ClientOp::Cancel));
        let prefix = ask(r#"{"key_prefix": "user-7/", "ttl_s": 86400}"#).unwrap();
        assert_eq!((prefix.key_prefix.as_deref(), prefix.exp), (Some("user-7/"), NOW + MAX_LIFETIME_S));
        for bad in [
            r#"{}"#,
            r#"{"key": "a", "key_prefix": "b"}"#,
            r#"{"key": "a", "ttl_s": 0}"#,
            r#"{"key": "a", "ttl_s": 86401}"#,
            r#"{"key": "a", "events_per_minute": 0}"#,
            r#"{"key": "a", "sub": ""}"#,
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
        assert_eq!(parse(r#"{"key": "a", "ops": ["delete"]}"#), Err("bad_request"), "an operation there is not");
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
