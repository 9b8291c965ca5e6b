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

#[cfg(test)]
mod tests {
    use super::*;
    use lull_core::Margin;

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
