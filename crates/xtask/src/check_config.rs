//! `cargo xtask check-config [--env NAME] [--secrets-file FILE] [--config FILE]`:
//! every problem a deploy of `wrangler.toml` (its top level, or `[env.NAME]`)
//! would hit, named before it is deployed, one line each, and a non-zero exit
//! if there is any.
//!
//! The configuration is read as the worker reads it (`lull_edge::check_config`,
//! the very reading the Worker does at its first request): `LULL_TOPICS` and
//! the other vars from `wrangler.toml` (`LULL_TOPICS` from the environment
//! where `wrangler.toml` has none), the secrets from `--secrets-file` (the
//! `.dev.vars` format, `KEY=VALUE` lines: the file `wrangler secret bulk`
//! then uploads) or else the environment. Secrets already on Cloudflare cannot
//! be read here (`wrangler secret list` shows their names only): give their
//! values in the file, as the deploy will use them. Then what only
//! `wrangler.toml` holds: the objects' bindings, each queue topic's producer
//! binding, the dead-letter queue's binding, variable and consumer, and no
//! secret written in it as a plain var.

use std::path::Path;

use lull_edge::{
    ConfigReport, DEAD_LETTER_BINDING, DEAD_LETTER_QUEUE_VAR, KEY_WINDOW_BINDING, TOPIC_GATE_BINDING, check_config,
};
use toml::{Table, Value};

/// The worker's settings for one deploy, as wrangler resolves them for an
/// environment: an environment inherits none of the vars, objects or queues.
struct Deploy<'a> {
    vars: Option<&'a Table>,
    objects: Vec<(&'a str, &'a str)>,
    producers: Vec<(&'a str, &'a str)>,
    consumers: Vec<&'a str>,
    rate_limits: Vec<&'a str>,
}

/// `table`'s value at `path` (`a.b.c`), if any.
fn at<'a>(table: &'a Table, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let first = table.get(parts.next()?)?;
    parts.try_fold(first, |value, part| value.as_table()?.get(part))
}

/// The string fields `a` and `b` of each table in the array at `path`.
fn pairs<'a>(table: &'a Table, path: &str, a: &str, b: &str) -> Vec<(&'a str, &'a str)> {
    let items = at(table, path).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    items.iter().filter_map(|item| Some((item.get(a)?.as_str()?, item.get(b)?.as_str()?))).collect()
}

impl<'a> Deploy<'a> {
    /// The deploy `section` (the top level, or an `[env.NAME]` table) describes.
    fn of(section: &'a Table) -> Deploy<'a> {
        Deploy {
            vars: at(section, "vars").and_then(Value::as_table),
            objects: pairs(section, "durable_objects.bindings", "name", "class_name"),
            producers: pairs(section, "queues.producers", "binding", "queue"),
            consumers: pairs(section, "queues.consumers", "queue", "queue").into_iter().map(|(q, _)| q).collect(),
            rate_limits: pairs(section, "ratelimits", "name", "name").into_iter().map(|(name, _)| name).collect(),
        }
    }

    /// The var `name` as the worker reads it: text as it is, a table as JSON.
    fn var(&self, name: &str) -> Option<String> {
        match self.vars?.get(name)? {
            Value::String(text) => Some(text.clone()),
            other => serde_json::to_string(other).ok(),
        }
    }
}

/// What a check found: every problem (one sentence each), and the worker's
/// configuration as read (its topics, the secrets it reads).
pub struct Checked {
    /// Every problem a deploy would hit.
    pub problems: Vec<String>,
    /// The configuration as the worker reads it.
    pub report: ConfigReport,
}

/// Check `wrangler` (the text of `wrangler.toml`) for a deploy of `env` (the
/// top level if `None`), its secrets read through `secret` (by name).
pub fn check(wrangler: &str, env: Option<&str>, secret: &dyn Fn(&str) -> Option<String>) -> Checked {
    let mut problems = Vec::new();
    let root: Table = match wrangler.parse() {
        Ok(root) => root,
        Err(e) => {
            problems.push(format!("wrangler.toml is not TOML: {e}"));
            return Checked { problems, report: ConfigReport::default() };
        }
    };
    let section = match env {
        None => &root,
        Some(name) => match at(&root, &format!("env.{name}")).and_then(Value::as_table) {
            Some(section) => section,
            None => {
                problems.push(format!("wrangler.toml has no [env.{name}]"));
                return Checked { problems, report: ConfigReport::default() };
            }
        },
    };
    let deploy = Deploy::of(section);
    let var = |name: &str| deploy.var(name).or_else(|| secret(name));
    let report = check_config(&var);
    problems.extend(report.problems.iter().cloned());
    let place = env.map_or("wrangler.toml's top level".to_string(), |name| format!("wrangler.toml's [env.{name}]"));
    for name in &report.secrets {
        if deploy.var(name).is_some() {
            problems.push(format!(
                "{name} is a plain var in {place}: a secret goes to `wrangler secret put {name}`, never into the file"
            ));
        }
    }
    for (binding, class) in [(KEY_WINDOW_BINDING, "KeyWindow"), (TOPIC_GATE_BINDING, "TopicGate")] {
        if !deploy.objects.contains(&(binding, class)) {
            problems.push(format!(
                "{place} binds no Durable Object {binding} of class {class} ([[durable_objects.bindings]])"
            ));
        }
    }
    for binding in &report.rate_limits {
        if !deploy.rate_limits.contains(&binding.as_str()) {
            problems.push(format!(
                "a topic accepts client tokens, but {place} declares no rate limiting binding {binding} \
                 ([[ratelimits]]): a key_prefix client token's events would answer 500 config"
            ));
        }
    }
    let producer = |binding: &str| deploy.producers.iter().find(|(b, _)| *b == binding).map(|(_, queue)| *queue);
    for binding in &report.queues {
        match producer(binding) {
            None => problems.push(format!(
                "a topic delivers by queue through {binding}, but {place} declares no queue producer \
                 binding {binding} ([[queues.producers]])"
            )),
            Some(queue) if !deploy.consumers.contains(&queue) => problems.push(format!(
                "queue {queue} ({binding}) has no consumer in {place}: its windows would never be forwarded \
                 ([[queues.consumers]])"
            )),
            Some(_) => {}
        }
    }
    if !report.queues.is_empty() {
        match (producer(DEAD_LETTER_BINDING), var(DEAD_LETTER_QUEUE_VAR)) {
            (None, _) => problems.push(format!(
                "a topic delivers by queue, but {place} declares no dead-letter queue producer binding \
                 {DEAD_LETTER_BINDING} ([[queues.producers]])"
            )),
            (Some(queue), named) => {
                if named.as_deref() != Some(queue) {
                    problems.push(format!(
                        "{DEAD_LETTER_QUEUE_VAR} must name the dead-letter queue {queue} ({DEAD_LETTER_BINDING}'s), \
                         not {named:?}"
                    ));
                }
                if !deploy.consumers.contains(&queue) {
                    problems.push(format!(
                        "the dead-letter queue {queue} has no consumer in {place}: dead letters would be lost"
                    ));
                }
            }
        }
    }
    Checked { problems, report }
}

/// The `KEY=VALUE` lines of a `.dev.vars`-style file (`#` comments, blank
/// lines, an optional `export `, values optionally in matching quotes).
pub fn parse_secrets(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut secrets = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let (name, value) = line.split_once('=').ok_or(format!("line {}: not KEY=VALUE", n + 1))?;
        let value = value.trim();
        let unquoted = [('"', '"'), ('\'', '\'')]
            .iter()
            .find_map(|(open, close)| value.strip_prefix(*open)?.strip_suffix(*close))
            .unwrap_or(value);
        secrets.push((name.trim().to_string(), unquoted.to_string()));
    }
    Ok(secrets)
}

/// `check-config` with `args` (after the command), from `root`: prints each
/// problem, or what the configuration needs; `Err` if there is a problem.
pub fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let (mut env, mut secrets_file, mut config) = (None, None, root.join("wrangler.toml"));
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().cloned().ok_or(format!("{arg} takes a value"));
        match arg.as_str() {
            "--env" => env = Some(value()?),
            "--secrets-file" => secrets_file = Some(value()?),
            "--config" => config = value()?.into(),
            _ => return Err(format!("check-config: unexpected argument {arg:?}")),
        }
    }
    let wrangler = std::fs::read_to_string(&config).map_err(|e| format!("{}: {e}", config.display()))?;
    let file = match &secrets_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            parse_secrets(&text).map_err(|e| format!("{path}: {e}"))?
        }
        None => Vec::new(),
    };
    let secret = |name: &str| {
        let given = file.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        given.or_else(|| std::env::var(name).ok())
    };
    let checked = check(&wrangler, env.as_deref(), &secret);
    let what = env.as_deref().map_or("the top level (wrangler deploy)".to_string(), |e| format!("[env.{e}]"));
    if !checked.problems.is_empty() {
        for problem in &checked.problems {
            println!("check-config: {problem}");
        }
        return Err(format!("{} problem(s) a deploy of {what} would hit", checked.problems.len()));
    }
    let from =
        secrets_file.map_or("the environment".to_string(), |f| format!("{f} (`wrangler secret bulk {f}` sets them)"));
    println!(
        "check-config: {what} is ready: topics {}; the secrets it reads, checked from {from}: {}",
        checked.report.topics.join(", "),
        checked.report.secrets.join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNING: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ADMIN: &str = "admin-token-0000-0000";
    const INGEST: &str = "ingest-token-0000-000";

    fn root() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf()
    }

    /// The secrets of `pairs`, by name.
    fn secrets(pairs: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        let pairs = pairs.to_vec();
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    const ALL: [(&str, &str); 3] =
        [("LULL_ADMIN_TOKEN", ADMIN), ("LULL_INGEST_TOKEN", INGEST), ("LULL_SIGNING_SECRET", SIGNING)];

    /// A wrangler.toml with `topics` (LULL_TOPICS' JSON) and `extra` lines, the objects bound.
    fn wrangler(topics: &str, extra: &str) -> String {
        format!(
            r#"name = "w"
[[durable_objects.bindings]]
name = "KEY_WINDOW"
class_name = "KeyWindow"
[[durable_objects.bindings]]
name = "TOPIC_GATE"
class_name = "TopicGate"
{extra}
[vars]
LULL_TOPICS = '{topics}'
"#
        )
    }

    const WEBHOOK: &str = r#"{"t": {"target": "https://a.example/t", "wait_ms": 1}}"#;
    const QUEUE: &str = r#"{"q": {"target": "https://a.example/q", "wait_ms": 1, "delivery": "queue"}}"#;
    const QUEUES: &str = r#"
[[queues.producers]]
binding = "LULL_QUEUE"
queue = "deliveries"
[[queues.producers]]
binding = "LULL_DEAD_LETTERS"
queue = "dead"
[[queues.consumers]]
queue = "deliveries"
[[queues.consumers]]
queue = "dead"
"#;

    fn problems(wrangler: &str, env: Option<&str>, given: &[(&'static str, &'static str)]) -> Vec<String> {
        check(wrangler, env, &secrets(given)).problems
    }

    #[test]
    fn the_repositorys_wrangler_toml_passes_at_its_top_level_and_in_env_dev() {
        let text = std::fs::read_to_string(root().join("wrangler.toml")).unwrap();
        let top = check(&text, None, &secrets(&ALL));
        assert_eq!(top.problems, Vec::<String>::new());
        assert_eq!(top.report.topics, ["orders"]);
        assert_eq!(top.report.secrets, ["LULL_ADMIN_TOKEN", "LULL_INGEST_TOKEN", "LULL_SIGNING_SECRET"]);
        let dev_vars = std::fs::read_to_string(root().join(".dev.vars.example")).unwrap();
        let dev_vars = parse_secrets(&dev_vars).unwrap();
        let dev = check(&text, Some("dev"), &|name| dev_vars.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()));
        assert_eq!(dev.problems, Vec::<String>::new());
        assert_eq!(dev.report.topics, ["demo"]);
    }

    #[test]
    fn a_missing_secret_is_named_with_how_to_set_it() {
        let found = problems(&wrangler(WEBHOOK, ""), None, &ALL[..2]);
        assert_eq!(
            found,
            [
                "LULL_SIGNING_SECRET is not set (`wrangler secret put LULL_SIGNING_SECRET`, or .dev.vars for local development)"
            ]
        );
        let own = r#"{"t": {"target": "https://a.example/t", "wait_ms": 1, "ingest_token_env": "T_TOKEN"}}"#;
        assert_eq!(problems(&wrangler(own, ""), None, &ALL).len(), 1, "a topic's own token");
        assert!(problems(&wrangler(own, ""), None, &ALL)[0].starts_with("T_TOKEN is not set"));
    }

    #[test]
    fn a_short_token_is_named_never_shown() {
        let found = problems(&wrangler(WEBHOOK, ""), None, &[("LULL_INGEST_TOKEN", "short"), ALL[0], ALL[2]]);
        assert_eq!(found, ["LULL_INGEST_TOKEN holds a token of 5 characters; tokens are at least 16"]);
    }

    #[test]
    fn a_topic_with_client_tokens_needs_their_secret_and_the_rate_limiting_binding() {
        let client = r#"{"t": {"target": "https://a.example/t", "wait_ms": 1, "client_tokens": true}}"#;
        let found = problems(&wrangler(client, ""), None, &ALL);
        assert_eq!(
            found,
            [
                "topic \"t\" accepts client tokens, but LULL_CLIENT_TOKEN_SECRET holds no secret to check them with",
                "a topic accepts client tokens, but wrangler.toml's top level declares no rate limiting binding \
                 LULL_CLIENT_RATE ([[ratelimits]]): a key_prefix client token's events would answer 500 config",
            ]
        );
        let rate =
            "[[ratelimits]]\nname = \"LULL_CLIENT_RATE\"\nnamespace_id = \"1\"\nsimple = { limit = 60, period = 60 }";
        let secret = ("LULL_CLIENT_TOKEN_SECRET", "client-token-secret-0123456789abcdef");
        let given = [ALL[0], ALL[1], ALL[2], secret];
        let checked = check(&wrangler(client, rate), None, &secrets(&given));
        assert_eq!(checked.problems, Vec::<String>::new());
        assert!(checked.report.secrets.iter().any(|s| s == "LULL_CLIENT_TOKEN_SECRET"), "{:?}", checked.report.secrets);
        let own = r#"{"t": {"target": "https://a.example/t", "wait_ms": 1, "client_token_secret_env": "T_CLIENT"}}"#;
        let found = problems(&wrangler(own, rate), None, &ALL);
        assert_eq!(found, ["topic \"t\" accepts client tokens, but T_CLIENT holds no secret to check them with"]);
    }

    #[test]
    fn a_queue_topic_needs_its_producer_binding_and_a_consumer() {
        assert_eq!(problems(&wrangler(QUEUE, QUEUES), None, &ALL).len(), 1, "only the dead-letter var is missing");
        let with_var = format!("{}LULL_DEAD_LETTER_QUEUE = \"dead\"\n", wrangler(QUEUE, QUEUES));
        assert_eq!(problems(&with_var, None, &ALL), Vec::<String>::new());
        let no_producer = with_var.replace("binding = \"LULL_QUEUE\"", "binding = \"SOMETHING_ELSE\"");
        assert_eq!(
            problems(&no_producer, None, &ALL),
            ["a topic delivers by queue through LULL_QUEUE, but wrangler.toml's top level declares no queue \
             producer binding LULL_QUEUE ([[queues.producers]])"]
        );
        let no_consumer = with_var.replace("[[queues.consumers]]\nqueue = \"deliveries\"\n", "");
        assert_eq!(problems(&no_consumer, None, &ALL).len(), 1);
        assert!(problems(&no_consumer, None, &ALL)[0].starts_with("queue deliveries (LULL_QUEUE) has no consumer"));
        assert_eq!(
            problems(&wrangler(WEBHOOK, ""), None, &ALL),
            Vec::<String>::new(),
            "no queue topic, no queue needed"
        );
    }

    #[test]
    fn a_queue_topic_needs_the_dead_letter_queues_binding_var_and_consumer() {
        let with_var = |text: String| format!("{text}LULL_DEAD_LETTER_QUEUE = \"dead\"\n");
        let no_binding =
            with_var(wrangler(QUEUE, &QUEUES.replace("binding = \"LULL_DEAD_LETTERS\"", "binding = \"X\"")));
        assert_eq!(
            problems(&no_binding, None, &ALL),
            ["a topic delivers by queue, but wrangler.toml's top level declares no dead-letter queue producer \
             binding LULL_DEAD_LETTERS ([[queues.producers]])"]
        );
        let no_var = wrangler(QUEUE, QUEUES);
        assert_eq!(
            problems(&no_var, None, &ALL),
            ["LULL_DEAD_LETTER_QUEUE must name the dead-letter queue dead (LULL_DEAD_LETTERS's), not None"]
        );
        let no_consumer = with_var(wrangler(QUEUE, &QUEUES.replace("[[queues.consumers]]\nqueue = \"dead\"\n", "")));
        assert_eq!(
            problems(&no_consumer, None, &ALL),
            ["the dead-letter queue dead has no consumer in wrangler.toml's top level: dead letters would be lost"]
        );
    }

    #[test]
    fn an_invalid_topic_setting_is_named_as_the_worker_names_it() {
        let bad = r#"{"t": {"target": "https://a.example/t", "wait_ms": 1, "max_body_bytes": 0}}"#;
        let found = problems(&wrangler(bad, ""), None, &ALL);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with(r#"LULL_TOPICS: topic "t": max_body_bytes must be"#), "{found:?}");
        let table = wrangler(WEBHOOK, "").replace("[vars]\nLULL_TOPICS = '", "[vars]\nX = '");
        let table = format!("{table}[vars.LULL_TOPICS.t]\ntarget = \"https://a.example/t\"\nwait_ms = \"soon\"\n");
        let found = problems(&table, None, &ALL);
        assert!(found.len() == 1 && found[0].contains("wait_ms must be milliseconds"), "a table: {found:?}");
    }

    #[test]
    fn the_objects_the_env_and_secrets_in_the_file_are_checked() {
        let unbound = wrangler(WEBHOOK, "").replace("name = \"TOPIC_GATE\"", "name = \"GATE\"");
        assert_eq!(
            problems(&unbound, None, &ALL),
            [
                "wrangler.toml's top level binds no Durable Object TOPIC_GATE of class TopicGate ([[durable_objects.bindings]])"
            ]
        );
        assert_eq!(problems(&wrangler(WEBHOOK, ""), Some("staging"), &ALL), ["wrangler.toml has no [env.staging]"]);
        let plain = format!("{}LULL_ADMIN_TOKEN = \"{ADMIN}\"\n", wrangler(WEBHOOK, ""));
        assert_eq!(
            problems(&plain, None, &ALL[1..]),
            ["LULL_ADMIN_TOKEN is a plain var in wrangler.toml's top level: a secret goes to \
             `wrangler secret put LULL_ADMIN_TOKEN`, never into the file"]
        );
        // An environment inherits no vars, objects or queues: each is its own.
        let env = format!("{}[env.staging]\nvars = {{ LULL_TOPICS = '{WEBHOOK}' }}\n", wrangler(WEBHOOK, ""));
        let found = problems(&env, Some("staging"), &ALL);
        assert_eq!(found.len(), 2, "both objects unbound in [env.staging]: {found:?}");
    }

    #[test]
    fn a_secrets_file_is_read_as_dev_vars() {
        let text = "# local\nA=1\n\nexport B = \"two words\"\nC='x=y'\n";
        assert_eq!(
            parse_secrets(text).unwrap(),
            [("A".to_string(), "1".to_string()), ("B".into(), "two words".into()), ("C".into(), "x=y".into())]
        );
        assert_eq!(parse_secrets("no equals").unwrap_err(), "line 1: not KEY=VALUE");
    }
}
