//! lull's API client from the flags and their variables (`LULL_URL`, `LULL_TOKEN`).

use std::sync::Arc;

use lull_client::{Lull, RetryNotice, RetryPolicy};

use crate::cli::ApiFlags;
use crate::failure::Failure;

/// The client the flags describe; each retry's wait is told on stderr.
///
/// # Errors
/// A usage failure naming `LULL_URL (or --url)` or `LULL_TOKEN (or --token)`.
pub fn client(flags: &ApiFlags) -> Result<Lull, Failure> {
    let url = setting(flags.url.as_deref(), "LULL_URL", "--url")?;
    let token = setting(flags.token.as_deref(), "LULL_TOKEN", "--token")?;
    let lull =
        Lull::new(url, token).map_err(|e| Failure::usage(format!("{e} (LULL_URL or --url, LULL_TOKEN or --token)")))?;
    let policy =
        RetryPolicy { max_attempts: flags.max_attempts, max_elapsed: flags.max_time, ..RetryPolicy::default() };
    Ok(lull
        .with_retry(policy)
        .with_retry_observer(Arc::new(|notice: &RetryNotice<'_>| eprintln!("lull: {}", waiting(notice)))))
}

fn setting<'a>(value: Option<&'a str>, variable: &str, flag: &str) -> Result<&'a str, Failure> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v),
        Some(_) => Err(Failure::usage(format!("{variable} (or {flag}) is empty"))),
        None => Err(Failure::usage(format!("{variable} (or {flag}) is not set"))),
    }
}

/// One line about a wait between attempts.
fn waiting(notice: &RetryNotice<'_>) -> String {
    let why = if notice.from_retry_after { "Retry-After" } else { "backoff" };
    format!(
        "{}; waiting {:.1}s ({why}) before attempt {} of {}",
        notice.error,
        notice.wait.as_secs_f64(),
        notice.attempt + 1,
        notice.max_attempts
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn flags(url: Option<&str>, token: Option<&str>) -> ApiFlags {
        ApiFlags {
            url: url.map(str::to_string),
            token: token.map(str::to_string),
            max_attempts: 5,
            max_time: Duration::from_secs(90),
        }
    }

    #[test]
    fn a_missing_or_bad_setting_is_named() {
        assert_eq!(client(&flags(None, Some("t"))).unwrap_err().message, "LULL_URL (or --url) is not set");
        assert_eq!(client(&flags(Some("http://x"), None)).unwrap_err().message, "LULL_TOKEN (or --token) is not set");
        assert_eq!(
            client(&flags(Some("http://x"), Some(" "))).unwrap_err().message,
            "LULL_TOKEN (or --token) is empty"
        );
        let bad = client(&flags(Some("ftp://x"), Some("t"))).unwrap_err();
        assert!(bad.message.contains("LULL_URL or --url"), "{}", bad.message);
        assert!(client(&flags(Some("http://127.0.0.1:8787"), Some("t"))).is_ok());
    }
}
