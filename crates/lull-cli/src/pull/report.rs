//! What `lull pull` says: one line per window with `--json`, a live status
//! line on a terminal (stderr; none when stderr is not a terminal), and one
//! summary line per run on stdout (JSON with `--json`).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use lull_core::{Basis, Limit};
use serde::Serialize;

/// A run's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Handler runs (any outcome).
    pub handled: u32,
    /// Windows acked after their handler succeeded.
    pub acked: u32,
    /// Windows given back for a retry after a failure, a crash, a timeout,
    /// an interruption, or a body that is not lull's.
    pub failed: u32,
    /// Duplicates of a window handled in this run: acked, not handled again.
    pub duplicates: u32,
    /// Pulled and not begun: given back at once when the run ended.
    pub released: u32,
    /// Pulls, and naps on an empty queue.
    pub pulls: u32,
    /// Naps on an empty queue.
    pub idles: u32,
}

/// One window's line (`--json`).
#[derive(Debug, Serialize)]
pub struct WindowLine<'a> {
    /// The window's idempotency key (or the message id for a body that is not lull's).
    pub window: &'a str,
    /// `Lull-Attempt`.
    pub attempt: u32,
    /// acked, failed, crashed, timed_out, stopped, unstartable, duplicate, undecodable.
    pub outcome: &'a str,
    /// The handler's time.
    pub took_ms: u64,
    /// Its exit code, or the signal that ended it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The retry's delay, when it was given back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_s: Option<u64>,
}

/// How the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    /// The budget: no more work fit.
    Budget,
    /// SIGTERM or SIGINT.
    Signal,
    /// The queue's API failed (after its retries).
    QueueApi,
}

/// The summary of a run.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// How it ended.
    pub ended_by: EndedBy,
    /// Its counts.
    #[serde(flatten)]
    pub counts: Counts,
    /// Time used, and the budget.
    pub used_ms: u64,
    /// `--budget`.
    pub budget_ms: u64,
    /// The margin at the end.
    pub margin_ms: u64,
    /// What the margin was drawn from: estimate, mean or p<percentile>.
    pub margin_from: String,
    /// The statistic's value.
    pub statistic_ms: u64,
    /// `--tolerance`: the margin over the statistic (before the handler timeout bounds it).
    pub tolerance: f64,
    /// What set the margin: the statistic, the handler timeout, or the run's length.
    #[serde(serialize_with = "limit_name")]
    pub limited_by: Limit,
    /// Durations it was drawn from.
    pub samples: usize,
    /// Why the queue's API failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Summary {
    /// The statistic's name and sample count from the budget's basis.
    pub fn basis(basis: Basis) -> (String, usize) {
        match basis {
            Basis::Estimate => ("estimate".into(), 0),
            Basis::Mean { samples } => ("mean".into(), samples),
            Basis::Percentile { per_mille, samples } => {
                let p = if per_mille % 10 == 0 {
                    format!("p{}", per_mille / 10)
                } else {
                    format!("p{}.{}", per_mille / 10, per_mille % 10)
                };
                (p, samples)
            }
        }
    }

    /// The summary line, for people.
    pub fn line(&self) -> String {
        let c = &self.counts;
        let ended = match self.ended_by {
            EndedBy::Budget => "",
            EndedBy::Signal => " (interrupted)",
            EndedBy::QueueApi => " (the queue's API failed)",
        };
        let statistic = match self.margin_from.as_str() {
            "estimate" => format!("the estimate {}", seconds(self.statistic_ms)),
            name => format!("{name} {} of {} handler times", seconds(self.statistic_ms), self.samples),
        };
        let from = match self.limited_by {
            Limit::Statistic => format!("= {} × {statistic}", self.tolerance),
            Limit::Ceiling => format!("= the handler timeout ({statistic})"),
            Limit::Run => format!("= 3/4 of the budget ({statistic})"),
        };
        format!(
            "lull pull: handled {} (acked {}, failed {}), duplicates {}, released {}; used {} of {}{ended}; margin {} {from}; idles {}, pulls {}",
            c.handled,
            c.acked,
            c.failed,
            c.duplicates,
            c.released,
            seconds(self.used_ms),
            seconds(self.budget_ms),
            seconds(self.margin_ms),
            c.idles,
            c.pulls,
        )
    }
}

/// `limited_by` as the JSON summary writes it.
fn limit_name<S: serde::Serializer>(limit: &Limit, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(match limit {
        Limit::Statistic => "statistic",
        Limit::Ceiling => "handler_timeout",
        Limit::Run => "budget",
    })
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", Duration::from_millis(ms).as_secs_f64())
}

/// Where lines go.
#[derive(Debug)]
pub struct Reporter {
    json: bool,
    live: bool,
}

impl Reporter {
    /// JSON lines with `json`; a live line when stderr is a terminal.
    pub fn new(json: bool) -> Reporter {
        Reporter { json, live: std::io::stderr().is_terminal() }
    }

    /// A window's line (`--json` only).
    pub fn window(&self, line: &WindowLine<'_>) {
        if self.json {
            self.clear();
            if let Ok(text) = serde_json::to_string(line) {
                println!("{text}");
            }
        }
    }

    /// The live status line (a terminal only), rewritten in place.
    pub fn status(&self, counts: &Counts, used: Duration, budget: Duration, margin_ms: u64, doing: &str) {
        if self.live {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r\x1b[2K{doing}: {} handled, {} failed · {:.1} s of {:.1} s · margin {:.1} s",
                counts.handled,
                counts.failed,
                used.as_secs_f64(),
                budget.as_secs_f64(),
                margin_ms as f64 / 1e3
            );
            let _ = err.flush();
        }
    }

    /// The summary line.
    pub fn summary(&self, summary: &Summary) {
        self.clear();
        if self.json {
            if let Ok(text) = serde_json::to_string(&serde_json::json!({ "summary": summary })) {
                println!("{text}");
            }
        } else {
            println!("{}", summary.line());
        }
    }

    fn clear(&self) {
        if self.live {
            eprint!("\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_names_every_count_and_the_margin_source() {
        let (margin_from, samples) = Summary::basis(Basis::Percentile { per_mille: 995, samples: 312 });
        let summary = Summary {
            ended_by: EndedBy::Budget,
            counts: Counts { handled: 27, acked: 26, failed: 1, duplicates: 2, released: 3, pulls: 4, idles: 1 },
            used_ms: 56_200,
            budget_ms: 60_000,
            margin_ms: 4_000,
            margin_from,
            statistic_ms: 2_000,
            tolerance: 2.0,
            limited_by: Limit::Statistic,
            samples,
            error: None,
        };
        assert_eq!(
            summary.line(),
            "lull pull: handled 27 (acked 26, failed 1), duplicates 2, released 3; used 56.2 s of 60.0 s; margin 4.0 s = 2 × p99.5 2.0 s of 312 handler times; idles 1, pulls 4"
        );
        assert_eq!(Summary::basis(Basis::Percentile { per_mille: 990, samples: 1 }).0, "p99");
        let json = serde_json::to_value(&summary).expect("json");
        assert_eq!(json["acked"], 26);
        assert_eq!(json["ended_by"], "budget");
        assert_eq!(json["limited_by"], "statistic");
        let warming = Summary { limited_by: Limit::Ceiling, margin_ms: 30_000, ..summary };
        assert!(warming.line().contains("; margin 30.0 s = the handler timeout (p99.5 2.0 s of 312 handler times);"));
    }
}
