//! Numbers as they cross: times and optional values.

/// A `performance.now()` reading as the engine's whole milliseconds
/// (negative and NaN read as 0; +Infinity and anything past 2^64 saturate).
pub(crate) fn ms(now: f64) -> u64 {
    if now > 0.0 { now as u64 } else { 0 }
}

/// An optional time or count as a JS number: `-1` for none.
pub(crate) fn opt(value: Option<u64>) -> f64 {
    value.map_or(-1.0, |v| v as f64)
}

/// A JS number as an optional duration: negative (or NaN) is none.
pub(crate) fn opt_ms(value: f64) -> Option<u64> {
    (value >= 0.0).then(|| ms(value))
}
