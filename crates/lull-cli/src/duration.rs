//! Durations as people write them on a command line: `500ms`, `5s`, `2m`, `1h`.

use std::time::Duration;

/// `text` as a duration: a whole number and a unit (`ms`, `s`, `m`, `h`).
///
/// # Errors
/// A sentence saying what is wrong and what is accepted.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let shape = || format!("{text:?} is not a duration: write a whole number and a unit, e.g. 500ms, 5s, 2m, 1h");
    if number.is_empty() {
        return Err(shape());
    }
    let n: u64 = number.parse().map_err(|_| format!("{text:?} is too large a duration"))?;
    let duration = match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs),
        "h" => n.checked_mul(3_600).map(Duration::from_secs),
        "" => return Err(format!("{text:?} has no unit: write e.g. {n}s or {n}ms")),
        _ => return Err(shape()),
    };
    duration.ok_or_else(|| format!("{text:?} is too large a duration"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse(" 2m "), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3_600)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn bad_input_says_what_is_wrong() {
        assert!(parse("5").unwrap_err().contains("no unit"));
        for bad in ["", "s", "5x", "1.5s", "-1s", "5 s", "5sec"] {
            assert!(parse(bad).unwrap_err().contains("not a duration"), "{bad:?}");
        }
        assert!(parse("99999999999999999999s").unwrap_err().contains("too large"));
        assert!(parse(&format!("{}h", u64::MAX / 60)).unwrap_err().contains("too large"));
    }
}
