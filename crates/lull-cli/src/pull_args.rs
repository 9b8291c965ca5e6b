//! `lull pull`'s settings, checked and typed: what `crate::pull::run` gets.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use lull_client::{PullConfig, PullQueue};

use crate::cli::PullFlags;
use crate::failure::Failure;

/// `lull pull`'s settings.
#[derive(Debug)]
pub struct PullArgs {
    /// The run's time at most (`--budget`).
    pub budget: Duration,
    /// How long to nap when the queue is empty (`--idle`).
    pub idle: Duration,
    /// A handler run's expected time before any was measured (`--estimate`).
    pub estimate: Duration,
    /// The margin as a multiple of the statistic, at least 1 (`--tolerance`).
    pub tolerance: f64,
    /// The statistic of measured durations the margin multiplies (`--margin`).
    pub margin: lull_core::Margin,
    /// Where durations are kept between runs (`--state`; none with `--no-state`).
    pub state: Option<PathBuf>,
    /// Messages per pull, 1–100 (`--batch`).
    pub batch: u8,
    /// A handler run's time at most (`--handler-timeout`).
    pub handler_timeout: Duration,
    /// Report as JSON lines (`--json`).
    pub json: bool,
    /// The handler: a program and its arguments, never empty.
    pub command: Vec<OsString>,
    /// The queue (its settings: [`PullQueue::config`]).
    pub queue: PullQueue,
}

/// A setting that must be given, by its flag or its variable.
fn required(value: Option<String>, variable: &str, flag: &str) -> Result<String, Failure> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v.trim().to_string()),
        Some(_) => Err(Failure::usage(format!("{variable} (or {flag}) is empty"))),
        None => Err(Failure::usage(format!("{variable} (or {flag}) is not set"))),
    }
}

impl PullArgs {
    /// The flags (and their variables) checked.
    ///
    /// # Errors
    /// A usage failure naming the flag or variable missing or wrong.
    pub fn from_flags(flags: PullFlags) -> Result<PullArgs, Failure> {
        let config = PullConfig {
            base: flags.queue.api_base_url,
            account_id: required(flags.queue.account_id, "CLOUDFLARE_ACCOUNT_ID", "--account-id")?,
            queue_id: required(flags.queue.queue, "LULL_PULL_QUEUE", "--queue")?,
            api_token: required(flags.queue.api_token, "CLOUDFLARE_API_TOKEN", "--api-token")?,
        };
        let queue = PullQueue::new(config).map_err(|e| {
            Failure::usage(format!(
                "{e} (CLOUDFLARE_API_BASE_URL or --api-base-url, CLOUDFLARE_ACCOUNT_ID, LULL_PULL_QUEUE)"
            ))
        })?;
        if flags.command.first().is_none_or(|program| program.is_empty()) {
            return Err(Failure::usage("lull pull needs a handler command after `--`"));
        }
        Ok(PullArgs {
            budget: flags.budget,
            idle: flags.idle,
            estimate: flags.estimate,
            tolerance: flags.tolerance,
            margin: flags.margin,
            state: if flags.no_state {
                None
            } else {
                flags.state.or_else(|| crate::pull::state::default_path(&queue.config().queue_id))
            },
            batch: flags.batch,
            handler_timeout: flags.handler_timeout,
            json: flags.json,
            command: flags.command,
            queue,
        })
    }
}
