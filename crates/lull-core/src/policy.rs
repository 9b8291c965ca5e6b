//! What a debouncer does: the validated [`Policy`], built from a plain [`PolicyConfig`].

use core::fmt;

use serde::{Deserialize, Serialize};

use crate::adaptive::Adaptive;

/// Largest duration any policy field accepts: 2^53 − 1 ms, the largest integer
/// a JavaScript number holds exactly.
pub const MAX_DURATION_MS: u64 = (1 << 53) - 1;

/// The quiet period: fixed, or learned per key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wait {
    /// A fixed quiet period in ms.
    Fixed(u64),
    /// Learned from the gaps between a key's events (see [`Adaptive`]).
    Auto(Adaptive),
}

impl Wait {
    /// The longest quiet period this can produce.
    pub fn longest(&self) -> u64 {
        match self {
            Wait::Fixed(ms) => *ms,
            Wait::Auto(a) => a.max_ms,
        }
    }

    /// The quiet period a key starts with (before an adaptive wait has learned).
    pub fn initial(&self) -> u64 {
        match self {
            Wait::Fixed(ms) => *ms,
            Wait::Auto(a) => a.initial_ms,
        }
    }

    /// lodash's rule: `max_wait` raised to at least the longest wait
    /// (lodash-compatible APIs apply this instead of rejecting).
    pub fn raise_max_wait(&self, max_wait: Option<u64>) -> Option<u64> {
        max_wait.map(|m| m.max(self.longest()))
    }
}

/// What happens when a window is due while the key's previous run is still going.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Singleton: the due window waits, keeps absorbing events, and fires as
    /// soon as the run ends. Never two runs at once.
    #[default]
    Queue,
    /// Latest wins: the new fire replaces the running one
    /// ([`Fire::supersedes`](crate::Fire::supersedes) names it).
    Supersede,
}

/// Retry schedule: exponential backoff, with full jitter by default.
///
/// After failed attempt `n` the next attempt waits
/// `ceiling(n) = min(cap_ms, base_ms × 2^(n−1))` ms: a uniformly random delay in
/// `0..=ceiling(n)` with [`JitterMode::Full`], exactly `ceiling(n)` with
/// [`JitterMode::None`]. After `max_attempts` failures the window is dead-lettered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retry {
    /// Attempts in all, including the first (1 = no retries).
    pub max_attempts: u32,
    /// Backoff ceiling after the first failure, in ms.
    pub base_ms: u64,
    /// Largest backoff ceiling, in ms.
    pub cap_ms: u64,
    /// How the delay is drawn under the ceiling (absent in older snapshots: full).
    #[serde(default)]
    pub jitter: JitterMode,
}

/// How a retry's delay is drawn under its ceiling ([`Retry::ceiling`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JitterMode {
    /// Uniformly random in `0..=ceiling`: retries of many keys spread out
    /// instead of arriving together ("full jitter").
    #[default]
    Full,
    /// Exactly the ceiling: a predictable schedule (plain exponential backoff).
    None,
}

impl Retry {
    /// No retries: a failed run is dead-lettered at once.
    pub const NONE: Retry = Retry { max_attempts: 1, base_ms: 0, cap_ms: 0, jitter: JitterMode::Full };

    /// `max_attempts` in all, backing off from `base_ms` up to `cap_ms`, full jitter.
    pub const fn backoff(max_attempts: u32, base_ms: u64, cap_ms: u64) -> Retry {
        Retry { max_attempts, base_ms, cap_ms, jitter: JitterMode::Full }
    }

    /// The largest delay drawn after failed attempt `attempt` (1-based).
    pub fn ceiling(&self, attempt: u32) -> u64 {
        let doublings = attempt.saturating_sub(1).min(63);
        self.base_ms.saturating_mul(1u64 << doublings).min(self.cap_ms)
    }
}

impl Default for Retry {
    fn default() -> Self {
        Retry::NONE
    }
}

/// The plain, unchecked fields of a policy. Build a [`Policy`] with [`PolicyConfig::build`].
///
/// `wait`, `max_wait`, `leading` and `trailing` mean what they mean in
/// `lodash.debounce`; the rest is the execution lifecycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Quiet period after the last event before the window fires.
    pub wait: Wait,
    /// Hard bound: a burst fires at least this often (ms). Must be ≥ the longest `wait`.
    #[serde(default)]
    pub max_wait: Option<u64>,
    /// Fire on the first event of a burst.
    #[serde(default)]
    pub leading: bool,
    /// Fire at the end of a burst (events after a leading fire are dropped without it).
    #[serde(default = "yes")]
    pub trailing: bool,
    /// A window with this many events fires at once.
    #[serde(default)]
    pub max_batch: Option<u64>,
    /// What a fire does while a run is going.
    #[serde(default)]
    pub overlap: Overlap,
    /// Retries of failed runs.
    #[serde(default)]
    pub retry: Retry,
    /// A run not ended this long (ms) after it fired counts as failed.
    #[serde(default)]
    pub run_timeout: Option<u64>,
}

fn yes() -> bool {
    true
}

impl PolicyConfig {
    /// Trailing-edge debounce with a fixed quiet period, no `max_wait`.
    pub fn debounce(wait_ms: u64) -> Self {
        PolicyConfig {
            wait: Wait::Fixed(wait_ms),
            max_wait: None,
            leading: false,
            trailing: true,
            max_batch: None,
            overlap: Overlap::Queue,
            retry: Retry::NONE,
            run_timeout: None,
        }
    }

    /// lodash's throttle: `leading` and `trailing` on, `max_wait = wait`.
    pub fn throttle(wait_ms: u64) -> Self {
        PolicyConfig { max_wait: Some(wait_ms), leading: true, ..PolicyConfig::debounce(wait_ms) }
    }

    /// lodash's rule: raise `max_wait` to at least the longest `wait`
    /// (lodash-compatible APIs apply this instead of rejecting).
    pub fn clamp_max_wait(mut self) -> Self {
        self.max_wait = self.wait.raise_max_wait(self.max_wait);
        self
    }

    /// Check every field and make the policy.
    pub fn build(self) -> Result<Policy, PolicyError> {
        check_timing(
            &self.wait,
            self.max_wait,
            &[
                ("retry.base_ms", Some(self.retry.base_ms)),
                ("retry.cap_ms", Some(self.retry.cap_ms)),
                ("run_timeout", self.run_timeout),
            ],
        )?;
        if self.max_batch == Some(0) {
            return Err(PolicyError::ZeroMaxBatch);
        }
        if self.retry.max_attempts == 0 {
            return Err(PolicyError::ZeroMaxAttempts);
        }
        if self.retry.base_ms > self.retry.cap_ms {
            return Err(PolicyError::RetryBaseAboveCap { base_ms: self.retry.base_ms, cap_ms: self.retry.cap_ms });
        }
        if self.run_timeout == Some(0) {
            return Err(PolicyError::ZeroRunTimeout);
        }
        Ok(Policy(self))
    }
}

/// lodash's part of the rules: `wait`, `max_wait` and `more` durations in
/// range, a valid adaptive wait, `max_wait` at least the longest wait.
pub(crate) fn check_timing(
    wait: &Wait,
    max_wait: Option<u64>,
    more: &[(&'static str, Option<u64>)],
) -> Result<(), PolicyError> {
    let too_large = |field, value: Option<u64>| match value.filter(|v| *v > MAX_DURATION_MS) {
        Some(value) => Err(PolicyError::TooLarge { field, value }),
        None => Ok(()),
    };
    too_large("wait", Some(wait.longest()))?;
    too_large("max_wait", max_wait)?;
    for &(field, value) in more {
        too_large(field, value)?;
    }
    if let Wait::Auto(a) = wait {
        check_auto(a)?;
    }
    match max_wait {
        Some(max_wait) if max_wait < wait.longest() => {
            Err(PolicyError::MaxWaitBelowWait { max_wait, wait: wait.longest() })
        }
        _ => Ok(()),
    }
}

/// An adaptive wait's own rules. (Here rather than on [`Adaptive`], so that
/// `adaptive` needs nothing from this module.)
fn check_auto(a: &Adaptive) -> Result<(), PolicyError> {
    if a.factor_percent == 0 {
        return Err(PolicyError::AutoZeroFactor);
    }
    if a.min_ms > a.max_ms {
        return Err(PolicyError::AutoMinAboveMax { min_ms: a.min_ms, max_ms: a.max_ms });
    }
    if !(a.min_ms..=a.max_ms).contains(&a.initial_ms) {
        return Err(PolicyError::AutoInitialOutOfRange { initial_ms: a.initial_ms });
    }
    Ok(())
}

/// A checked policy, shared by every driver. Make one with [`PolicyConfig::build`].
///
/// Serialises as its [`PolicyConfig`]; deserialising validates again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PolicyConfig", into = "PolicyConfig")]
pub struct Policy(PolicyConfig);

impl Policy {
    /// The policy's fields.
    pub fn config(&self) -> &PolicyConfig {
        &self.0
    }

    /// True when some accepted events can end without a fire (`trailing` off):
    /// fine for lodash-style UI callbacks, wrong for durable delivery.
    pub fn drops_events(&self) -> bool {
        !self.0.trailing
    }
}

impl TryFrom<PolicyConfig> for Policy {
    type Error = PolicyError;
    fn try_from(config: PolicyConfig) -> Result<Self, Self::Error> {
        config.build()
    }
}

impl From<Policy> for PolicyConfig {
    fn from(policy: Policy) -> Self {
        policy.0
    }
}

/// Why a [`PolicyConfig`] was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyError {
    /// A duration is over [`MAX_DURATION_MS`].
    TooLarge {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// `max_wait` is below the (longest) `wait`; lodash would raise it
    /// ([`PolicyConfig::clamp_max_wait`]).
    MaxWaitBelowWait {
        /// The `max_wait` given.
        max_wait: u64,
        /// The longest `wait`.
        wait: u64,
    },
    /// `max_batch` is 0.
    ZeroMaxBatch,
    /// `retry.max_attempts` is 0 (1 means no retries).
    ZeroMaxAttempts,
    /// `retry.base_ms` is above `retry.cap_ms`.
    RetryBaseAboveCap {
        /// The base.
        base_ms: u64,
        /// The cap.
        cap_ms: u64,
    },
    /// `run_timeout` is 0.
    ZeroRunTimeout,
    /// Adaptive wait: `min_ms` is above `max_ms`.
    AutoMinAboveMax {
        /// The minimum.
        min_ms: u64,
        /// The maximum.
        max_ms: u64,
    },
    /// Adaptive wait: `initial_ms` is outside `[min_ms, max_ms]`.
    AutoInitialOutOfRange {
        /// The initial wait.
        initial_ms: u64,
    },
    /// Adaptive wait: `factor_percent` is 0.
    AutoZeroFactor,
    /// [`Lite`](crate::Lite) runs lodash's timing alone: no `max_batch`,
    /// retries or `run_timeout`.
    NotInLite,
}

impl PolicyError {
    /// The rule broken, without the values: static text (no formatting
    /// machinery needed, for drivers where every byte is shipped).
    pub fn rule(&self) -> &'static str {
        match self {
            PolicyError::TooLarge { .. } => "a duration is over the limit of 2^53 - 1 ms",
            PolicyError::MaxWaitBelowWait { .. } => "max_wait must be at least wait",
            PolicyError::ZeroMaxBatch => "max_batch must be at least 1",
            PolicyError::ZeroMaxAttempts => "retry.max_attempts must be at least 1 (1 = no retries)",
            PolicyError::RetryBaseAboveCap { .. } => "retry.base_ms must not exceed retry.cap_ms",
            PolicyError::ZeroRunTimeout => "run_timeout must be at least 1 ms",
            PolicyError::AutoMinAboveMax { .. } => "auto wait: min_ms must not exceed max_ms",
            PolicyError::AutoInitialOutOfRange { .. } => "auto wait: initial_ms must lie within [min_ms, max_ms]",
            PolicyError::AutoZeroFactor => "auto wait: factor_percent must be at least 1",
            PolicyError::NotInLite => "the lite engine has no max_batch, retries or run_timeout",
        }
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::TooLarge { field, value } => {
                write!(f, "{field} = {value} ms is over the limit of {MAX_DURATION_MS} ms")
            }
            PolicyError::MaxWaitBelowWait { max_wait, wait } => {
                write!(f, "max_wait ({max_wait} ms) must be at least wait ({wait} ms)")
            }
            PolicyError::ZeroMaxBatch => f.write_str("max_batch must be at least 1"),
            PolicyError::ZeroMaxAttempts => f.write_str("retry.max_attempts must be at least 1 (1 = no retries)"),
            PolicyError::RetryBaseAboveCap { base_ms, cap_ms } => {
                write!(f, "retry.base_ms ({base_ms} ms) must not exceed retry.cap_ms ({cap_ms} ms)")
            }
            PolicyError::ZeroRunTimeout => f.write_str("run_timeout must be at least 1 ms"),
            PolicyError::AutoMinAboveMax { min_ms, max_ms } => {
                write!(f, "auto wait: min_ms ({min_ms}) must not exceed max_ms ({max_ms})")
            }
            PolicyError::AutoInitialOutOfRange { initial_ms } => {
                write!(f, "auto wait: initial_ms ({initial_ms}) must lie within [min_ms, max_ms]")
            }
            PolicyError::AutoZeroFactor => f.write_str("auto wait: factor_percent must be at least 1"),
            PolicyError::NotInLite => f.write_str(self.rule()),
        }
    }
}

impl core::error::Error for PolicyError {}
