//! Answers on stdout as JSON: indented, or one line with `--compact`.

use serde::Serialize;

use crate::failure::Failure;

/// How answers are written.
#[derive(Clone, Copy, Debug)]
pub struct Output {
    /// One line per answer.
    pub compact: bool,
}

impl Output {
    /// Print `value` as JSON on stdout.
    ///
    /// # Errors
    /// A failure if it does not serialise (never for the API's answers).
    pub fn print<T: Serialize + ?Sized>(&self, value: &T) -> Result<(), Failure> {
        let text = if self.compact { serde_json::to_string(value) } else { serde_json::to_string_pretty(value) };
        let text = text.map_err(|e| Failure { code: crate::exit::UNAVAILABLE, message: format!("printing: {e}") })?;
        println!("{text}");
        Ok(())
    }
}
