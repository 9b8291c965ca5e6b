//! Policies as they cross: a few numbers, checked by lull-core. lodash's
//! option reading (`toNumber`, truthiness, defaults) is the driver's; the
//! rules a policy must obey are lull-core's.

#[cfg(not(feature = "lite"))]
use lull_core::PolicyConfig;
use lull_core::{Adaptive, PolicyError, Wait};

use crate::time::ms;
#[cfg(not(feature = "lite"))]
use crate::time::opt_ms;

/// lodash's timing: `wait` in ms (negative: `"auto"`, learned from the gaps),
/// `max_wait` in ms (negative: none; raised to the longest wait, as lodash
/// does), and the edges that fire.
#[cfg(not(feature = "lite"))]
pub(crate) fn timing(wait: f64, max_wait: f64, leading: u32, trailing: u32) -> PolicyConfig {
    let wait = lodash_wait(wait);
    PolicyConfig {
        max_wait: wait.raise_max_wait(opt_ms(max_wait)),
        wait,
        leading: leading != 0,
        trailing: trailing != 0,
        ..PolicyConfig::debounce(0)
    }
}

/// `wait` in ms, or `"auto"` (negative): learned from the gaps.
pub(crate) fn lodash_wait(wait: f64) -> Wait {
    if wait < 0.0 { Wait::Auto(Adaptive::default()) } else { Wait::Fixed(ms(wait)) }
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
