//! [`Isolate`]: what the objects one isolate runs (and its router) share — the copy of its
//! topics' target states ([`TargetCache`]) and the sums of what it counted
//! ([`Tally`]) — so neither costs a request per event or delivery. The shell
//! keeps one per isolate; a test gives each object its own, or one to several.

use crate::metrics::Tally;
use crate::target::TargetCache;

/// An isolate's shared copies: target states and metric sums.
#[derive(Debug, Default)]
pub struct Isolate {
    /// The topics' target states, as last heard.
    pub targets: TargetCache,
    /// What its objects counted, not yet handed to the topics' objects.
    pub tally: Tally,
}
