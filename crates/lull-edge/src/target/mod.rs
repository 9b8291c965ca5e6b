//! A topic's target as its answers describe it, shared by every key of the
//! topic (and its queue consumer): [`Target`], kept by the topic's object;
//! [`Verdict`], what one answer says of the target ([`verdict`]); and
//! [`TargetCache`], each isolate's copy of the targets' states, so a healthy
//! target costs a delivery no request ([`cache`]).
//!
//! Like the core, it is told the time and asked what to do; it never waits.
//!
//! Guarantees:
//! - **A throttle pauses the topic, not the key**: a `429` or `503` (its
//!   `Retry-After` honoured, in seconds or as a date, at most the topic's
//!   `max_retry_after_ms`), or a `502`/`504`, pauses every delivery of the
//!   topic until the receiver's time passes; without `Retry-After`, for lull's
//!   own backoff ([`THROTTLE_BASE_MS`] doubling per throttle in a row, at most
//!   `max_retry_after_ms`).
//! - **One probe after a pause**: once it ends, the first delivery to ask
//!   goes alone ([`Admission::Probe`]); the others wait for its answer.
//! - **Stop on `410 Gone`, or after failing for `disable_after_ms`**: the
//!   target is disabled until an operator resumes it ([`Target::resume`]);
//!   nothing is delivered, nothing is dropped.
//! - **Every change is told once** ([`Change`]): the object logs it.

pub mod cache;
pub mod verdict;

use serde::{Deserialize, Serialize};

pub use cache::{TARGET_STALE_MS, TargetCache};
pub use verdict::{Verdict, retry_after_ms};

/// lull's own pause after a throttle without `Retry-After` (ms); it doubles
/// with each throttle in a row, up to the topic's `max_retry_after_ms`.
pub const THROTTLE_BASE_MS: u64 = 1_000;
/// While a probe is out, the others ask again this much later (ms).
pub const PROBE_RECHECK_MS: u64 = 1_000;
/// A key held by a disabled target looks again this much later (ms), unless woken by a resume.
pub const DISABLED_RECHECK_MS: u64 = 60_000;
/// Keys waiting for a pause to end start spread over this much after it (ms).
pub const RESUME_SPREAD_MS: u64 = 1_000;

/// A topic's terms for its target (settings `max_retry_after_ms`,
/// `max_throttled_ms`, `disable_after_failing_ms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetTerms {
    /// The longest pause one answer sets (ms).
    pub max_retry_after_ms: u64,
    /// How long a window's tries may be throttled without counting (ms); after it, they count as failed attempts.
    pub max_throttled_ms: u64,
    /// Failing answers only, for this long across the topic's keys, disables the target (ms).
    pub disable_after_ms: u64,
}

/// An hour, an hour, and five days (as Svix disables an endpoint).
impl Default for TargetTerms {
    fn default() -> Self {
        TargetTerms {
            max_retry_after_ms: 60 * 60 * 1000,
            max_throttled_ms: 60 * 60 * 1000,
            disable_after_ms: 5 * 24 * 60 * 60 * 1000,
        }
    }
}

/// Whether the target takes deliveries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum TargetState {
    /// Delivering.
    #[default]
    Active,
    /// Throttled: nothing is delivered before `until` (unix ms), then one probe.
    Paused {
        /// When the pause ends.
        until: u64,
    },
    /// Stopped (`410 Gone`, or failing too long) until resumed.
    Disabled,
}

/// The target's last answer the topic's object was told of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastAnswer {
    /// Its HTTP status, if it answered.
    pub status: Option<u16>,
    /// The status, `timeout`, or the network error.
    pub detail: String,
    /// When (unix ms).
    pub at: u64,
}

/// What a key caches of its topic's target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetView {
    /// Active, paused or disabled.
    #[serde(flatten)]
    pub state: TargetState,
    /// Failing since this time (unix ms): a delivery that succeeds says so.
    #[serde(default)]
    pub failing_since: Option<u64>,
}

impl TargetView {
    /// A delivery may go without asking the topic's object: the target is
    /// active (a paused one past its time needs a probe).
    pub fn open(&self) -> bool {
        self.state == TargetState::Active
    }
}

/// A change of the target's state, logged once by its object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Paused until `until` (unix ms), by `detail`.
    Paused {
        /// When the pause ends.
        until: u64,
        /// The answer that paused it.
        detail: String,
    },
    /// Disabled, by `why`.
    Disabled {
        /// `410` or how long it failed.
        why: String,
    },
    /// Active again (a probe delivered, or an operator resumed it).
    Resumed {
        /// `probe` or `operator`.
        by: &'static str,
    },
}

/// Whether a delivery may go now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Go.
    Go,
    /// Go alone, as the probe after a pause.
    Probe,
    /// Not before `until` (unix ms); `None`: not until the target is resumed.
    Hold {
        /// When to ask again.
        until: Option<u64>,
    },
}

/// A topic's target: its state and what led to it (stored by the topic's
/// object with its gate).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// Active, paused or disabled.
    #[serde(flatten)]
    pub state: TargetState,
    /// Since when (unix ms; 0: since the topic began).
    #[serde(default)]
    pub since: u64,
    /// The last answer told.
    #[serde(default)]
    pub last_answer: Option<LastAnswer>,
    /// Answers have failed since this time, none delivered (unix ms).
    #[serde(default)]
    pub failing_since: Option<u64>,
    /// Throttles without `Retry-After` in a row (lull's own backoff doubles).
    #[serde(default)]
    backoffs: u32,
    /// A probe is out until this time (unix ms): the others wait.
    #[serde(default)]
    probe_until: Option<u64>,
}

impl Target {
    /// What the keys cache.
    pub fn view(&self) -> TargetView {
        TargetView { state: self.state, failing_since: self.failing_since }
    }

    fn set(&mut self, state: TargetState, now: u64) {
        if std::mem::discriminant(&state) != std::mem::discriminant(&self.state) {
            self.since = now;
        }
        self.state = state;
    }

    /// Whether deliveries are held at `now`, and until when (`Some(None)`:
    /// until resumed); `None`: one may go (the target is active, or a pause
    /// ended and no probe is out). Changes nothing.
    pub fn held_until(&self, now: u64) -> Option<Option<u64>> {
        match self.state {
            TargetState::Active => None,
            TargetState::Disabled => Some(None),
            TargetState::Paused { until } if now < until => Some(Some(until)),
            TargetState::Paused { .. } => match self.probe_until {
                Some(out) if now < out => Some(Some(now.saturating_add(PROBE_RECHECK_MS).min(out))),
                _ => None,
            },
        }
    }

    /// May a delivery go at `now`? After a pause the first goes alone, as
    /// the probe, for `probe_ms` (its delivery's timeout and some): past it,
    /// another may go.
    pub fn admit(&mut self, now: u64, probe_ms: u64) -> Admission {
        if let Some(until) = self.held_until(now) {
            return Admission::Hold { until };
        }
        if self.state == TargetState::Active {
            return Admission::Go;
        }
        self.probe_until = Some(now.saturating_add(probe_ms));
        Admission::Probe
    }

    /// The target answered `verdict` (`status` and `detail` as the delivery
    /// saw them) at `now`: the change it makes, if any.
    pub fn answered(
        &mut self,
        now: u64,
        verdict: Verdict,
        status: Option<u16>,
        detail: &str,
        terms: &TargetTerms,
    ) -> Option<Change> {
        self.last_answer = Some(LastAnswer { status, detail: detail.to_string(), at: now });
        match verdict {
            Verdict::Delivered => {
                // A delivery that began before the pause (it answered late) ends nothing:
                // only the probe's, or one past the pause, does. A disabled target
                // stays so until an operator resumes it.
                let ends_pause = match self.state {
                    TargetState::Paused { until } => now >= until || self.probe_until.is_some(),
                    _ => false,
                };
                if matches!(self.state, TargetState::Paused { .. }) && !ends_pause {
                    return None;
                }
                self.failing_since = None;
                self.backoffs = 0;
                self.probe_until = None;
                if ends_pause {
                    self.set(TargetState::Active, now);
                    return Some(Change::Resumed { by: "probe" });
                }
                None
            }
            Verdict::Gone => {
                self.failing_since.get_or_insert(now);
                self.probe_until = None;
                if self.state == TargetState::Disabled {
                    return None;
                }
                self.set(TargetState::Disabled, now);
                Some(Change::Disabled { why: detail.to_string() })
            }
            Verdict::Throttled { retry_after_ms } => {
                let since = *self.failing_since.get_or_insert(now);
                if let Some(change) = self.disable_if_failing_long(now, since, terms) {
                    return Some(change);
                }
                let pause = match (retry_after_ms, self.state) {
                    (Some(ms), _) => ms,
                    // Another key's report of a throttle the pause already answers: it stands.
                    (None, TargetState::Paused { until }) if now < until => return None,
                    (None, _) => {
                        let doubled = THROTTLE_BASE_MS.saturating_mul(1u64 << self.backoffs.min(40));
                        self.backoffs = self.backoffs.saturating_add(1);
                        doubled
                    }
                }
                .min(terms.max_retry_after_ms);
                let until = now.saturating_add(pause);
                self.probe_until = None;
                match self.state {
                    TargetState::Disabled => None,
                    // A later answer never shortens a pause already set.
                    TargetState::Paused { until: set } if set >= until => None,
                    _ => {
                        self.set(TargetState::Paused { until }, now);
                        Some(Change::Paused { until, detail: detail.to_string() })
                    }
                }
            }
            Verdict::Failed => {
                let since = *self.failing_since.get_or_insert(now);
                if matches!(self.state, TargetState::Paused { .. }) {
                    // A failed probe: the pause goes on with lull's backoff.
                    return self.answered(now, Verdict::Throttled { retry_after_ms: None }, status, detail, terms);
                }
                self.disable_if_failing_long(now, since, terms)
            }
        }
    }

    fn disable_if_failing_long(&mut self, now: u64, since: u64, terms: &TargetTerms) -> Option<Change> {
        if self.state == TargetState::Disabled || now.saturating_sub(since) < terms.disable_after_ms {
            return None;
        }
        self.set(TargetState::Disabled, now);
        self.probe_until = None;
        Some(Change::Disabled { why: format!("failing for {} ms", now - since) })
    }

    /// An operator resumes the target at `now`: active again, its failures forgotten.
    pub fn resume(&mut self, now: u64) -> Option<Change> {
        self.failing_since = None;
        self.backoffs = 0;
        self.probe_until = None;
        if self.state == TargetState::Active {
            return None;
        }
        self.set(TargetState::Active, now);
        Some(Change::Resumed { by: "operator" })
    }
}

/// Where in `0..span` a key's start falls after a pause: the same key always
/// the same place, keys spread across it.
pub fn spread(key: &str, span: u64) -> u64 {
    if span == 0 {
        return 0;
    }
    stable_hash(key.bytes()) % span
}

/// A hash of `bytes` that is the same in every isolate and release (FNV-1a,
/// then SplitMix64's finaliser): spreads of keys' and messages' times.
pub(crate) fn stable_hash(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut h =
        bytes.into_iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TERMS: TargetTerms =
        TargetTerms { max_retry_after_ms: 60_000, max_throttled_ms: 3_600_000, disable_after_ms: 10_000 };

    fn throttled(ms: Option<u64>) -> Verdict {
        Verdict::Throttled { retry_after_ms: ms }
    }

    #[test]
    fn a_throttle_pauses_until_the_receivers_time_then_one_probe_goes() {
        let mut t = Target::default();
        assert_eq!(t.admit(0, 5_000), Admission::Go);
        let change = t.answered(1_000, throttled(Some(2_000)), Some(429), "429", &TERMS);
        assert_eq!(change, Some(Change::Paused { until: 3_000, detail: "429".into() }));
        assert_eq!(t.view().state, TargetState::Paused { until: 3_000 });
        assert!(!t.view().open());
        assert_eq!(t.admit(2_999, 5_000), Admission::Hold { until: Some(3_000) });
        assert_eq!(t.admit(3_000, 5_000), Admission::Probe, "the first to ask after the pause");
        assert_eq!(t.admit(3_010, 5_000), Admission::Hold { until: Some(4_010) }, "the others wait for it");
        assert_eq!(
            t.answered(3_050, Verdict::Delivered, Some(200), "200", &TERMS),
            Some(Change::Resumed { by: "probe" })
        );
        assert_eq!(t.admit(3_060, 5_000), Admission::Go);
        assert_eq!((t.since, t.failing_since), (3_050, None));
    }

    #[test]
    fn a_probe_that_never_answers_lets_another_go_after_its_time() {
        let mut t = Target::default();
        t.answered(0, throttled(Some(1_000)), Some(503), "503", &TERMS);
        assert_eq!(t.admit(1_000, 5_000), Admission::Probe);
        assert_eq!(t.admit(5_500, 5_000), Admission::Hold { until: Some(6_000) }, "at most until the probe's time");
        assert_eq!(t.admit(6_000, 5_000), Admission::Probe);
    }

    #[test]
    fn without_retry_after_lulls_own_backoff_doubles_and_is_capped() {
        let mut t = Target::default();
        let mut pauses = Vec::new();
        let mut now = 0;
        let terms = TargetTerms { disable_after_ms: u64::MAX, ..TERMS };
        for _ in 0..9 {
            t.answered(now, throttled(None), Some(503), "503", &terms);
            let TargetState::Paused { until } = t.state else { panic!("{:?}", t.state) };
            pauses.push(until - now);
            now = until;
            // The probe fails with a throttle again.
            assert_eq!(t.admit(now, 5_000), Admission::Probe);
        }
        assert_eq!(pauses, [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
        // Many keys telling of the same throttle (the pause not over yet) do not double it.
        let mut burst = Target::default();
        for at in 0..200 {
            burst.answered(at, throttled(None), Some(503), "503", &terms);
        }
        assert_eq!(burst.state, TargetState::Paused { until: 1_000 });
        let mut big = Target::default();
        big.answered(0, throttled(Some(u64::MAX)), Some(429), "429", &TERMS);
        assert_eq!(big.state, TargetState::Paused { until: 60_000 }, "a Retry-After past the bound is cut to it");
    }

    #[test]
    fn a_pause_is_never_shortened_and_a_success_ends_it_only_once_past() {
        let mut t = Target::default();
        t.answered(0, throttled(Some(30_000)), Some(429), "429", &TERMS);
        assert_eq!(
            t.answered(10, throttled(Some(1_000)), Some(429), "429", &TERMS),
            None,
            "a shorter one changes nothing"
        );
        assert_eq!(t.state, TargetState::Paused { until: 30_000 });
        assert_eq!(t.answered(20, throttled(Some(40_000)), Some(429), "429", &TERMS).map(|_| ()), Some(()));
        assert_eq!(t.state, TargetState::Paused { until: 40_020 });
        // A delivery that began before the pause and answered 200 inside it ends nothing.
        assert_eq!(t.answered(30, Verdict::Delivered, Some(200), "200", &TERMS), None);
        assert_eq!(t.state, TargetState::Paused { until: 40_020 });
        assert!(t.failing_since.is_some());
        // One past the pause does.
        assert_eq!(
            t.answered(40_020, Verdict::Delivered, Some(200), "200", &TERMS),
            Some(Change::Resumed { by: "probe" })
        );
    }

    #[test]
    fn gone_disables_and_only_an_operator_resumes() {
        let mut t = Target::default();
        assert_eq!(
            t.answered(5, Verdict::Gone, Some(410), "410", &TERMS),
            Some(Change::Disabled { why: "410".into() })
        );
        assert_eq!(t.admit(6, 5_000), Admission::Hold { until: None });
        assert_eq!(
            t.answered(7, Verdict::Delivered, Some(200), "200", &TERMS),
            None,
            "a late success does not undo a 410"
        );
        assert_eq!(t.state, TargetState::Disabled);
        assert_eq!(t.answered(8, throttled(Some(1)), Some(429), "429", &TERMS), None);
        assert_eq!(t.resume(100), Some(Change::Resumed { by: "operator" }));
        assert_eq!((t.state, t.since, t.failing_since), (TargetState::Active, 100, None));
        assert_eq!(t.resume(101), None, "once");
        assert_eq!(t.last_answer.as_ref().map(|a| (a.status, a.at)), Some((Some(429), 8)));
    }

    #[test]
    fn failing_across_keys_for_the_configured_time_disables() {
        let mut t = Target::default();
        assert_eq!(t.answered(0, Verdict::Failed, Some(500), "500", &TERMS), None);
        assert_eq!(t.answered(9_999, Verdict::Failed, None, "timeout", &TERMS), None);
        assert_eq!(t.view().failing_since, Some(0), "the keys see it failing");
        let change = t.answered(10_000, Verdict::Failed, Some(500), "500", &TERMS);
        assert!(matches!(change, Some(Change::Disabled { .. })), "{change:?}");
        // A success in between starts the count again.
        let mut t = Target::default();
        t.answered(0, Verdict::Failed, Some(500), "500", &TERMS);
        t.answered(9_000, Verdict::Delivered, Some(200), "200", &TERMS);
        assert_eq!(t.answered(12_000, Verdict::Failed, Some(500), "500", &TERMS), None);
        // Throttled all along counts too.
        let mut t = Target::default();
        t.answered(0, throttled(Some(1_000)), Some(429), "429", &TERMS);
        assert!(matches!(
            t.answered(10_000, throttled(Some(1_000)), Some(429), "429", &TERMS),
            Some(Change::Disabled { .. })
        ));
    }

    #[test]
    fn spreads_are_stable_and_cover_the_span() {
        assert_eq!(spread("k1", 1_000), spread("k1", 1_000));
        let places: std::collections::BTreeSet<u64> = (0..200).map(|i| spread(&format!("k{i}"), 1_000) / 100).collect();
        assert_eq!(places.len(), 10, "every tenth of the span is used");
        assert_eq!(spread("k", 0), 0);
    }

    #[test]
    fn the_view_crosses_as_json() {
        let view = TargetView { state: TargetState::Paused { until: 9 }, failing_since: Some(3) };
        let text = serde_json::to_string(&view).unwrap();
        assert_eq!(text, r#"{"state":"paused","until":9,"failing_since":3}"#);
        assert_eq!(serde_json::from_str::<TargetView>(&text).unwrap(), view);
        let stored = serde_json::to_string(&Target::default()).unwrap();
        assert_eq!(serde_json::from_str::<Target>(&stored).unwrap(), Target::default());
    }
}
