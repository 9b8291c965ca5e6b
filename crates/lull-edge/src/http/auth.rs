//! Bearer tokens: who a request comes from, and whether it may ask for an
//! operation on a topic.
//!
//! Guarantees:
//! - **Least privilege**: an admin token may do everything; a global ingest
//!   token may post events to every topic; a topic's own ingest token
//!   (`ingest_token_env`) may post events to that topic only. Anything more
//!   is `403 forbidden`; no known token is `401 unauthorized`.
//! - **Rotation**: each variable may hold several tokens (whitespace-separated);
//!   every one is accepted.
//! - **Checked at startup**: a token shorter than [`MIN_TOKEN_CHARS`], or one
//!   that is both an admin and an ingest token, refuses the configuration
//!   (the reason names the variables, never the token).
//! - **Client tokens per topic**: a topic accepts them only if it opts in
//!   (`client_tokens`, signed with `LULL_CLIENT_TOKEN_SECRET`) or has its own
//!   secret (`client_token_secret_env`); a token of one topic's secret is
//!   nothing to another. A client token posts events; it flushes or cancels
//!   only when its `ops` claim names that operation.
//! - Tokens are compared in time that depends on neither side.

use std::collections::BTreeMap;

use crate::error::ApiError;
use crate::http::client_token::{Claims, ClientOp, ClientSecrets};

/// The shortest token accepted (characters).
pub const MIN_TOKEN_CHARS: usize = 16;

/// The least credential an operation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// An ingest token of the topic (or a global one), a client token covering
    /// the key, or an admin token: posting events.
    Ingest,
    /// A client token covering the key whose `ops` names `flush`, or an admin
    /// token: firing the key's open window now.
    Flush,
    /// A client token covering the key whose `ops` names `cancel`, or an admin
    /// token: dropping the key's open and queued windows.
    Cancel,
    /// An admin token: everything else.
    Admin,
}

/// Who a request's bearer token says it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// A global ingest token: may post events to every topic.
    Ingest,
    /// A topic's own ingest token: may post events to that topic only.
    TopicIngest(String),
    /// A client token (a JWT): may post events to the keys it covers, and flush
    /// or cancel them if its `ops` says so.
    Client(Box<Claims>),
    /// An admin token: may do everything.
    Admin,
}

impl Caller {
    /// Whether this caller may do what needs `need` on `target` (least privilege: see the module).
    pub(crate) fn may(&self, need: Access, target: Target<'_>) -> bool {
        let topic = target.topic;
        match (self, need) {
            (Caller::Admin, _) => true,
            (_, Access::Admin) => false,
            (Caller::Client(claims), Access::Ingest | Access::Flush | Access::Cancel) => {
                let op = match need {
                    Access::Flush => ClientOp::Flush,
                    Access::Cancel => ClientOp::Cancel,
                    _ => ClientOp::Events,
                };
                claims.allows(op) && topic.zip(target.key).is_some_and(|(topic, key)| claims.covers(topic, key))
            }
            (_, Access::Flush | Access::Cancel) => false,
            (Caller::TopicIngest(own), Access::Ingest) => topic == Some(own.as_str()),
            (_, Access::Ingest) => true,
        }
    }

    /// A client token's `events_per_minute` for each key, if it sets one.
    pub(crate) fn events_per_minute(&self) -> Option<u32> {
        match self {
            Caller::Client(claims) => claims.events_per_minute,
            _ => None,
        }
    }

    /// Whose namespace of producer idempotency keys (and of `events_per_minute`)
    /// this caller's events are in: `admin`, `ingest` (every global ingest
    /// token: rotation keeps it), `topic` (the topic's own ingest tokens), or a
    /// client token's holder ([`Claims::holder`]).
    pub(crate) fn holder(&self) -> &str {
        match self {
            Caller::Admin => "admin",
            Caller::Ingest => "ingest",
            Caller::TopicIngest(_) => "topic",
            Caller::Client(claims) => claims.holder(),
        }
    }

    /// A client token with a `key_prefix` (it may create keys): its holder, to
    /// count against the per-holder budget across keys.
    pub(crate) fn prefix_holder(&self) -> Option<&str> {
        match self {
            Caller::Client(claims) if claims.key_prefix.is_some() => Some(claims.holder()),
            _ => None,
        }
    }
}

/// A configured token as it is compared: its SHA-256 digest, taken once when
/// the configuration is read (a request's token is digested once, not once
/// per configured token; see [`TokenDigest::matches`]).
#[derive(Clone, PartialEq, Eq)]
struct TokenDigest([u8; 32]);

impl TokenDigest {
    /// The digest of `token`.
    fn of(token: &str) -> TokenDigest {
        use sha2::{Digest, Sha256};
        TokenDigest(Sha256::digest(token.as_bytes()).into())
    }

    /// Whether this is the digest of the token `given` was taken of, compared
    /// in time that depends on neither (digests are compared, so not even the
    /// token's length leaks; an empty token is refused before, by [`bearer`]).
    fn matches(&self, given: &TokenDigest) -> bool {
        self.0.iter().zip(given.0.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// Not the digest: a configured token is never printed, not even hashed.
impl std::fmt::Debug for TokenDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenDigest(..)")
    }
}

/// The configured tokens, each variable's tokens in the order given.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tokens {
    admin: Vec<TokenDigest>,
    ingest: Vec<TokenDigest>,
    /// Topic name → its own ingest tokens.
    topics: BTreeMap<String, Vec<TokenDigest>>,
    /// Topic name → the secrets its client tokens are signed with (a topic
    /// that is not here refuses client tokens).
    client: BTreeMap<String, ClientSecrets>,
}

/// What a request is about, for [`Tokens::authorize`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Target<'a> {
    /// Its topic, if it has one.
    pub topic: Option<&'a str>,
    /// Its key, if it has one.
    pub key: Option<&'a str>,
    /// Now (unix seconds), for client tokens' `exp` and `nbf`.
    pub now_s: u64,
}

/// The tokens a variable holds: whitespace-separated.
fn split(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

impl Tokens {
    /// The tokens of `LULL_ADMIN_TOKEN` (`admin`), `LULL_INGEST_TOKEN`
    /// (`ingest`) and each topic's `ingest_token_env` (topic, variable name,
    /// its text), checked: `Err` says what is wrong (a `500 config`).
    pub(crate) fn new(
        admin: &str,
        ingest: &str,
        topics: &[(String, String, String)],
        client: BTreeMap<String, ClientSecrets>,
    ) -> Result<Tokens, ApiError> {
        let fail = |why: String| Err(ApiError::Config(why));
        // Each variable's tokens, split once: admin, global ingest, then each topic's in order.
        let mut named: Vec<(&str, Vec<String>)> =
            vec![("LULL_ADMIN_TOKEN", split(admin)), ("LULL_INGEST_TOKEN", split(ingest))];
        named.extend(topics.iter().map(|(_, var, text)| (var.as_str(), split(text))));
        for (var, text) in [("LULL_ADMIN_TOKEN", admin), ("LULL_INGEST_TOKEN", ingest)]
            .into_iter()
            .chain(topics.iter().map(|(_, var, text)| (var.as_str(), text.as_str())))
        {
            check_variable(var, text)?;
        }
        let (admin, ingest) = (&named[0].1, &named[1].1);
        for (var, tokens) in &named[1..] {
            if tokens.iter().any(|t| admin.iter().any(|a| a == t)) {
                return fail(format!(
                    "a token is both an admin token (LULL_ADMIN_TOKEN) and an ingest token ({var}): \
                     every producer holding it would be an admin"
                ));
            }
        }
        for (var, tokens) in &named[2..] {
            if tokens.iter().any(|t| ingest.iter().any(|i| i == t)) {
                return fail(format!(
                    "a token is both a global ingest token (LULL_INGEST_TOKEN) and a topic's own ({var}): \
                     it would post to every topic"
                ));
            }
        }
        let digests = |tokens: &[String]| tokens.iter().map(|t| TokenDigest::of(t)).collect::<Vec<_>>();
        let mut by_topic: BTreeMap<String, Vec<TokenDigest>> = BTreeMap::new();
        for ((topic, _, _), (_, tokens)) in topics.iter().zip(&named[2..]) {
            by_topic.entry(topic.clone()).or_default().extend(digests(tokens));
        }
        Ok(Tokens { admin: digests(admin), ingest: digests(ingest), topics: by_topic, client })
    }

    /// The secrets `topic`'s client tokens are signed with (to mint one): `409
    /// client_tokens_off` if the topic accepts none.
    pub(crate) fn client_secrets(&self, topic: &str) -> Result<&ClientSecrets, ApiError> {
        self.client.get(topic).ok_or_else(|| ApiError::ClientTokensOff(topic.to_string()))
    }

    /// Check an `Authorization` header (`Bearer <token>`, the scheme in any
    /// case) for an operation needing `need` on `target`: `401` without a
    /// valid token (a client token's refusal says why), `403` when it may not.
    #[cfg(test)]
    pub(crate) fn authorize(&self, header: Option<&str>, need: Access, target: Target<'_>) -> Result<Caller, ApiError> {
        let caller = self.identify(header, target)?;
        if caller.may(need, target) { Ok(caller) } else { Err(ApiError::Forbidden) }
    }

    /// Who an `Authorization` header says the caller is, asking about
    /// `target` (a token that is several topics' own counts as the one asked
    /// about; a client token is checked at `target.now_s`): `401` without a
    /// valid token, whatever it may do.
    pub(crate) fn identify(&self, header: Option<&str>, target: Target<'_>) -> Result<Caller, ApiError> {
        let token = bearer(header).ok_or(ApiError::Unauthorized)?;
        let given = TokenDigest::of(token);
        if any(&self.admin, &given) {
            return Ok(Caller::Admin);
        }
        if any(&self.ingest, &given) {
            Ok(Caller::Ingest)
        } else if let Some(own) = self.topics.iter().find(|(_, tokens)| any(tokens, &given)).map(|(t, _)| t) {
            // A token may be several topics' own: the one asked about counts.
            let here = target.topic.filter(|t| self.topics.get(*t).is_some_and(|tokens| any(tokens, &given)));
            Ok(Caller::TopicIngest(here.unwrap_or(own).to_string()))
        } else if let Some(secrets) = target.topic.and_then(|t| self.client.get(t))
            && token.split('.').count() == 3
        {
            // Verified with the secrets of the topic asked about, whatever the token claims.
            let claims = secrets.verify(token, target.now_s).map_err(|e| ApiError::BadClientToken(e.to_string()))?;
            Ok(Caller::Client(Box::new(claims)))
        } else {
            Err(ApiError::Unauthorized)
        }
    }
}

/// Whether the variable `var`'s text holds tokens (whitespace-separated),
/// each at least [`MIN_TOKEN_CHARS`] long: `Err` (a `500 config`) names the
/// variable and what is wrong, never the token.
pub(crate) fn check_variable(var: &str, text: &str) -> Result<(), ApiError> {
    let tokens = split(text);
    if tokens.is_empty() {
        return Err(ApiError::Config(format!("{var} holds no token")));
    }
    match tokens.iter().find(|t| t.chars().count() < MIN_TOKEN_CHARS) {
        Some(short) => Err(ApiError::Config(format!(
            "{var} holds a token of {} characters; tokens are at least {MIN_TOKEN_CHARS}",
            short.chars().count()
        ))),
        None => Ok(()),
    }
}

/// Whether `header` carries one of the tokens in `text` (whitespace-separated),
/// checked without parsing the rest of the configuration (which may be broken).
pub(crate) fn carries_one_of(header: Option<&str>, text: &str) -> bool {
    bearer(header).is_some_and(|token| {
        let tokens: Vec<TokenDigest> = split(text).iter().map(|t| TokenDigest::of(t)).collect();
        any(&tokens, &TokenDigest::of(token))
    })
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case).
pub(crate) fn bearer(header: Option<&str>) -> Option<&str> {
    let (scheme, token) = header?.trim().split_once(char::is_whitespace)?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether `given` is the digest of one of `tokens`; every one is compared ([`TokenDigest::matches`]).
fn any(tokens: &[TokenDigest], given: &TokenDigest) -> bool {
    tokens.iter().fold(false, |found, t| found | t.matches(given))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &str = "admin-token-0000";
    const ADMIN_2: &str = "admin-token-2222";
    const INGEST: &str = "ingest-token-000";
    const ORDERS: &str = "orders-token-000";

    fn tokens() -> Tokens {
        let orders = ("orders".to_string(), "ORDERS_TOKEN".to_string(), format!("  {ORDERS}\n"));
        Tokens::new(&format!("{ADMIN} {ADMIN_2}"), INGEST, &[orders], BTreeMap::new()).unwrap()
    }

    fn auth(token: &str) -> String {
        format!("Bearer {token}")
    }

    fn on(topic: Option<&str>) -> Target<'_> {
        Target { topic, key: Some("k"), now_s: 0 }
    }

    #[test]
    fn tokens_grant_ingest_or_admin() {
        let tokens = tokens();
        let ask = |token: &str, need, topic| tokens.authorize(Some(&auth(token)), need, on(topic));
        assert_eq!(ask(INGEST, Access::Ingest, Some("t")), Ok(Caller::Ingest));
        assert_eq!(ask(ADMIN, Access::Admin, Some("t")), Ok(Caller::Admin));
        assert_eq!(ask(ADMIN_2, Access::Admin, None), Ok(Caller::Admin), "every admin token of a rotation");
        assert_eq!(ask(INGEST, Access::Admin, Some("t")), Err(ApiError::Forbidden));
        assert_eq!(ask("wrong-token-0000", Access::Ingest, Some("t")), Err(ApiError::Unauthorized));
        assert_eq!(tokens.authorize(Some(INGEST), Access::Ingest, on(Some("t"))), Err(ApiError::Unauthorized));
        assert_eq!(tokens.authorize(None, Access::Ingest, on(Some("t"))), Err(ApiError::Unauthorized));
        assert_eq!(tokens.authorize(Some("Bearer "), Access::Ingest, on(Some("t"))), Err(ApiError::Unauthorized));
    }

    #[test]
    fn a_topics_own_token_posts_to_that_topic_only() {
        let tokens = tokens();
        let ask = |need, topic| tokens.authorize(Some(&auth(ORDERS)), need, on(topic));
        assert_eq!(ask(Access::Ingest, Some("orders")), Ok(Caller::TopicIngest("orders".into())));
        assert_eq!(ask(Access::Ingest, Some("billing")), Err(ApiError::Forbidden));
        assert_eq!(ask(Access::Admin, Some("orders")), Err(ApiError::Forbidden));
        assert_eq!(ask(Access::Admin, None), Err(ApiError::Forbidden));
    }

    #[test]
    fn a_client_token_posts_within_its_scope_and_flushes_or_cancels_only_when_granted() {
        const DOCS_SECRET: &str = "client-secret-one-0123456789abcdef";
        const ORDERS_SECRET: &str = "orders-client-secret-0123456789abc";
        let orders = ("orders".to_string(), "ORDERS_TOKEN".to_string(), ORDERS.to_string());
        let client = BTreeMap::from([
            ("docs".to_string(), ClientSecrets::parse(Some(DOCS_SECRET)).unwrap()),
            ("orders".to_string(), ClientSecrets::parse_var("ORDERS_CLIENT", Some(ORDERS_SECRET)).unwrap()),
        ]);
        let tokens = Tokens::new(ADMIN, INGEST, &[orders], client).unwrap();
        let mint = |ops: Option<Vec<ClientOp>>| {
            let mut claims = Claims::new("docs", "doc-", true, 1_000, 600, None);
            claims.ops = ops;
            tokens.client_secrets("docs").unwrap().mint(&claims).unwrap()
        };
        let ask = |jwt: &str, need, topic, key| {
            tokens.authorize(Some(&auth(jwt)), need, Target { topic, key, now_s: 1_000 }).map(|c| c.holder().len())
        };
        let events_only = mint(None);
        assert!(ask(&events_only, Access::Ingest, Some("docs"), Some("doc-1")).is_ok());
        for need in [Access::Flush, Access::Cancel] {
            assert_eq!(ask(&events_only, need, Some("docs"), Some("doc-1")), Err(ApiError::Forbidden), "{need:?}");
        }
        let flush = mint(Some(vec![ClientOp::Flush]));
        assert!(ask(&flush, Access::Flush, Some("docs"), Some("doc-1")).is_ok());
        assert_eq!(ask(&flush, Access::Cancel, Some("docs"), Some("doc-1")), Err(ApiError::Forbidden));
        let both = mint(Some(vec![ClientOp::Flush, ClientOp::Cancel]));
        assert!(ask(&both, Access::Cancel, Some("docs"), Some("doc-1")).is_ok());
        assert_eq!(ask(&both, Access::Ingest, Some("docs"), Some("note-1")), Err(ApiError::Forbidden), "other key");
        assert_eq!(ask(&both, Access::Admin, Some("docs"), Some("doc-1")), Err(ApiError::Forbidden), "admin route");
        let other = ask(&both, Access::Ingest, Some("orders"), Some("doc-1"));
        let bad = ApiError::BadClientToken("the client token's signature does not verify".into());
        assert_eq!(other, Err(bad), "checked with the secret of the topic asked about: orders has its own");
        let expired = tokens.authorize(
            Some(&auth(&events_only)),
            Access::Ingest,
            Target { topic: Some("docs"), key: Some("doc-1"), now_s: 1_600 },
        );
        assert_eq!(expired, Err(ApiError::BadClientToken("the client token has expired".into())));
        let flush_by_ingest =
            tokens.authorize(Some(&auth(INGEST)), Access::Flush, Target { topic: Some("docs"), ..on(None) });
        assert_eq!(flush_by_ingest, Err(ApiError::Forbidden), "an ingest token never flushes");
        let off = ask(&events_only, Access::Ingest, Some("billing"), Some("doc-1"));
        assert_eq!(off, Err(ApiError::Unauthorized), "a topic that accepts no client tokens");
        assert_eq!(tokens.client_secrets("billing").map(drop), Err(ApiError::ClientTokensOff("billing".into())));
    }

    #[test]
    fn the_scheme_is_matched_in_any_case() {
        let tokens = tokens();
        for header in [format!("bearer {INGEST}"), format!("BEARER  {INGEST} "), format!("Bearer\t{INGEST}")] {
            assert_eq!(tokens.authorize(Some(&header), Access::Ingest, on(None)), Ok(Caller::Ingest), "{header:?}");
        }
        assert_eq!(
            tokens.authorize(Some(&format!("Basic {INGEST}")), Access::Ingest, on(None)),
            Err(ApiError::Unauthorized)
        );
    }

    #[test]
    fn short_shared_or_missing_tokens_refuse_the_configuration() {
        let refused = |admin: &str, ingest: &str, topics: &[(String, String, String)]| {
            let Err(ApiError::Config(why)) = Tokens::new(admin, ingest, topics, BTreeMap::new()) else {
                panic!("accepted")
            };
            assert!(!why.contains(ADMIN) && !why.contains(INGEST), "the reason never names a token: {why}");
            why
        };
        assert!(refused("short", INGEST, &[]).contains("LULL_ADMIN_TOKEN holds a token of 5 characters"));
        assert!(refused(ADMIN, &format!("{INGEST} tiny"), &[]).contains("LULL_INGEST_TOKEN holds a token of 4"));
        assert!(refused(ADMIN, "  ", &[]).contains("LULL_INGEST_TOKEN holds no token"));
        assert!(refused(ADMIN, &format!("{INGEST} {ADMIN}"), &[]).contains("both an admin token"));
        let shared = [("orders".to_string(), "ORDERS_TOKEN".to_string(), ADMIN.to_string())];
        assert!(refused(ADMIN, INGEST, &shared).contains("(ORDERS_TOKEN)"));
        let global = [("orders".to_string(), "ORDERS_TOKEN".to_string(), INGEST.to_string())];
        assert!(refused(ADMIN, INGEST, &global).contains("both a global ingest token"));
        let short = [("orders".to_string(), "ORDERS_TOKEN".to_string(), "x".to_string())];
        assert!(refused(ADMIN, INGEST, &short).contains("ORDERS_TOKEN holds a token of 1"));
    }
}
