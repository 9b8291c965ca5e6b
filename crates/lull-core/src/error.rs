//! Errors for driver calls that name a window the engine does not hold.
//! A refused call changes nothing.

use core::fmt;

use crate::action::WindowId;

/// `run_succeeded` / `run_failed` named a window that is not running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunError {
    /// No run of this window is in flight: it already ended, timed out, was
    /// superseded, is waiting for a retry, or never fired.
    NotInFlight(WindowId),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::NotInFlight(w) => write!(f, "window {w} has no run in flight"),
        }
    }
}

impl core::error::Error for RunError {}

/// `replay` / `discard` named a window that is not a dead letter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadLetterError {
    /// No dead letter has this window id.
    NotFound(WindowId),
}

impl fmt::Display for DeadLetterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeadLetterError::NotFound(w) => write!(f, "window {w} is not a dead letter"),
        }
    }
}

impl core::error::Error for DeadLetterError {}
