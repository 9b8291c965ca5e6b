//! The worker's configuration as its variables and secrets give it,
//! runtime-free: [`Config::read`] is what the Worker reads at its first
//! request (`runtime/config.rs` hands it the environment), and
//! [`check_config`] is the same reading with every problem named, for
//! `cargo xtask check-config` before a deploy — one reading, so the check
//! and the worker cannot disagree.

use crate::delivery::signing::{Keyring, Secret};
use crate::error::ApiError;
use crate::http::auth::{Tokens, check_variable};
use crate::http::client_token::topic_secrets;
use crate::http::cors::Cors;
use crate::topic::Topics;

/// The variable holding the topics (JSON text, or a table in `wrangler.toml`).
pub(crate) const TOPICS_VAR: &str = "LULL_TOPICS";
/// The secrets every configuration needs: the admin and ingest tokens, the signing secret.
pub(crate) const REQUIRED_SECRETS: [&str; 3] = ["LULL_ADMIN_TOKEN", "LULL_INGEST_TOKEN", "LULL_SIGNING_SECRET"];
/// The secret client tokens are signed with (optional: without it they are refused).
pub(crate) const CLIENT_TOKEN_SECRET: &str = "LULL_CLIENT_TOKEN_SECRET";
/// The web origins that may call the API from a browser (optional).
pub(crate) const CORS_VAR: &str = "LULL_CORS_ORIGINS";
/// `"on"` serves the demo, in a build with it.
pub(crate) const DEMO_VAR: &str = "LULL_DEMO_SINK";

/// The key objects' Durable Object binding (class `KeyWindow`) in `wrangler.toml`.
pub const KEY_WINDOW_BINDING: &str = "KEY_WINDOW";
/// The topics' gate objects' Durable Object binding (class `TopicGate`) in `wrangler.toml`.
pub const TOPIC_GATE_BINDING: &str = "TOPIC_GATE";
/// The Analytics Engine dataset binding data points go to, if bound (`crate::metrics`).
pub const METRICS_BINDING: &str = "LULL_METRICS";
/// The dead-letter queue's producer binding: a dead letter the gate cannot
/// keep yet waits there (`wrangler.toml`; needed where a topic delivers by queue).
pub const DEAD_LETTER_BINDING: &str = "LULL_DEAD_LETTERS";
/// The variable naming the dead-letter queue, whose messages the consumer keeps as dead letters.
pub const DEAD_LETTER_QUEUE_VAR: &str = "LULL_DEAD_LETTER_QUEUE";

/// Everything the worker is configured with.
pub(crate) struct Config {
    /// `LULL_TOPICS`.
    pub topics: Topics,
    /// `LULL_ADMIN_TOKEN`, `LULL_INGEST_TOKEN` and each topic's `ingest_token_env`.
    pub tokens: Tokens,
    /// `LULL_SIGNING_SECRET` and each topic's `signing_secret_env`: sign deliveries.
    pub signing: Keyring,
    /// `LULL_DEMO_SINK = "on"`, in a build with the demo ([`crate::demo::BUILT`]):
    /// serve the demo's routes (`/sink`, a receiver for local use, and `/demo/…`).
    pub demo_sink: bool,
    /// `LULL_CORS_ORIGINS`: web origins that may call the API from a browser.
    pub cors: Cors,
}

/// A configuration read: the problems found so far, and the secrets it needs.
struct Reading<'a> {
    var: &'a dyn Fn(&str) -> Option<String>,
    problems: Vec<ApiError>,
    secrets: Vec<String>,
}

impl Reading<'_> {
    /// The required secret or var `name` (noted among the secrets it needs if `secret`); a problem if unset.
    fn required(&mut self, name: &str, secret: bool) -> Option<String> {
        if secret && !self.secrets.iter().any(|s| s == name) {
            self.secrets.push(name.to_string());
        }
        match (self.var)(name) {
            Some(value) if !value.is_empty() => Some(value),
            _ => {
                self.problems.push(ApiError::Config(format!(
                    "{name} is not set (`wrangler secret put {name}`, or .dev.vars for local development)"
                )));
                None
            }
        }
    }

    /// `result`'s value, or its error noted as a problem.
    fn noted<T>(&mut self, result: Result<T, ApiError>) -> Option<T> {
        result.map_err(|e| self.problems.push(e)).ok()
    }

    /// The signing secrets of the secret `name` (one or several `whsec_…`).
    fn signing_secrets(&mut self, name: &str) -> Option<Vec<Secret>> {
        let text = self.required(name, true)?;
        // The reason names the variable, never the secret.
        self.noted(Secret::parse_all(&text).map_err(|e| ApiError::Config(format!("{name}: {e}"))))
    }

    /// Read every part, each problem noted; the configuration if there is none.
    fn read(&mut self) -> Option<Config> {
        let topics = match (self.var)(TOPICS_VAR) {
            Some(json) => self.noted(Topics::parse(&json).map_err(|e| ApiError::Config(e.to_string()))),
            None => self.noted(Err(ApiError::Config(format!("{TOPICS_VAR} is not set ([vars] in wrangler.toml)")))),
        };
        let admin = self.required("LULL_ADMIN_TOKEN", true);
        let ingest = self.required("LULL_INGEST_TOKEN", true);
        let mut own = Vec::new();
        for topic in topics.iter().flat_map(Topics::iter) {
            if let Some(var) = &topic.ingest_token_env {
                own.push((topic.name.clone(), var.clone(), self.required(var, true)));
            }
        }
        // Each variable's tokens alone first, so every short one is named; then the tokens together.
        let mut tokens_valid = true;
        let each = [("LULL_ADMIN_TOKEN", &admin), ("LULL_INGEST_TOKEN", &ingest)];
        for (var, text) in each.into_iter().chain(own.iter().map(|(_, var, text)| (var.as_str(), text))) {
            if let Some(text) = text {
                tokens_valid &= self.noted(check_variable(var, text)).is_some();
            }
        }
        // Client tokens: LULL_CLIENT_TOKEN_SECRET where it is set or a topic signs with it, and each topic's own.
        let client_text = (self.var)(CLIENT_TOKEN_SECRET);
        let all_topics = || topics.iter().flat_map(Topics::iter);
        if client_text.is_some() || all_topics().any(|t| t.client_tokens && t.client_token_secret_env.is_none()) {
            self.secrets.push(CLIENT_TOKEN_SECRET.to_string());
        }
        let own_client: Vec<String> = all_topics().filter_map(|t| t.client_token_secret_env.clone()).collect();
        for var in own_client {
            if !self.secrets.contains(&var) {
                self.secrets.push(var);
            }
        }
        let var = self.var;
        let client = match &topics {
            Some(topics) => self.noted(topic_secrets(topics, client_text.as_deref(), var)),
            None => None,
        };
        let cors = self.noted(Cors::parse((self.var)(CORS_VAR).as_deref()));
        let global = self.signing_secrets("LULL_SIGNING_SECRET");
        let mut keyring = global.map(Keyring::new);
        for topic in topics.iter().flat_map(Topics::iter) {
            if let Some(var) = &topic.signing_secret_env {
                match (self.signing_secrets(var), keyring.as_mut()) {
                    (Some(secrets), Some(keyring)) => keyring.set_topic(&topic.name, secrets),
                    _ => keyring = None,
                }
            }
        }
        let own: Option<Vec<(String, String, String)>> =
            own.into_iter().map(|(topic, var, text)| Some((topic, var, text?))).collect();
        let tokens = match (admin, ingest, own, client) {
            (Some(admin), Some(ingest), Some(own), Some(client)) if tokens_valid => {
                self.noted(Tokens::new(&admin, &ingest, &own, client))
            }
            _ => None,
        };
        let demo_sink = crate::demo::BUILT && (self.var)(DEMO_VAR).is_some_and(|v| v == "on");
        match (topics, tokens, keyring, cors) {
            (Some(topics), Some(tokens), Some(signing), Some(cors)) if self.problems.is_empty() => {
                Some(Config { topics, tokens, signing, demo_sink, cors })
            }
            _ => None,
        }
    }
}

impl Config {
    /// The configuration `var` gives (each variable or secret by name; `None`
    /// if unset; `LULL_TOPICS` as JSON text), or its first problem: a `500
    /// config` naming what is wrong, never a secret.
    pub(crate) fn read(var: &dyn Fn(&str) -> Option<String>) -> Result<Config, ApiError> {
        let mut reading = Reading { var, problems: Vec::new(), secrets: Vec::new() };
        match reading.read() {
            Some(config) => Ok(config),
            None => Err(reading.problems.into_iter().next().unwrap_or_else(|| ApiError::Config("invalid".into()))),
        }
    }
}

/// A configuration checked as the worker reads it ([`check_config`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigReport {
    /// Every problem the worker would refuse to start with (each a `500
    /// config` it would answer), one sentence each; none: it starts.
    pub problems: Vec<String>,
    /// The secrets it reads, set or not (`wrangler secret put` each in
    /// production): the admin and ingest tokens, the signing secret, each
    /// topic's `ingest_token_env` and `signing_secret_env`, and
    /// `LULL_CLIENT_TOKEN_SECRET` where it is set.
    pub secrets: Vec<String>,
    /// The topics, by name (none if `LULL_TOPICS` is not valid).
    pub topics: Vec<String>,
    /// The queue producer bindings the topics deliver through (a topic's
    /// `queue`), each once; empty: no topic delivers by queue.
    pub queues: Vec<String>,
    /// The rate limiting bindings it needs: `LULL_CLIENT_RATE` where a topic
    /// accepts client tokens (a `key_prefix` token's events spend it).
    pub rate_limits: Vec<String>,
}

/// Every problem of the configuration `var` gives (each variable or secret
/// by name; `None` if unset; `LULL_TOPICS` as JSON text), read as the worker
/// reads it, and what it needs: the check `cargo xtask check-config` runs
/// before a deploy. A configuration with no problem is one the worker starts with.
pub fn check_config(var: &dyn Fn(&str) -> Option<String>) -> ConfigReport {
    let mut reading = Reading { var, problems: Vec::new(), secrets: Vec::new() };
    reading.read();
    let topics = var(TOPICS_VAR).and_then(|json| Topics::parse(&json).ok()).unwrap_or_default();
    let mut queues: Vec<String> = Vec::new();
    for binding in topics.iter().filter_map(|t| t.queue.as_ref().map(|q| q.binding.clone())) {
        if !queues.contains(&binding) {
            queues.push(binding);
        }
    }
    let mut secrets = reading.secrets;
    for name in REQUIRED_SECRETS {
        if !secrets.iter().any(|s| s == name) {
            secrets.push(name.to_string());
        }
    }
    ConfigReport {
        problems: reading.problems.iter().map(ApiError::message).collect(),
        secrets,
        topics: topics.iter().map(|t| t.name.clone()).collect(),
        queues,
        rate_limits: topics
            .iter()
            .any(|t| t.client_tokens)
            .then(|| crate::http::client_token::CLIENT_RATE_BINDING.to_string())
            .into_iter()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNING: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const TOPICS: &str = r#"{"orders": {"target": "https://a/o", "wait_ms": 1, "ingest_token_env": "ORDERS_TOKEN"},
        "q": {"target": "https://a/q", "wait_ms": 1, "delivery": "queue"},
        "q2": {"target": "https://a/q", "wait_ms": 1, "delivery": "queue", "queue": "OTHER_QUEUE",
               "signing_secret_env": "Q2_SECRET"}}"#;

    /// Variables by name, `LULL_TOPICS` [`TOPICS`] and every secret set unless `changes` says otherwise.
    fn vars(changes: &[(&'static str, Option<&'static str>)]) -> impl Fn(&str) -> Option<String> {
        let mut all = vec![
            ("LULL_TOPICS", Some(TOPICS)),
            ("LULL_ADMIN_TOKEN", Some("admin-token-0000-0000")),
            ("LULL_INGEST_TOKEN", Some("ingest-token-0000-000")),
            ("ORDERS_TOKEN", Some("orders-token-0000-000")),
            ("LULL_SIGNING_SECRET", Some(SIGNING)),
            ("Q2_SECRET", Some(SIGNING)),
        ];
        for (name, value) in changes {
            all.retain(|(n, _)| n != name);
            all.push((name, *value));
        }
        move |name| all.iter().find(|(n, _)| *n == name).and_then(|(_, v)| v.map(str::to_string))
    }

    #[test]
    fn a_whole_configuration_has_no_problem_and_names_its_secrets_and_queues() {
        let report = check_config(&vars(&[]));
        assert_eq!(report.problems, Vec::<String>::new());
        assert_eq!(
            report.secrets,
            ["LULL_ADMIN_TOKEN", "LULL_INGEST_TOKEN", "ORDERS_TOKEN", "LULL_SIGNING_SECRET", "Q2_SECRET"]
        );
        assert_eq!(
            (report.topics, report.queues),
            (vec!["orders".into(), "q".into(), "q2".into()], vec!["LULL_QUEUE".to_string(), "OTHER_QUEUE".to_string()])
        );
        assert!(Config::read(&vars(&[])).is_ok(), "the worker starts with it");
        let with_client =
            check_config(&vars(&[("LULL_CLIENT_TOKEN_SECRET", Some("client-secret-one-0123456789abcdef"))]));
        assert!(with_client.problems.is_empty() && with_client.secrets.contains(&CLIENT_TOKEN_SECRET.to_string()));
    }

    /// Every problem is named at once, one sentence each, naming variables and never a secret.
    #[test]
    fn every_problem_is_named_at_once() {
        let report = check_config(&vars(&[
            ("LULL_ADMIN_TOKEN", None),
            ("LULL_INGEST_TOKEN", Some("short")),
            ("ORDERS_TOKEN", Some("tiny")),
            ("Q2_SECRET", None),
            ("LULL_CLIENT_TOKEN_SECRET", Some("too-short")),
            ("LULL_CORS_ORIGINS", Some("not an origin")),
        ]));
        let problems = report.problems.join("\n");
        for expected in [
            "LULL_ADMIN_TOKEN is not set (`wrangler secret put LULL_ADMIN_TOKEN`",
            "LULL_INGEST_TOKEN holds a token of 5 characters; tokens are at least 16",
            "ORDERS_TOKEN holds a token of 4 characters",
            "Q2_SECRET is not set",
            "LULL_CLIENT_TOKEN_SECRET",
            "LULL_CORS_ORIGINS",
        ] {
            assert!(problems.contains(expected), "{expected:?} in:\n{problems}");
        }
        assert_eq!(report.problems.len(), 6, "{problems}");
        assert!(!problems.contains("short\"") && !problems.contains("tiny"), "no token is shown: {problems}");
        let first = Config::read(&vars(&[("LULL_ADMIN_TOKEN", None), ("ORDERS_TOKEN", Some("tiny"))])).err();
        assert_eq!(first.map(|e| e.message()), Some(
            "LULL_ADMIN_TOKEN is not set (`wrangler secret put LULL_ADMIN_TOKEN`, or .dev.vars for local development)"
                .to_string()
        ), "the worker answers the first");
    }

    #[test]
    fn topics_and_tokens_together_are_checked_as_the_worker_checks_them() {
        let bad_topics =
            check_config(&vars(&[("LULL_TOPICS", Some(r#"{"t": {"target": "http://a.example/x", "wait_ms": 1}}"#))]));
        assert_eq!(bad_topics.problems.len(), 1, "{:?}", bad_topics.problems);
        assert!(bad_topics.problems[0].starts_with(r#"LULL_TOPICS: topic "t": "#), "{:?}", bad_topics.problems);
        assert!(bad_topics.topics.is_empty());
        let none = check_config(&vars(&[("LULL_TOPICS", None)]));
        assert_eq!(none.problems, ["LULL_TOPICS is not set ([vars] in wrangler.toml)"]);
        let shared = check_config(&vars(&[("LULL_INGEST_TOKEN", Some("admin-token-0000-0000"))]));
        assert_eq!(shared.problems.len(), 1);
        assert!(shared.problems[0].contains("both an admin token"), "{:?}", shared.problems);
        let bad_secret = check_config(&vars(&[("LULL_SIGNING_SECRET", Some("whsec_short"))]));
        assert!(bad_secret.problems[0].starts_with("LULL_SIGNING_SECRET: "), "{:?}", bad_secret.problems);
        assert!(!bad_secret.problems[0].contains("whsec_short"), "the secret is not shown");
    }
}
