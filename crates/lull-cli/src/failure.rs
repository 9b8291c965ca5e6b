//! [`Failure`]: what ends a command early, with its exit code ([`crate::exit`]).

use lull_client::Error;

use crate::exit;

/// A command's failure: a message for stderr and the exit code.
#[derive(Debug, PartialEq, Eq)]
pub struct Failure {
    /// The exit code.
    pub code: i32,
    /// What went wrong, for people.
    pub message: String,
}

impl Failure {
    /// A usage or configuration failure ([`exit::USAGE`]).
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure { code: exit::USAGE, message: message.into() }
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        let code = match &error {
            Error::Config(_) | Error::Input(_) => exit::USAGE,
            e if e.is_transient() => exit::UNAVAILABLE,
            Error::Api(_) | Error::Cloudflare(_) | Error::PartialBatch { .. } => exit::REFUSED,
            Error::Transport(_) | Error::Decode { .. } => exit::UNAVAILABLE,
        };
        Failure { code, message: chain(&error) }
    }
}

/// `error` and its causes, `: `-separated.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let more = e.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use lull_client::{ApiError, ErrorCode};

    fn api(status: u16, code: ErrorCode) -> Error {
        Error::Api(ApiError { status, code, message: "m".into(), request_id: None, retry_after: None })
    }

    #[test]
    fn codes_follow_the_kind_of_failure() {
        assert_eq!(Failure::from(api(400, ErrorCode::MalformedJson)).code, exit::REFUSED);
        assert_eq!(Failure::from(api(401, ErrorCode::Unauthorized)).code, exit::REFUSED);
        assert_eq!(Failure::from(api(429, ErrorCode::TooManyEvents)).code, exit::UNAVAILABLE);
        assert_eq!(Failure::from(api(503, ErrorCode::Unavailable)).code, exit::UNAVAILABLE);
        assert_eq!(Failure::from(Error::Config("x".into())).code, exit::USAGE);
        assert_eq!(Failure::from(Error::Input("x".into())).code, exit::USAGE);
        let message = Failure::from(api(404, ErrorCode::UnknownTopic)).message;
        assert_eq!(message, "404 unknown_topic: m");
    }
}
