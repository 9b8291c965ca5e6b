//! `lull send`: one event (JSON text, sent as given), or a batch (NDJSON).

use std::io::Read;

use lull_client::{BatchEvent, BatchResult, Error, Lull};
use serde_json::json;

use crate::cli::SendArgs;
use crate::exit;
use crate::failure::Failure;
use crate::output::Output;

/// Everything of `source` (`-`: stdin).
fn read(source: &str) -> Result<String, Failure> {
    if source == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| Failure::usage(format!("reading stdin: {e}")))?;
        return Ok(text);
    }
    std::fs::read_to_string(source).map_err(|e| Failure::usage(format!("reading {source}: {e}")))
}

/// The batch file's events: one JSON object per non-blank line.
pub fn parse_batch(text: &str) -> Result<Vec<BatchEvent>, Failure> {
    let mut events = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let event: BatchEvent = serde_json::from_str(line).map_err(|e| {
            Failure::usage(format!("batch line {}: not {{\"key\", \"event\", \"idempotency_key\"?}}: {e}", i + 1))
        })?;
        events.push(event);
    }
    if events.is_empty() {
        return Err(Failure::usage("the batch holds no event"));
    }
    Ok(events)
}

/// Run `lull send`.
pub async fn run(lull: &Lull, args: SendArgs, out: Output) -> Result<(), Failure> {
    if let Some(source) = &args.batch {
        return batch(lull, &args.topic, parse_batch(&read(source)?)?, out).await;
    }
    let key = args.key.as_deref().ok_or_else(|| Failure::usage("lull send needs a KEY (or --batch)"))?;
    let event = match args.event.as_deref() {
        None | Some("-") => read("-")?,
        Some(text) => text.to_string(),
    };
    let accepted = lull.send_json(&args.topic, key, &event, args.idempotency_key.as_deref()).await?;
    out.print(&accepted)
}

/// Post `events`, print every result; refused events make the exit code 1.
async fn batch(lull: &Lull, topic: &str, events: Vec<BatchEvent>, out: Output) -> Result<(), Failure> {
    let total = events.len();
    let (results, stopped) = match lull.send_batch(topic, &events).await {
        Ok(results) => (results, None),
        Err(Error::PartialBatch { results, error }) => (results, Some(Failure::from(*error))),
        Err(e) => return Err(e.into()),
    };
    let refused = results.iter().filter(|r| matches!(r, BatchResult::Refused(_))).count();
    out.print(&json!({ "results": results }))?;
    if let Some(mut failure) = stopped {
        failure.message = format!("{} of {total} events sent, then: {}", results.len(), failure.message);
        return Err(failure);
    }
    if refused > 0 {
        return Err(Failure {
            code: exit::REFUSED,
            message: format!("{refused} of {total} events refused (see the results)"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_lines_are_events_and_a_bad_line_is_named() {
        let events = parse_batch(
            "{\"key\":\"a\",\"event\":{\"n\":1}}\n\n{\"key\":\"b\",\"event\":2,\"idempotency_key\":\"k\"}\n",
        )
        .unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].event.get(), "{\"n\":1}");
        assert_eq!(events[1].idempotency_key.as_deref(), Some("k"));
        let bad = parse_batch("{\"key\":\"a\",\"event\":1}\n{\"key\":\"b\"}\n").unwrap_err();
        assert!(bad.message.starts_with("batch line 2:"), "{}", bad.message);
        assert!(parse_batch("{\"key\":\"a\",\"event\":1,\"colour\":2}").is_err(), "unknown fields refused");
        assert!(parse_batch("\n \n").is_err());
    }
}
