//! Adaptive wait (`wait = auto`): a quiet period learned from a key's own rhythm.

use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

/// How many recent gaps the estimate looks at.
pub const GAP_WINDOW: usize = 16;
/// Gaps needed before the estimate replaces `initial_ms`.
pub const MIN_GAPS: usize = 4;

/// Settings of a learned quiet period.
///
/// The engine keeps the last [`GAP_WINDOW`] gaps between a key's consecutive
/// events, ignoring gaps longer than `max_ms` (those are pauses between
/// bursts, not the rhythm within one). Once it has [`MIN_GAPS`] of them the
/// quiet period is `factor_percent`% of their **median**, clamped to
/// `[min_ms, max_ms]`; before that it is `initial_ms`. The median ignores up
/// to half the samples being outliers (a typist's thinking pause).
///
/// A fast typist (gaps ~100 ms) gets a short quiet period and sooner results;
/// a slow one (gaps ~350 ms) a longer one, instead of a request per keystroke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Adaptive {
    /// Quiet period as a percentage of the median gap (250 = 2.5×).
    pub factor_percent: u32,
    /// Shortest quiet period (ms).
    pub min_ms: u64,
    /// Longest quiet period (ms); longer gaps are not learned from.
    pub max_ms: u64,
    /// Quiet period until enough gaps are seen (ms).
    pub initial_ms: u64,
}

impl Default for Adaptive {
    /// 2.5 × median gap, clamped to 100..=1000 ms, 300 ms to start.
    fn default() -> Self {
        Adaptive { factor_percent: 250, min_ms: 100, max_ms: 1000, initial_ms: 300 }
    }
}

/// The gaps one key has shown, and the wait they give.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Gaps {
    /// Oldest first; at most [`GAP_WINDOW`] (a snapshot with more is trimmed at the next gap).
    recent: Vec<u64>,
}

impl Gaps {
    /// Learn from one gap; the quiet period the gaps now call for.
    pub(crate) fn learn(&mut self, gap: u64, settings: &Adaptive) -> u64 {
        self.observe(gap, settings);
        self.wait(settings)
    }

    /// Learn from one gap; gaps over `max_ms` are pauses and are skipped.
    fn observe(&mut self, gap: u64, settings: &Adaptive) {
        if gap > settings.max_ms {
            return;
        }
        while self.recent.len() >= GAP_WINDOW {
            self.recent.remove(0);
        }
        self.recent.push(gap);
    }

    /// The quiet period these gaps call for.
    fn wait(&self, settings: &Adaptive) -> u64 {
        match self.median() {
            None => settings.initial_ms,
            Some(median) => (median.saturating_mul(u64::from(settings.factor_percent)) / 100)
                .max(settings.min_ms)
                .min(settings.max_ms), // `clamp` would link a panic for min > max, which a checked policy rules out
        }
    }

    /// The median gap, once enough are known.
    pub(crate) fn median(&self) -> Option<u64> {
        if self.recent.len() < MIN_GAPS {
            return None;
        }
        // The gap that would sit at `len / 2` once sorted: at most GAP_WINDOW
        // gaps, so counting beats sorting — no allocation, and far smaller in
        // wasm than `sort_unstable` or an insertion sort.
        let k = self.recent.len() / 2;
        let count = |keep: &dyn Fn(u64) -> bool| self.recent.iter().filter(|&&g| keep(g)).count();
        self.recent.iter().copied().find(|&x| count(&|g| g < x) <= k && k < count(&|g| g <= x))
    }
}
