//! What lull-edge counts for its operators, two ways:
//!
//! - **Data points** ([`Point`], through the [`Metrics`] port): one per event
//!   request (accepted or refused), fire, delivery attempt (with its latency),
//!   throttle, pause and dead letter, for Workers Analytics Engine (index: the
//!   topic; blobs: what, outcome, reason; doubles: count, latency in ms), at most
//!   [`POINTS_PER_INVOCATION`] per invocation. The SQL a dashboard needs is in
//!   the manual's *Metrics*.
//! - **Counters** ([`Tally`]): the same events summed per topic, for `GET
//!   /v1/metrics` in Prometheus' text format ([`prometheus`]). Each isolate sums
//!   what its router and key objects count, and hands a topic's sums to the
//!   topic's object at most once per [`TALLY_FLUSH_MS`] (by whichever request
//!   or alarm of that topic comes next): never a request per event or delivery.
//!   The object keeps the totals with its target's state.
//!
//! Not guaranteed: sums an isolate held when it was evicted (at most
//! [`TALLY_FLUSH_MS`] of them) are lost; a failed hand-over is given back and
//! tried again.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::ports::Outcome;
use crate::queue::gate::{GateOp, Gates};
use crate::target::TargetState;

/// Data points one invocation (a request, an alarm) writes at most; past it
/// they are dropped (the counters still count them). Analytics Engine takes 250.
pub const POINTS_PER_INVOCATION: u32 = 200;
/// `GET /v1/metrics`' `Content-Type`: Prometheus' text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// How often an isolate hands a topic's sums to the topic's object at most (ms).
pub const TALLY_FLUSH_MS: u64 = 10_000;
/// Series (a counter and its label) a topic keeps at most; others are not counted.
pub const MAX_SERIES: usize = 256;

/// What a data point (and a counter) counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum What {
    /// Events accepted (outcome `accepted`) or refused (outcome: the error's code).
    Events,
    /// A window fired (reason: why).
    Fire,
    /// A delivery attempt (outcome: [`outcome_class`]; latency).
    Attempt,
    /// The target paused the topic (outcome: the answer).
    Pause,
    /// A window dead-lettered.
    DeadLetter,
}

impl What {
    /// Its name in a data point's first blob.
    pub fn as_str(self) -> &'static str {
        match self {
            What::Events => "events",
            What::Fire => "fire",
            What::Attempt => "attempt",
            What::Pause => "pause",
            What::DeadLetter => "dead_letter",
        }
    }
}

/// One data point: `index` the topic; blobs `what`, `outcome`, `reason`;
/// doubles `count`, `latency_ms`.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The topic (the point's index: queries filter and sample by it).
    pub topic: String,
    /// What it counts (blob 1).
    pub what: What,
    /// How it went (blob 2): `accepted` or a refusal's code; an attempt's class; a pause's answer.
    pub outcome: String,
    /// Why (blob 3): a fire's reason; else empty.
    pub reason: String,
    /// How many (double 1).
    pub count: f64,
    /// How long it took (double 2, ms): a delivery attempt's; else 0.
    pub latency_ms: f64,
}

impl Point {
    /// A point of `what` for `topic`: one, no reason, no latency.
    pub fn new(topic: &str, what: What, outcome: &str) -> Point {
        Point {
            topic: topic.to_string(),
            what,
            outcome: outcome.to_string(),
            reason: String::new(),
            count: 1.0,
            latency_ms: 0.0,
        }
    }

    /// The counter series it adds to, and by how much ([`Tally`]).
    pub fn series(&self) -> (String, u64) {
        let name = match (self.what, self.outcome.as_str()) {
            (What::Events, "accepted") => "events_accepted_total".to_string(),
            (What::Events, code) => format!("events_refused_total|{code}"),
            (What::Fire, _) => format!("windows_fired_total|{}", self.reason),
            (What::Attempt, class) => format!("delivery_attempts_total|{class}"),
            (What::Pause, _) => "target_pauses_total".to_string(),
            (What::DeadLetter, _) => "dead_letters_total".to_string(),
        };
        (name, self.count.max(0.0) as u64)
    }
}

/// The Metrics port: where data points go (Analytics Engine on Workers, a
/// list in tests; local workerd's binding records nothing).
pub trait Metrics {
    /// Write one data point (never fails: a point not written is a point lost).
    fn point(&self, point: Point);
}

/// A delivery attempt's class, as the counters and the points name it:
/// `2xx`, `throttled` (`429`, `502`, `503`, `504`), `gone` (`410`), `3xx`
/// (a redirect, not followed), `4xx`, `5xx`, `timeout`, or `error` (no answer).
pub fn outcome_class(outcome: &Outcome) -> &'static str {
    match outcome.status {
        _ if outcome.ok => "2xx",
        Some(429 | 502 | 503 | 504) => "throttled",
        Some(410) => "gone",
        Some(300..=399) => "3xx",
        Some(400..=499) => "4xx",
        Some(500..=599) => "5xx",
        Some(_) => "error",
        None if outcome.detail == "timeout" => "timeout",
        None => "error",
    }
}

/// An isolate's sums per topic since it last handed them over.
#[derive(Debug, Default)]
pub struct Tally {
    topics: RefCell<BTreeMap<String, Sums>>,
}

#[derive(Debug, Default)]
struct Sums {
    counts: BTreeMap<String, u64>,
    handed_at: u64,
}

impl Tally {
    /// Count `point` (its series, [`Point::series`]).
    pub fn add(&self, point: &Point) {
        let (series, n) = point.series();
        let mut topics = self.topics.borrow_mut();
        let sums = topics.entry(point.topic.clone()).or_default();
        *sums.counts.entry(series).or_default() += n;
    }

    /// `topic`'s sums to hand over at `now`, if it has some and the last
    /// hand-over was at least [`TALLY_FLUSH_MS`] ago (they are taken).
    pub fn due(&self, topic: &str, now: u64) -> Option<BTreeMap<String, u64>> {
        let mut topics = self.topics.borrow_mut();
        let sums = topics.get_mut(topic)?;
        if sums.counts.is_empty() || now.saturating_sub(sums.handed_at) < TALLY_FLUSH_MS {
            return None;
        }
        sums.handed_at = now;
        Some(std::mem::take(&mut sums.counts))
    }

    /// A hand-over of `counts` failed: they are counted again, to go with the next.
    pub fn give_back(&self, topic: &str, counts: BTreeMap<String, u64>) {
        let mut topics = self.topics.borrow_mut();
        let sums = topics.entry(topic.to_string()).or_default();
        for (series, n) in counts {
            *sums.counts.entry(series).or_default() += n;
        }
    }
}

/// Hand `tally`'s sums for `topic` to the topic's object through `gates`, if
/// they are due at `now` ([`Tally::due`]); a failed hand-over gives them back.
pub async fn hand_over(tally: &Tally, gates: &impl Gates, topic: &str, now: u64) {
    let Some(counts) = tally.due(topic, now) else { return };
    send_counts(tally, gates, topic, counts).await;
}

/// Hand `counts`, taken from `tally` by [`Tally::due`], to `topic`'s object
/// through `gates`; if that fails they are given back.
pub async fn send_counts(tally: &Tally, gates: &impl Gates, topic: &str, counts: BTreeMap<String, u64>) {
    if gates.ask(topic, GateOp::Tally { counts: counts.clone() }).await.is_err() {
        tally.give_back(topic, counts);
    }
}

/// Add `counts` (a hand-over) to a topic's `totals`, within [`MAX_SERIES`]
/// series of the known counters (a series past the bound, or unknown, is not counted).
pub fn add_up(totals: &mut BTreeMap<String, u64>, counts: &BTreeMap<String, u64>) {
    for (series, n) in counts {
        if !is_series(series) || (!totals.contains_key(series) && totals.len() >= MAX_SERIES) {
            continue;
        }
        let total = totals.entry(series.clone()).or_default();
        *total = total.saturating_add(*n);
    }
}

/// Every counter, its help, and its label's name (if it has one).
const COUNTERS: [(&str, &str, Option<&str>); 6] = [
    ("events_accepted_total", "Events accepted (202).", None),
    ("events_refused_total", "Events refused, by the error's code.", Some("code")),
    ("windows_fired_total", "Windows fired, by reason.", Some("reason")),
    (
        "delivery_attempts_total",
        "Delivery attempts (a webhook POST, or a queue topic's forward), by outcome: 2xx, throttled (429, 502, 503, \
         504), gone (410), 3xx, 4xx, 5xx, timeout, error.",
        Some("outcome"),
    ),
    ("target_pauses_total", "Times the topic's target paused it (a throttle).", None),
    ("dead_letters_total", "Windows dead-lettered.", None),
];

/// Whether `series` names a known counter (with a label of `a-z 0-9 _`, at most 32, if it takes one).
fn is_series(series: &str) -> bool {
    let (name, label) = match series.split_once('|') {
        Some((name, label)) => (name, Some(label)),
        None => (series, None),
    };
    COUNTERS.iter().any(|(counter, _, takes)| {
        *counter == name
            && match (takes, label) {
                (None, None) => true,
                (Some(_), Some(l)) => {
                    !l.is_empty()
                        && l.len() <= 32
                        && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                }
                _ => false,
            }
    })
}

/// The topics' totals and target states in Prometheus' text format (0.0.4):
/// each counter once, `lull_`-prefixed, its `topic` (and label) as labels;
/// and `lull_target_state{topic,state}` (1 for the current state, 0 the others).
pub fn prometheus(topics: &[(String, BTreeMap<String, u64>, TargetState)]) -> String {
    let mut out = String::new();
    for (counter, help, label) in COUNTERS {
        let _ = writeln!(out, "# HELP lull_{counter} {help}");
        let _ = writeln!(out, "# TYPE lull_{counter} counter");
        for (topic, totals, _) in topics {
            let mut any = false;
            for (series, n) in totals {
                let (name, value) = series.split_once('|').map_or((series.as_str(), None), |(n, v)| (n, Some(v)));
                if name != counter {
                    continue;
                }
                any = true;
                match (label, value) {
                    (Some(label), Some(value)) => {
                        let _ = writeln!(out, "lull_{counter}{{topic=\"{topic}\",{label}=\"{value}\"}} {n}");
                    }
                    _ => {
                        let _ = writeln!(out, "lull_{counter}{{topic=\"{topic}\"}} {n}");
                    }
                }
            }
            if !any && label.is_none() {
                let _ = writeln!(out, "lull_{counter}{{topic=\"{topic}\"}} 0");
            }
        }
    }
    let _ = writeln!(out, "# HELP lull_target_state The topic's target state: 1 for the current one.");
    let _ = writeln!(out, "# TYPE lull_target_state gauge");
    for (topic, _, state) in topics {
        for name in ["active", "paused", "disabled"] {
            let current = match state {
                TargetState::Active => "active",
                TargetState::Paused { .. } => "paused",
                TargetState::Disabled => "disabled",
            };
            let _ =
                writeln!(out, "lull_target_state{{topic=\"{topic}\",state=\"{name}\"}} {}", u8::from(name == current));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: Option<u16>, detail: &str) -> Outcome {
        Outcome {
            ok: status.is_some_and(|s| (200..300).contains(&s)),
            detail: detail.into(),
            status,
            retry_after_ms: None,
        }
    }

    #[test]
    fn an_attempt_is_classed_by_its_answer() {
        let classes: Vec<&str> = [
            (Some(204), "204"),
            (Some(429), "429"),
            (Some(504), "504"),
            (Some(410), "410"),
            (Some(302), "302 redirect to x"),
            (Some(404), "404"),
            (Some(500), "500"),
            (None, "timeout"),
            (None, "network: refused"),
        ]
        .iter()
        .map(|(s, d)| outcome_class(&outcome(*s, d)))
        .collect();
        assert_eq!(classes, ["2xx", "throttled", "throttled", "gone", "3xx", "4xx", "5xx", "timeout", "error"]);
    }

    #[test]
    fn an_isolate_hands_over_its_sums_at_most_once_a_period_and_keeps_what_failed() {
        let tally = Tally::default();
        assert_eq!(tally.due("t", 0), None, "nothing counted");
        tally.add(&Point { count: 3.0, ..Point::new("t", What::Events, "accepted") });
        tally.add(&Point { reason: "quiet".into(), ..Point::new("t", What::Fire, "") });
        tally.add(&Point::new("u", What::Events, "too_many_pending"));
        let first = tally.due("t", TALLY_FLUSH_MS).unwrap();
        assert_eq!(
            first,
            [("events_accepted_total".to_string(), 3), ("windows_fired_total|quiet".to_string(), 1)].into()
        );
        tally.add(&Point::new("t", What::Events, "accepted"));
        assert_eq!(tally.due("t", TALLY_FLUSH_MS + 1), None, "not again within the period");
        tally.give_back("t", first);
        let again = tally.due("t", 2 * TALLY_FLUSH_MS).unwrap();
        assert_eq!(again["events_accepted_total"], 4, "what failed goes with the next");
        assert_eq!(tally.due("u", 2 * TALLY_FLUSH_MS).unwrap()["events_refused_total|too_many_pending"], 1);
    }

    #[test]
    fn totals_keep_known_series_within_their_bound() {
        let mut totals = BTreeMap::new();
        let counts: BTreeMap<String, u64> = [
            ("events_accepted_total", 2),
            ("delivery_attempts_total|2xx", 1),
            ("nonsense", 9),
            ("events_accepted_total|x", 9),
            ("windows_fired_total|Bad Label", 9),
            ("windows_fired_total", 9),
        ]
        .map(|(s, n)| (s.to_string(), n))
        .into();
        add_up(&mut totals, &counts);
        add_up(&mut totals, &counts);
        assert_eq!(
            totals,
            [("delivery_attempts_total|2xx".to_string(), 2), ("events_accepted_total".to_string(), 4)].into()
        );
        for i in 0..MAX_SERIES * 2 {
            add_up(&mut totals, &[(format!("events_refused_total|c{i}"), 1)].into());
        }
        assert_eq!(totals.len(), MAX_SERIES, "bounded");
        add_up(&mut totals, &[("events_accepted_total".to_string(), u64::MAX)].into());
        assert_eq!(totals["events_accepted_total"], u64::MAX, "saturating");
    }

    #[test]
    fn the_text_format_names_each_counter_once_with_labels() {
        let totals: BTreeMap<String, u64> = [
            ("events_accepted_total", 5),
            ("delivery_attempts_total|2xx", 4),
            ("delivery_attempts_total|throttled", 2),
        ]
        .map(|(s, n)| (s.to_string(), n))
        .into();
        let text = prometheus(&[
            ("orders".into(), totals, TargetState::Paused { until: 9 }),
            ("idle".into(), BTreeMap::new(), TargetState::Active),
        ]);
        assert!(text.contains("# TYPE lull_events_accepted_total counter\n"));
        assert!(text.contains("lull_events_accepted_total{topic=\"orders\"} 5\n"));
        assert!(text.contains("lull_events_accepted_total{topic=\"idle\"} 0\n"), "every topic, even at 0");
        assert!(text.contains("lull_delivery_attempts_total{topic=\"orders\",outcome=\"throttled\"} 2\n"));
        assert!(text.contains("lull_target_state{topic=\"orders\",state=\"paused\"} 1\n"));
        assert!(text.contains("lull_target_state{topic=\"orders\",state=\"active\"} 0\n"));
        assert_eq!(text.matches("# TYPE lull_delivery_attempts_total").count(), 1);
        assert!(text.ends_with('\n'));
    }
}
