//! The numbers the JS drivers (`js/`) copy from this crate, read from their
//! source and checked against the Rust side, so that a drift fails here
//! rather than in a browser. Native only: wasm-bindgen-test's runner does
//! not run plain `#[test]`s.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use lull_core::{MAX_DURATION_MS, PolicyError};

use crate::policy;

const OPTIONS_JS: &str = include_str!("../js/options.js");

/// Every `const NAME = <integer>;` of `js` (exported or not) whose name is
/// upper-case; such a constant holding anything but an integer fails the test
/// (pin it here first).
fn constants<'a>(file: &str, js: &'a str) -> Vec<(&'a str, i64)> {
    js.lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = line.strip_prefix("export ").unwrap_or(line);
            let (name, value) = line.strip_prefix("const ")?.split_once(" = ")?;
            if !name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
                return None;
            }
            let value = value.strip_suffix(';').unwrap_or(value);
            let number = value.parse().unwrap_or_else(|_| panic!("{file}: {name} = {value}: not an integer"));
            Some((name, number))
        })
        .collect()
}

/// `DeadLettered` → `DEAD_LETTERED`.
fn screaming(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Every refusal `create` can answer, one per rule.
fn policy_errors() -> [PolicyError; 10] {
    [
        PolicyError::TooLarge { field: "wait", value: 0 },
        PolicyError::MaxWaitBelowWait { max_wait: 0, wait: 0 },
        PolicyError::ZeroMaxBatch,
        PolicyError::ZeroMaxAttempts,
        PolicyError::RetryBaseAboveCap { base_ms: 0, cap_ms: 0 },
        PolicyError::ZeroRunTimeout,
        PolicyError::AutoMinAboveMax { min_ms: 0, max_ms: 0 },
        PolicyError::AutoInitialOutOfRange { initial_ms: 0 },
        PolicyError::AutoZeroFactor,
        PolicyError::NotInLite,
    ]
}

#[test]
fn the_drivers_constants_are_the_engines() {
    #[cfg(not(feature = "lite"))]
    engine_js_kinds();
    lite_js_steps();

    // options.js: its duration limit and out-of-memory answer are the engine's.
    let pinned = [("MAX_MS", MAX_DURATION_MS as i64), ("UNUSABLE", i64::from(policy::UNUSABLE))];
    let options = constants("options.js", OPTIONS_JS);
    assert!(!options.is_empty(), "options.js: no constants found (has their form changed?)");
    for (name, value) in options {
        let (_, rust) =
            pinned.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("options.js: pin {name} here"));
        assert_eq!(value, *rust, "options.js: {name}");
    }

    // options.js: each refusal code it names (`handle === -N ? 'text'`) is the
    // code of the rule whose text it shows.
    let mut named = 0;
    for (_, after) in OPTIONS_JS.match_indices("handle === -").map(|(at, m)| OPTIONS_JS.split_at(at + m.len())) {
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let code: i32 =
            after[..digits].parse().unwrap_or_else(|_| panic!("options.js: a refusal code, not {after:.20}"));
        let text = after[digits..].strip_prefix(" ? '").and_then(|t| t.split_once('\'')).map(|(t, _)| t);
        let text = text.unwrap_or_else(|| panic!("options.js: refusal -{code} with no text"));
        let error = policy_errors()
            .into_iter()
            .find(|e| policy::refusal(e) == -code)
            .unwrap_or_else(|| panic!("options.js: -{code} is no refusal code"));
        assert_eq!(text, error.rule(), "options.js: the text for refusal -{code}");
        named += 1;
    }
    assert!(named > 0, "options.js: no refusal code found (has its form changed?)");
}

/// engine.js: what `keyed_poll` answers, named as [`Kind`](crate::actions::Kind) is.
#[cfg(not(feature = "lite"))]
fn engine_js_kinds() {
    use crate::actions::Kind;

    let kinds =
        [Kind::None, Kind::Fire, Kind::Dropped, Kind::DeadLettered, Kind::RetryScheduled, Kind::TimedOut, Kind::Queued];
    // A new kind must be listed above (this match stops compiling).
    let _ = |kind: Kind| match kind {
        Kind::None
        | Kind::Fire
        | Kind::Dropped
        | Kind::DeadLettered
        | Kind::RetryScheduled
        | Kind::TimedOut
        | Kind::Queued => (),
    };
    let engine = constants("engine.js", include_str!("../js/engine.js"));
    assert!(!engine.is_empty(), "engine.js: no constants found (has their form changed?)");
    for (name, value) in engine {
        let kind = kinds
            .iter()
            .find(|k| screaming(&format!("{k:?}")) == name)
            .unwrap_or_else(|| panic!("engine.js: {name} names no actions::Kind"));
        assert_eq!(value, *kind as u32 as i64, "engine.js: {name}");
    }
    // The drivers' poll loops stop at a literal 0.
    assert_eq!(Kind::None as u32, 0);
}

/// lite.js: what `step` does and what `read` answers, named as
/// [`Step`](crate::steps::Step) and [`Read`](crate::steps::Read) are; each one named.
fn lite_js_steps() {
    use crate::steps::{Read, Step};

    let numbers: Vec<(String, u32)> = Step::ALL
        .iter()
        .map(|s| (screaming(&format!("{s:?}")), *s as u32))
        .chain(Read::ALL.iter().map(|r| (screaming(&format!("{r:?}")), *r as u32)))
        .collect();
    let lite = constants("lite.js", include_str!("../js/lite.js"));
    for (name, value) in &lite {
        let (_, rust) =
            numbers.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("lite.js: {name} names no Step or Read"));
        assert_eq!(*value, i64::from(*rust), "lite.js: {name}");
    }
    for (name, _) in &numbers {
        assert!(lite.iter().any(|(n, _)| n == name), "lite.js: {name} is missing");
    }
    for step in Step::ALL {
        assert_eq!(Step::from_u32(step as u32), Some(step));
    }
    for read in Read::ALL {
        assert_eq!(Read::from_u32(read as u32), Some(read));
    }
    assert_eq!((Step::from_u32(5), Read::from_u32(3)), (None, None));
}
