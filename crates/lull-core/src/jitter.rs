//! The retry jitter source: a seeded SplitMix64 the driver seeds once.
//!
//! Kept inside the state (and its snapshot) so a restored engine draws the
//! same delays it would have drawn without stopping.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Jitter {
    state: u64,
}

impl Jitter {
    pub(crate) fn new(seed: u64) -> Self {
        Jitter { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw from `0..=ceiling` ("full jitter").
    pub(crate) fn up_to(&mut self, ceiling: u64) -> u64 {
        match ceiling.checked_add(1) {
            Some(n) => self.next_u64() % n,
            None => self.next_u64(),
        }
    }
}
