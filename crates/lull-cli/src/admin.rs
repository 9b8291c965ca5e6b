//! The admin commands: `lull status`, `lull dead-letters`, `lull token`.

use lull_client::{Lull, MintRequest, Page, TokenOp, TokenScope, defaults};
use serde_json::json;

use crate::cli::{Action, DeadLetterArgs, StatusArgs, TokenArgs};
use crate::failure::Failure;
use crate::output::Output;

/// Pages `list` reads at most (each up to 500 dead letters).
const MAX_PAGES: usize = 1_000;
/// `POST …/queue/dead-letters/retry` calls `replay` makes at most (each replays up to 100).
const MAX_REPLAY_CALLS: usize = 1_000;

/// Run `lull status`.
pub async fn status(lull: &Lull, args: StatusArgs, out: Output) -> Result<(), Failure> {
    match &args.key {
        Some(key) => out.print(&lull.key_status(&args.topic, key).await?),
        None => out.print(&lull.queue_status(&args.topic).await?),
    }
}

/// `[KEY] ACTION` from the positional words.
fn key_and_action(rest: &[String]) -> Result<(Option<&str>, Action), Failure> {
    let (key, action) = match rest {
        [action] => (None, action),
        [key, action] => (Some(key.as_str()), action),
        _ => return Err(Failure::usage("lull dead-letters TOPIC [KEY] list|replay|discard")),
    };
    let action = <Action as clap::ValueEnum>::from_str(action, false)
        .map_err(|_| Failure::usage(format!("{action:?} is not an action: list, replay or discard")))?;
    Ok((key, action))
}

/// Run `lull dead-letters`.
pub async fn dead_letters(lull: &Lull, args: DeadLetterArgs, out: Output) -> Result<(), Failure> {
    let (key, action) = key_and_action(&args.rest)?;
    let topic = args.topic.as_str();
    let full_page = Page { after: None, limit: Some(defaults::PAGE_MAX) };
    let need_id = || Failure::usage("discard needs --window (the API forgets one dead letter at a time)");
    match (key, action) {
        (Some(key), Action::List) => {
            let (mut letters, mut page, mut count) = (Vec::new(), full_page, 0);
            for _ in 0..MAX_PAGES {
                let got = lull.key_dead_letters(topic, key, page).await?;
                count = got.count;
                letters.extend(got.dead_letters);
                match got.next_after {
                    Some(after) => page.after = Some(after),
                    None => break,
                }
            }
            out.print(&json!({"count": count, "dead_letters": letters}))
        }
        (Some(key), Action::Replay) => match args.window {
            Some(window) => out.print(&lull.replay_key_dead_letter(topic, key, window).await?),
            None => out.print(&lull.replay_key_dead_letters(topic, key).await?),
        },
        (Some(key), Action::Discard) => {
            out.print(&lull.discard_key_dead_letter(topic, key, args.window.ok_or_else(need_id)?).await?)
        }
        (None, Action::List) => {
            let (mut letters, mut page, mut count, mut bytes) = (Vec::new(), full_page, 0, 0);
            for _ in 0..MAX_PAGES {
                let got = lull.queue_dead_letters(topic, page).await?;
                (count, bytes) = (got.count, got.bytes);
                letters.extend(got.dead_letters);
                match got.next_after {
                    Some(after) => page.after = Some(after),
                    None => break,
                }
            }
            out.print(&json!({"count": count, "bytes": bytes, "dead_letters": letters}))
        }
        (None, Action::Replay) => match args.window {
            Some(id) => out.print(&lull.replay_queue_dead_letter(topic, id).await?),
            None => {
                let (mut replayed, mut remaining) = (0, 0);
                for _ in 0..MAX_REPLAY_CALLS {
                    let got = lull.replay_queue_dead_letters(topic).await?;
                    replayed += got.replayed;
                    remaining = got.remaining;
                    if got.remaining == 0 || got.replayed == 0 {
                        break;
                    }
                }
                out.print(&json!({"replayed": replayed, "remaining": remaining}))
            }
        },
        (None, Action::Discard) => {
            out.print(&lull.discard_queue_dead_letter(topic, args.window.ok_or_else(need_id)?).await?)
        }
    }
}

/// Run `lull token`.
pub async fn token(lull: &Lull, args: TokenArgs, out: Output) -> Result<(), Failure> {
    let scope = match (args.key, args.key_prefix) {
        (Some(key), None) => TokenScope::Key(key),
        (None, Some(prefix)) => TokenScope::Prefix(prefix),
        _ => return Err(Failure::usage("lull token needs one of --key or --key-prefix")),
    };
    let mut request = MintRequest::new(scope);
    if let Some(ttl) = args.ttl {
        if ttl.subsec_nanos() != 0 || ttl.is_zero() {
            return Err(Failure::usage(format!("--ttl is whole seconds, at least 1s (not {ttl:?})")));
        }
        let secs = u32::try_from(ttl.as_secs()).map_err(|_| Failure::usage("--ttl is too long"))?;
        request.ttl_s = Some(secs);
    }
    for op in args.ops.iter().map(|op| op.trim()).filter(|op| !op.is_empty()) {
        match TokenOp::parse(op) {
            TokenOp::Other(_) => {
                return Err(Failure::usage(format!("--ops: {op:?} is not one of events, flush, cancel")));
            }
            known => request.ops.push(known),
        }
    }
    request.events_per_minute = args.events_per_minute;
    request.sub = args.sub;
    let minted = lull.mint_client_token(&args.topic, &request).await?;
    if args.json {
        return out.print(&minted);
    }
    println!("{}", minted.token);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_and_action_from_one_or_two_words() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(key_and_action(&words(&["list"])).unwrap(), (None, Action::List));
        assert_eq!(key_and_action(&words(&["doc-1", "replay"])).unwrap(), (Some("doc-1"), Action::Replay));
        assert!(key_and_action(&words(&["doc-1", "drop"])).unwrap_err().message.contains("not an action"));
    }
}
