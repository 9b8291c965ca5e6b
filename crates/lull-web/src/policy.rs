//! The policy of the next engine created: set field by field, then built by
//! `create`. lodash's option reading (`toNumber`, truthiness, defaults) is
//! the driver's; the rules a policy must obey are lull-core's.

#[cfg(not(feature = "lite"))]
use lull_core::Overlap;
use lull_core::{Adaptive, Policy, PolicyConfig, PolicyError, Wait};
use spin::mutex::SpinMutex;

use crate::exports;
use crate::time::{ms, opt_ms};

static NEXT: SpinMutex<Option<PolicyConfig>> = SpinMutex::new(None);

fn set(f: impl FnOnce(&mut PolicyConfig)) {
    f(NEXT.lock().get_or_insert_with(|| PolicyConfig::debounce(0)))
}

exports! {
    /// Start a policy afresh: lodash's debounce defaults (trailing edge, no `maxWait`).
    pub fn config_reset() {
        *NEXT.lock() = Some(PolicyConfig::debounce(0));
    }

    /// The quiet period in ms; negative for `"auto"` (learned from the gaps).
    pub fn config_wait(wait: f64) {
        set(|c| c.wait = if wait < 0.0 { Wait::Auto(Adaptive::default()) } else { Wait::Fixed(ms(wait)) });
    }

    /// `maxWait` in ms (raised to the longest wait, as lodash does); negative for none.
    pub fn config_max_wait(max_wait: f64) {
        set(|c| c.max_wait = opt_ms(max_wait));
    }

    /// Fire on the leading and/or trailing edge.
    pub fn config_edges(leading: u32, trailing: u32) {
        set(|c| {
            c.leading = leading != 0;
            c.trailing = trailing != 0;
        });
    }

    #[cfg(not(feature = "lite"))]
    /// A newer run replaces a running one (1), or waits for it (0, the default).
    pub fn config_supersede(supersede: u32) {
        set(|c| c.overlap = if supersede != 0 { Overlap::Supersede } else { Overlap::Queue });
    }

    #[cfg(not(feature = "lite"))]
    /// A run not ended this many ms after it fired has failed; negative for none.
    pub fn config_timeout(timeout: f64) {
        set(|c| c.run_timeout = opt_ms(timeout));
    }
}

/// The policy set so far, validated; the next one starts from the defaults.
pub(crate) fn take() -> Result<Policy, PolicyError> {
    let config = NEXT.lock().take().unwrap_or_else(|| PolicyConfig::debounce(0));
    config.clamp_max_wait().build()
}

/// The code `create` answers for a refused policy: negative, one per rule
/// ([`PolicyError::rule`] says it; the drivers hold the same texts).
pub fn refusal(error: &PolicyError) -> i32 {
    -(match error {
        PolicyError::TooLarge { .. } => 1,
        PolicyError::MaxWaitBelowWait { .. } => 2,
        PolicyError::ZeroMaxBatch => 3,
        PolicyError::ZeroMaxAttempts => 4,
        PolicyError::RetryBaseAboveCap { .. } => 5,
        PolicyError::ZeroRunTimeout => 6,
        PolicyError::AutoMinAboveMax { .. } => 7,
        PolicyError::AutoInitialOutOfRange { .. } => 8,
        PolicyError::AutoZeroFactor => 9,
        PolicyError::NotInLite => 10,
    })
}

/// A seed from the driver's `Math.random() * 2^53`.
pub(crate) fn seed(seed: f64) -> u64 {
    ms(seed)
}
