//! [`Fact`]: one structured log line's content — an event name and its
//! fields — as the logic produces it; whoever writes it adds the context
//! (the key's object adds topic and key). Written as one JSON line:
//! `{"lull": event, …context, …fields}`.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// Facts the key's timeline keeps and the Worker's log does not get: one per
/// accepted event, one per window fired, and one per window queued behind a
/// delivery (on a hot key, every window). A log line per event cost more
/// than anything else on the per-event path (about 8% of the Worker's CPU in
/// a profile of one hot key), and a second line per window about as much as
/// a window's own work where each event is a window. A delivery attempt that
/// succeeded is kept in the timeline only too ([`Fact::logged`]): the log
/// gets what needs a look (failed attempts, retries, dead letters, errors).
pub(crate) const TIMELINE_ONLY: &[&str] = &["accept", "fire", "queued"];

/// What happened, with its fields (a JSON object).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fact {
    /// The event's name (`accept`, `fire`, `deliver`, `queue_ack`, …).
    pub event: &'static str,
    /// Its fields.
    pub fields: Map<String, Value>,
}

impl Fact {
    /// A fact of `event` with `fields` (an object; anything else counts as none).
    pub(crate) fn new(event: &'static str, fields: Value) -> Fact {
        let fields = match fields {
            Value::Object(fields) => fields,
            _ => Map::new(),
        };
        Fact { event, fields }
    }

    /// The `error` fact of a private error (its detail is the operator's
    /// only: [`ApiError::is_private`]) answered under `request_id`: the id,
    /// the code and the detail. `None` for the caller's own mistakes.
    pub(crate) fn error(error: &ApiError, request_id: &str) -> Option<Fact> {
        let fields = serde_json::json!({"request_id": request_id, "code": error.code(), "error": error.message()});
        error.is_private().then(|| Fact::new("error", fields))
    }

    /// Whether the Worker's log gets it: all but [`TIMELINE_ONLY`] facts and
    /// `deliver` facts of attempts that succeeded (`"ok": true`).
    pub(crate) fn logged(&self) -> bool {
        let delivered = self.event == "deliver" && self.fields.get("ok") == Some(&Value::Bool(true));
        !delivered && !TIMELINE_ONLY.contains(&self.event)
    }

    /// The JSON line, with `context` (name, value) pairs before the fields
    /// (a field of the same name as a context pair, or `lull`, is left out:
    /// each name appears once). Written straight into one buffer: no map is
    /// built per line (an accepted event's line is on the per-event path).
    pub(crate) fn line(&self, context: &[(&str, &str)]) -> String {
        let mut line = Vec::with_capacity(128);
        line.extend_from_slice(br#"{"lull":"#);
        push_json(&mut line, self.event);
        let taken = |name: &str| name == "lull" || context.iter().any(|(c, _)| *c == name);
        let fields = self.fields.iter().filter(|(name, _)| !taken(name));
        for (name, value) in context {
            push_pair(&mut line, name, *value);
        }
        for (name, value) in fields {
            push_pair(&mut line, name, value);
        }
        line.push(b'}');
        String::from_utf8(line).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// `,"name":value` onto the end of `line`.
fn push_pair(line: &mut Vec<u8>, name: &str, value: &(impl serde::Serialize + ?Sized)) {
    line.push(b',');
    push_json(line, name);
    line.push(b':');
    push_json(line, value);
}

/// `value` as JSON onto the end of `line` (`null` should it not serialize).
fn push_json(line: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    let before = line.len();
    if serde_json::to_writer(&mut *line, value).is_err() {
        line.truncate(before);
        line.extend_from_slice(b"null");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_fact_is_one_json_line_with_its_context() {
        let fact = Fact::new("fire", json!({"window": 3, "reason": "quiet"}));
        let line: Value = serde_json::from_str(&fact.line(&[("topic", "t"), ("key", "k")])).unwrap();
        assert_eq!(line, json!({"lull": "fire", "topic": "t", "key": "k", "window": 3, "reason": "quiet"}));
        assert_eq!(Fact::new("collected", json!(null)).line(&[]), r#"{"lull":"collected"}"#);
        // Each name once: the event and the context win over fields of the same name.
        let odd = Fact::new("x", json!({"lull": "y", "key": "other", "text": "a \"quoted\"\nline"}));
        assert_eq!(odd.line(&[("key", "k")]), r#"{"lull":"x","key":"k","text":"a \"quoted\"\nline"}"#);
        assert!(!fact.logged() && !Fact::new("accept", json!({})).logged());
        assert!(!Fact::new("queued", json!({"window": 4})).logged());
        assert!(Fact::new("deliver", json!({"ok": false, "outcome": "500"})).logged());
        assert!(!Fact::new("deliver", json!({"ok": true, "outcome": "200"})).logged());
    }
}
