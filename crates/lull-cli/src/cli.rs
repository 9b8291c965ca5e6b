//! The command line as clap reads it: commands, flags, the environment
//! variables behind them, and each command's help with an example.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::duration;

/// The command's defaults, each once (the library's are in `lull_client::defaults`).
pub mod defaults {
    /// `--max-time`: `lull_client::defaults::MAX_ELAPSED`, written as a flag takes it.
    pub const MAX_TIME: &str = "90s";
    /// `lull pull --budget`: the run's time at most.
    pub const PULL_BUDGET: &str = "55s";
    /// `lull pull --idle`: the nap on an empty queue.
    pub const PULL_IDLE: &str = "5s";
    /// `lull pull --estimate`: a handler run's time before any was measured.
    pub const PULL_ESTIMATE: &str = "2s";
    /// `lull pull --tolerance`: the margin over the statistic.
    pub const PULL_TOLERANCE: &str = "2";
    /// `lull pull --margin`: the statistic (`lull_core::Margin`'s default).
    pub const PULL_MARGIN: &str = "p99.5";
    /// `lull pull --batch`: messages per pull.
    pub const PULL_BATCH: u8 = 10;
    /// `lull pull --handler-timeout`: a handler run's time at most.
    pub const PULL_HANDLER_TIMEOUT: &str = "30s";
}

/// Send events to lull-edge, read its status and dead letters, mint client tokens, pull queued windows.
#[derive(Debug, Parser)]
#[command(name = "lull", version, after_help = crate::exit::HELP)]
pub struct Cli {
    /// lull's API settings (all commands but `pull`).
    #[command(flatten)]
    pub api: ApiFlags,
    /// One line of JSON per answer instead of indented JSON.
    #[arg(long, global = true, help_heading = "Output")]
    pub compact: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Where lull's API is, the token to call it with, and how hard to retry.
#[derive(Debug, Args)]
#[command(next_help_heading = "lull's API (every command but pull)")]
pub struct ApiFlags {
    /// lull-edge's base URL, e.g. https://lull.example.com.
    #[arg(long, env = "LULL_URL", global = true, value_name = "URL")]
    pub url: Option<String>,
    /// The bearer token: an ingest token to send, an admin token for everything else.
    #[arg(long, env = "LULL_TOKEN", global = true, hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Requests at most per call, the first included (429, 502, 503, 504 and lost connections are retried).
    #[arg(long, global = true, value_name = "N", default_value_t = lull_client::defaults::MAX_ATTEMPTS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_attempts: u32,
    /// Time a call may take at most, retries and their waits (Retry-After) included.
    #[arg(long, global = true, value_name = "DURATION", default_value = defaults::MAX_TIME, value_parser = duration::parse)]
    pub max_time: Duration,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Post one event, or a batch of events (NDJSON).
    #[command(after_help = "\
Examples:
  lull send docs doc-42 '{\"rev\": 7}'
  echo '{\"rev\": 8}' | lull send docs doc-42
  lull send docs doc-42 '{\"rev\": 9}' --idempotency-key save-9f2c
  lull send docs --batch events.ndjson     # lines of {\"key\", \"event\", \"idempotency_key\"?}
  cat events.ndjson | lull send docs --batch -

Each call has an idempotency key (yours, or a fresh one), the same on every retry.
A batch over 1,000 events or 4 MiB goes as several requests, each event with its own key.")]
    Send(SendArgs),
    /// A key's status, or (without KEY) a queue topic's status.
    #[command(after_help = "\
Examples:
  lull status docs doc-42     # the key: state, windows, dead letters, counters
  lull status orders          # a queue topic: forwards in flight, counters, dead letters")]
    Status(StatusArgs),
    /// List, replay or discard dead letters of a key, or (without KEY) of a queue topic.
    #[command(after_help = "\
Examples:
  lull dead-letters docs doc-42 list
  lull dead-letters docs doc-42 replay               # every dead letter of the key
  lull dead-letters docs doc-42 replay --window 4
  lull dead-letters docs doc-42 discard --window 4
  lull dead-letters orders list                      # a queue topic's
  lull dead-letters orders replay                    # all, 100 per request
  lull dead-letters orders discard --window 7        # a queue dead letter's id")]
    #[command(override_usage = "lull dead-letters [OPTIONS] <TOPIC> [KEY] <list|replay|discard>")]
    DeadLetters(DeadLetterArgs),
    /// Mint a client token (a short-lived JWT for a browser page) and print it.
    #[command(after_help = "\
Examples:
  lull token docs --key doc-42
  lull token docs --key doc-42 --ttl 10m --ops events,flush --events-per-minute 60 --sub user-7
  lull token docs --key-prefix user-7/ --json     # {\"token\", \"expires_at\"}")]
    Token(TokenArgs),
    /// Pull lull's queued windows through Cloudflare's HTTP pull API and hand each to a command,
    /// for a budget: a run a scheduler starts once a minute that behaves like one running all the time.
    #[command(after_help = "\
Example (from cron, every minute):
  CLOUDFLARE_ACCOUNT_ID=… CLOUDFLARE_API_TOKEN=… LULL_PULL_QUEUE=… \\
    lull pull --budget 55s --idle 5s --estimate 2s --tolerance 2 -- ./handle-window.sh

The command runs once per window, directly (no shell): the window's JSON, as a
webhook receives it, on its stdin; LULL_IDEMPOTENCY_KEY and LULL_ATTEMPT in its
environment; its output on lull's stderr. Exit 0 acks the window; any other
exit, a crash or --handler-timeout gives it back for a retry (after 1 s,
doubling). A window handled in this run that comes again is acked unhandled.

No window begins later than budget - margin, the margin being tolerance x the
statistic of handler times (kept between runs in --state). Windows pulled and
not begun are given back at once when the run ends. SIGTERM or SIGINT: the
window in hand finishes (a second signal stops it), the rest go back.

One summary line on stdout (with --json, a line per window and the summary as
JSON). Exit: 0 the budget ended with every handled window acked; 4 a handler
failed; 5 interrupted; 3 the queue's API unavailable; 1 it refused (a wrong
token or queue); 2 a bad flag or setting.")]
    Pull(PullFlags),
}

/// `lull send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// The topic.
    pub topic: String,
    /// The key (not with --batch).
    #[arg(required_unless_present = "batch", conflicts_with = "batch")]
    pub key: Option<String>,
    /// The event as JSON text; `-` or absent: read from stdin.
    #[arg(conflicts_with = "batch", value_name = "EVENT|-")]
    pub event: Option<String>,
    /// Post the events of an NDJSON file (`-`: stdin), one `{"key", "event", "idempotency_key"?}` per line.
    #[arg(long, value_name = "FILE|-")]
    pub batch: Option<String>,
    /// The event's idempotency key (default: a fresh one per call).
    #[arg(long, conflicts_with = "batch", value_name = "KEY")]
    pub idempotency_key: Option<String>,
}

/// `lull status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The topic.
    pub topic: String,
    /// The key; without it, the queue topic's status.
    pub key: Option<String>,
}

/// What to do with dead letters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Action {
    /// Every dead letter, page by page.
    List,
    /// Deliver them again (one with --window, else all).
    Replay,
    /// Forget one (--window).
    Discard,
}

/// `lull dead-letters`.
#[derive(Debug, Args)]
pub struct DeadLetterArgs {
    /// The topic.
    pub topic: String,
    /// `[KEY] ACTION`: the key (absent: the queue topic's), then list, replay or discard.
    #[arg(num_args = 1..=2, required = true, value_name = "[KEY] ACTION")]
    pub rest: Vec<String>,
    /// One dead letter: a key's window id, or a queue dead letter's id.
    #[arg(long, alias = "id", value_name = "ID")]
    pub window: Option<u64>,
}

/// `lull token`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("scope").required(true).args(["key", "key_prefix"]))]
pub struct TokenArgs {
    /// The topic.
    pub topic: String,
    /// The one key it covers.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// Every key starting with this.
    #[arg(long, value_name = "PREFIX")]
    pub key_prefix: Option<String>,
    /// Its lifetime (whole seconds, at most 24h; default: the API's, 1h).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub ttl: Option<Duration>,
    /// What it may do, comma-separated: events, flush, cancel (events always).
    #[arg(long, value_delimiter = ',', value_name = "OPS")]
    pub ops: Vec<String>,
    /// Its holder's events per key and minute at most.
    #[arg(long, value_name = "N")]
    pub events_per_minute: Option<u32>,
    /// Its holder (tokens of one holder share idempotency keys and events_per_minute).
    #[arg(long, value_name = "SUB")]
    pub sub: Option<String>,
    /// Print the API's answer (`{"token", "expires_at"}`) instead of the token alone.
    #[arg(long)]
    pub json: bool,
}

/// `lull pull`'s flags as typed (checked into [`crate::pull_args::PullArgs`]).
#[derive(Debug, Args)]
pub struct PullFlags {
    /// The run's time at most: no window begins later than this less the margin.
    #[arg(long, value_name = "DURATION", default_value = defaults::PULL_BUDGET, value_parser = duration::parse)]
    pub budget: Duration,
    /// How long to nap when the queue is empty, before pulling again.
    #[arg(long, value_name = "DURATION", default_value = defaults::PULL_IDLE, value_parser = duration::parse)]
    pub idle: Duration,
    /// A handler run's expected time, before any was measured.
    #[arg(long, value_name = "DURATION", default_value = defaults::PULL_ESTIMATE, value_parser = duration::parse)]
    pub estimate: Duration,
    /// The margin kept before the budget's end, as a multiple of the statistic (1–100).
    #[arg(long, value_name = "FACTOR", default_value = defaults::PULL_TOLERANCE, value_parser = parse_tolerance)]
    pub tolerance: f64,
    /// The statistic of handler times the margin multiplies: a percentile of
    /// the last 1,024 kept across runs (`p99.5`), or `mean` of this run's.
    #[arg(long, value_name = "STATISTIC", default_value = defaults::PULL_MARGIN, value_parser = parse_margin)]
    pub margin: lull_core::Margin,
    /// Where handler times are kept between runs [default: $XDG_STATE_HOME/lull/pull-QUEUE.json].
    #[arg(long, env = "LULL_PULL_STATE", value_name = "FILE", conflicts_with = "no_state")]
    pub state: Option<std::path::PathBuf>,
    /// Keep no handler times between runs: each run starts from --estimate.
    #[arg(long)]
    pub no_state: bool,
    /// Messages per pull (1–100).
    #[arg(long, value_name = "N", default_value_t = defaults::PULL_BATCH, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub batch: u8,
    /// A handler run's time at most: past it the handler is stopped and its
    /// window retried. Also the margin until 200 handler times are known.
    #[arg(long, value_name = "DURATION", default_value = defaults::PULL_HANDLER_TIMEOUT, value_parser = duration::parse)]
    pub handler_timeout: Duration,
    /// Report as JSON lines on stdout.
    #[arg(long)]
    pub json: bool,
    /// The handler: a command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
    /// The queue and Cloudflare's API.
    #[command(flatten)]
    pub queue: QueueFlags,
}

/// `lull pull`'s queue: which one, and how to reach Cloudflare's HTTP pull API.
#[derive(Debug, Args)]
#[command(next_help_heading = "The queue (Cloudflare's HTTP pull API)")]
pub struct QueueFlags {
    /// The Cloudflare account's id.
    #[arg(long, env = "CLOUDFLARE_ACCOUNT_ID", value_name = "ID")]
    pub account_id: Option<String>,
    /// A Cloudflare API token that may read and write the queue.
    #[arg(long, env = "CLOUDFLARE_API_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub api_token: Option<String>,
    /// The queue's id.
    #[arg(long, env = "LULL_PULL_QUEUE", value_name = "QUEUE_ID")]
    pub queue: Option<String>,
    /// Cloudflare's API base URL.
    #[arg(long, env = "CLOUDFLARE_API_BASE_URL", value_name = "URL",
          default_value = lull_client::defaults::CLOUDFLARE_API_BASE)]
    pub api_base_url: String,
}

/// `--tolerance`: a finite factor of at least 1 (the margin covers a window).
pub fn parse_tolerance(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && (1.0..=100.0).contains(&f) => Ok(f),
        _ => Err(format!("{text:?} is not a factor from 1 to 100 (e.g. 2 or 1.5)")),
    }
}

/// `--margin`: `mean` (the mean of this run's durations) or `pNN.N`, a
/// percentile of the durations kept across runs (default `p99.5`).
pub fn parse_margin(text: &str) -> Result<lull_core::Margin, String> {
    let bad = || format!("{text:?} is not `mean` or a percentile such as `p99.5` (0.1–100)");
    if text == "mean" {
        return Ok(lull_core::Margin::Mean);
    }
    let percent: f64 = text.strip_prefix('p').ok_or_else(bad)?.parse().map_err(|_| bad())?;
    let per_mille = (percent * 10.0).round();
    if !(1.0..=1000.0).contains(&per_mille) || (percent * 10.0 - per_mille).abs() > 1e-9 {
        return Err(bad());
    }
    Ok(lull_core::Margin::Percentile { per_mille: per_mille as u16 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lull_core::Margin;

    #[test]
    fn the_max_time_default_is_the_librarys() {
        assert_eq!(duration::parse(defaults::MAX_TIME), Ok(lull_client::defaults::MAX_ELAPSED));
    }

    #[test]
    fn the_margin_is_the_mean_or_a_percentile_in_tenths() {
        assert_eq!(parse_margin("mean"), Ok(Margin::Mean));
        assert_eq!(parse_margin("p99.5"), Ok(Margin::Percentile { per_mille: 995 }));
        assert_eq!(parse_margin("p100"), Ok(Margin::Percentile { per_mille: 1000 }));
        assert_eq!(parse_margin("p50"), Ok(Margin::Percentile { per_mille: 500 }));
        for bad in ["p0", "p100.1", "p99.55", "99.5", "median", "p", "p-1"] {
            assert!(parse_margin(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_tolerance_covers_a_window_at_least() {
        assert_eq!(parse_tolerance("1.5"), Ok(1.5));
        for bad in ["0.5", "0", "NaN", "inf", "101"] {
            assert!(parse_tolerance(bad).is_err(), "{bad}");
        }
    }
}
