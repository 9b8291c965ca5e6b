//! Policies as they cross: a few numbers, checked by lull-core. lodash's
//! option reading (`toNumber`, truthiness, defaults) is the driver's; the
//! rules a policy must obey are lull-core's.

#[cfg(not(feature = "lite"))]
use lull_core::PolicyConfig;
use lull_core::{Adaptive, PolicyError, Wait};

use crate::time::{ms, opt_ms};

/// lodash's timing as both engines' `create` read it, the one place its
/// numbers are decoded.
pub(crate) struct Timing {
    /// Fixed, or `"auto"` (learned from the gaps).
    pub(crate) wait: Wait,
    /// Raised to the longest wait, as lodash does.
    pub(crate) max_wait: Option<u64>,
    /// Fire on a burst's first call.
    pub(crate) leading: bool,
    /// Fire at a burst's end.
    pub(crate) trailing: bool,
}

/// lodash's timing from its numbers: `wait` in ms (negative: `"auto"`),
/// `max_wait` in ms (negative: none), and the edges that fire (non-zero: yes).
pub(crate) fn timing(wait: f64, max_wait: f64, leading: u32, trailing: u32) -> Timing {
    let wait = if wait < 0.0 { Wait::Auto(Adaptive::default()) } else { Wait::Fixed(ms(wait)) };
    Timing { max_wait: wait.raise_max_wait(opt_ms(max_wait)), wait, leading: leading != 0, trailing: trailing != 0 }
}

#[cfg(not(feature = "lite"))]
impl Timing {
    /// As a policy of the full engine: a trailing debounce with this timing.
    pub(crate) fn policy(self) -> PolicyConfig {
        let Timing { wait, max_wait, leading, trailing } = self;
        PolicyConfig { wait, max_wait, leading, trailing, ..PolicyConfig::debounce(0) }
    }
}

/// What `create` answers when it cannot keep one more engine: out of memory,
/// or a trap (out of memory mid-call) left the module unusable.
pub const UNUSABLE: i32 = -99;

/// The code `create` answers for a refused policy: negative, one per rule
/// ([`PolicyError::rule`] says it; the drivers hold the texts they can meet).
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
