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

/// The gaps one key has shown, and the wait they give. Held in place (no
/// heap): the lite engine carries it, and a page's debounce links no allocator
/// for it. A snapshot holds it as `{"recent": [gap, …]}`, oldest first.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(from = "GapsForm", into = "GapsForm")]
pub(crate) struct Gaps {
    /// A ring: the first `len` slots are the gaps (the rest are 0), and once
    /// all are taken the oldest is at `next`, where the newest goes next.
    recent: [u64; GAP_WINDOW],
    len: usize,
    next: usize,
}

/// [`Gaps`] as a snapshot writes it.
#[derive(Serialize, Deserialize)]
struct GapsForm {
    recent: Vec<u64>,
}

impl From<GapsForm> for Gaps {
    /// The last [`GAP_WINDOW`] gaps of a snapshot (one never holds more).
    fn from(form: GapsForm) -> Gaps {
        let mut gaps = Gaps::default();
        for gap in form.recent {
            gaps.push(gap);
        }
        gaps
    }
}

impl From<Gaps> for GapsForm {
    fn from(gaps: Gaps) -> GapsForm {
        GapsForm { recent: gaps.oldest_first().copied().collect() }
    }
}

/// Equal when they hold the same gaps in the same order (wherever the ring starts).
impl PartialEq for Gaps {
    fn eq(&self, other: &Gaps) -> bool {
        self.oldest_first().eq(other.oldest_first())
    }
}

impl Eq for Gaps {}

impl Gaps {
    /// Learn from one gap; the quiet period the gaps now call for.
    pub(crate) fn learn(&mut self, gap: u64, settings: &Adaptive) -> u64 {
        if gap <= settings.max_ms {
            self.push(gap); // longer gaps are pauses between bursts: skipped
        }
        self.wait(settings)
    }

    /// Keep `gap` as the newest, in the oldest's place once [`GAP_WINDOW`] are kept.
    /// (No loop to unroll, no index to check: a few instructions in wasm.)
    fn push(&mut self, gap: u64) {
        if let Some(slot) = self.recent.get_mut(self.next) {
            *slot = gap;
        }
        self.next = (self.next + 1) % GAP_WINDOW;
        self.len = (self.len + 1).min(GAP_WINDOW);
    }

    /// The gaps kept, oldest first.
    fn oldest_first(&self) -> impl Iterator<Item = &u64> {
        let (newer, older) = self.known().split_at(self.next.min(self.len));
        older.iter().chain(newer)
    }

    /// The gaps kept, in ring order (the median needs no other).
    fn known(&self) -> &[u64] {
        self.recent.get(..self.len).unwrap_or(&[])
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
        let gaps = self.known();
        if gaps.len() < MIN_GAPS {
            return None;
        }
        // The gap that would sit at `len / 2` once sorted: at most GAP_WINDOW
        // gaps, so counting beats sorting — no allocation, and far smaller in
        // wasm than `sort_unstable` or an insertion sort.
        let k = gaps.len() / 2;
        gaps.iter().copied().find(|&x| {
            // How many gaps sort before `x`, and how many with it.
            let (below, with) =
                gaps.iter().fold((0, 0), |(b, w), &g| (b + usize::from(g < x), w + usize::from(g == x)));
            below <= k && k < below + with
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_keeps_the_newest_gaps_and_a_snapshot_reads_as_it_did() {
        let settings = Adaptive::default();
        let mut gaps = Gaps::default();
        for gap in 1..=20 {
            gaps.learn(gap * 10, &settings);
        }
        gaps.learn(settings.max_ms + 1, &settings); // a pause: not learned
        let json = serde_json::to_string(&gaps).unwrap();
        assert_eq!(json, r#"{"recent":[50,60,70,80,90,100,110,120,130,140,150,160,170,180,190,200]}"#);
        assert_eq!(serde_json::from_str::<Gaps>(&json).unwrap(), gaps);
        // Median of the 16 newest: the 9th smallest (index len / 2).
        assert_eq!(gaps.median(), Some(130));
        // A snapshot with more than the window: its newest are kept, in order.
        let long: Gaps = serde_json::from_str(r#"{"recent":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18]}"#).unwrap();
        assert_eq!(serde_json::to_string(&long).unwrap(), r#"{"recent":[3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18]}"#);
        let few: Gaps = serde_json::from_str(r#"{"recent":[40,10,30]}"#).unwrap();
        assert_eq!((few.known(), few.median()), (&[40, 10, 30][..], None));
        assert_eq!(serde_json::to_string(&few).unwrap(), r#"{"recent":[40,10,30]}"#);
    }
}
