//! What lull-edge answers a send: an event stored ([`Accepted`]), and each
//! event's outcome in a batch ([`BatchResult`]).

use serde::{Deserialize, Serialize};

use crate::code::ErrorCode;

/// An event stored: the window it joined and its sequence number (`202`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    /// The window's id (from 1 per key).
    pub window: u64,
    /// The event's sequence number (from 1 per key).
    pub seq: u64,
}

/// One event's outcome in a batch's answer, in the batch's order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WireResult", into = "WireResult")]
pub enum BatchResult {
    /// Stored (`202`).
    Accepted(Accepted),
    /// Refused with its key's other events (nothing of that key was stored).
    Refused(BatchRefusal),
}

/// Why a batch's event was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchRefusal {
    /// The status it would have had alone.
    pub status: u16,
    /// The error's code.
    pub code: ErrorCode,
    /// The API's sentence for people.
    pub message: String,
    /// The worker's log line (`-` before the key's object answered), if any.
    pub request_id: Option<String>,
}

#[derive(Clone, Serialize, Deserialize)]
struct WireResult {
    status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<WireError>,
}

#[derive(Clone, Serialize, Deserialize)]
struct WireError {
    code: ErrorCode,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
}

impl TryFrom<WireResult> for BatchResult {
    type Error = String;

    fn try_from(wire: WireResult) -> Result<Self, String> {
        match wire {
            WireResult { status: 202, window: Some(window), seq: Some(seq), .. } => {
                Ok(BatchResult::Accepted(Accepted { window, seq }))
            }
            WireResult { status, error: Some(e), .. } => Ok(BatchResult::Refused(BatchRefusal {
                status,
                code: e.code,
                message: e.message,
                request_id: e.request_id,
            })),
            WireResult { status, .. } => {
                Err(format!("a result of status {status} without its window and seq or error"))
            }
        }
    }
}

impl From<BatchResult> for WireResult {
    fn from(result: BatchResult) -> Self {
        match result {
            BatchResult::Accepted(a) => {
                WireResult { status: 202, window: Some(a.window), seq: Some(a.seq), error: None }
            }
            BatchResult::Refused(r) => WireResult {
                status: r.status,
                window: None,
                seq: None,
                error: Some(WireError { code: r.code, message: r.message, request_id: r.request_id }),
            },
        }
    }
}
