//! The exit codes of `lull`, one list, shown in `lull --help`.

/// Done.
pub const OK: i32 = 0;
/// The API refused the request (bad input, a token outside its scope, …):
/// its message is printed, nothing was stored. A batch with refused events too.
pub const REFUSED: i32 = 1;
/// Usage or configuration: a bad flag, a missing setting, input refused
/// before anything was sent.
pub const USAGE: i32 = 2;
/// Unavailable: no answer, or still refused for load (429, 502–504) after the
/// retries, or an answer that could not be read.
pub const UNAVAILABLE: i32 = 3;
/// `lull pull`: a handler failed (its messages were retried).
pub const HANDLER_FAILED: i32 = 4;
/// `lull pull`: interrupted (a signal) before its budget ended.
pub const INTERRUPTED: i32 = 5;

/// The table `lull --help` ends with.
pub const HELP: &str = "\
Exit codes:
  0  done
  1  the API refused (its message on stderr; nothing stored); a batch with refused events
  2  usage or configuration error, or input refused before sending
  3  unavailable: no answer, or still 429/502/503/504 after the retries, or an unreadable answer
  4  lull pull: a handler failed
  5  lull pull: interrupted";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_lists_every_code_once() {
        for code in [OK, REFUSED, USAGE, UNAVAILABLE, HANDLER_FAILED, INTERRUPTED] {
            assert_eq!(HELP.matches(&format!("\n  {code}  ")).count(), 1, "{code}");
        }
    }
}
