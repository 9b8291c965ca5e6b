//! [`Fact`]: one structured log line's content — an event name and its
//! fields — as the logic produces it; whoever writes it adds the context
//! (the key's object adds topic and key). Written as one JSON line:
//! `{"lull": event, …context, …fields}`.

use serde_json::{Map, Value};

/// Facts the key's timeline keeps and the Worker's log does not get: one per
/// accepted event, and one per window fired. A log line per event cost more
/// than anything else on the per-event path (about 8% of the Worker's CPU in
/// a profile of one hot key), and a second line per window about as much as
/// a window's own work where each event is a window. A delivery attempt that
/// succeeded is kept in the timeline only too ([`Fact::logged`]): the log
/// gets what needs a look (failed attempts, retries, dead letters, errors).
pub const TIMELINE_ONLY: &[&str] = &["accept", "fire"];

/// What happened, with its fields (a JSON object).
#[derive(Clone, Debug, PartialEq)]
pub struct Fact {
    /// The event's name (`accept`, `fire`, `deliver`, `queue_ack`, …).
    pub event: &'static str,
    /// Its fields.
    pub fields: Map<String, Value>,
}

impl Fact {
    /// A fact of `event` with `fields` (an object; anything else counts as none).
    pub fn new(event: &'static str, fields: Value) -> Fact {
        let fields = match fields {
            Value::Object(fields) => fields,
            _ => Map::new(),
        };
        Fact { event, fields }
    }

    /// Whether the Worker's log gets it: all but [`TIMELINE_ONLY`] facts and
    /// `deliver` facts of attempts that succeeded (`"ok": true`).
    pub fn logged(&self) -> bool {
        let delivered = self.event == "deliver" && self.fields.get("ok") == Some(&Value::Bool(true));
        !delivered && !TIMELINE_ONLY.contains(&self.event)
    }

    /// The JSON line, with `context` (name, value) pairs before the fields.
    pub fn line(&self, context: &[(&str, &str)]) -> String {
        let mut line = Map::new();
        line.insert("lull".into(), Value::from(self.event));
        for (name, value) in context {
            line.insert((*name).into(), Value::from(*value));
        }
        line.extend(self.fields.clone());
        Value::Object(line).to_string()
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
        assert!(!fact.logged() && !Fact::new("accept", json!({})).logged());
        assert!(Fact::new("deliver", json!({"ok": false, "outcome": "500"})).logged());
        assert!(!Fact::new("deliver", json!({"ok": true, "outcome": "200"})).logged());
    }
}
