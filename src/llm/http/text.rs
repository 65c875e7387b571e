//! Small text helpers every wire format needs: quoting a server's reply in an error, reading
//! tool-call arguments as the model sent them, and printing numbers the way JSON readers
//! expect.

use serde_json::{json, Value};

/// Longest piece of a server's reply quoted in an error message, in characters.
pub(crate) const QUOTE_CHARS: usize = 1000;

/// At most `max` characters of `text`, with a marker when cut.
pub(crate) fn quote(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}… ({} bytes in all)", &text[..cut], text.len()),
        None => text.to_string(),
    }
}

/// An error and its sources, `outer: inner: innermost` (reqwest hides the useful part inside).
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// Tool-call arguments as the model sent them: parsed JSON, `{}` for an empty string, or the
/// raw text as `Value::String` when it is not JSON (so validation can tell the model).
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// Arguments that arrived as JSON: a string is parsed, anything else is taken as is.
pub(crate) fn arguments_value(value: Option<Value>) -> Value {
    match value {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(raw)) => parse_arguments(&raw),
        Some(other) => other,
    }
}

/// The `arguments` string sent back to the model. A `Value::String` holds text the model sent
/// that was not JSON (see [`crate::llm::ToolCall`]); it goes back verbatim rather than quoted
/// again.
pub(crate) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// A JSON object whose keys keep the order they were added in (serde_json's own map sorts
/// them). Request bodies put what never changes first and the growing conversation last, so
/// each request of a session is, byte for byte, a prefix of the next: what providers' prompt
/// caches need.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct OrderedBody(Vec<(&'static str, Value)>);

impl OrderedBody {
    pub(crate) fn push(&mut self, key: &'static str, value: Value) {
        self.0.push((key, value));
    }

    /// The body as sent.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = String::with_capacity(1024);
        out.push('{');
        for (i, (key, value)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&Value::String((*key).to_string()).to_string());
            out.push(':');
            write_json(&mut out, value);
        }
        out.push('}');
        out.into_bytes()
    }

    /// The body as a JSON value (key order lost), for tests.
    #[cfg(test)]
    pub(crate) fn to_value(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect(),
        )
    }
}

/// The key written last in its object: a prompt-cache breakpoint moves from block to block
/// between requests, and written last it changes only the end of the block it leaves.
const LAST_KEY: &str = "cache_control";

/// `value` as JSON: object keys sorted (as serde_json writes them) but [`LAST_KEY`] last.
fn write_json(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            out.push('{');
            let ordered = map
                .iter()
                .filter(|(k, _)| k.as_str() != LAST_KEY)
                .chain(map.iter().filter(|(k, _)| k.as_str() == LAST_KEY));
            for (i, (key, value)) in ordered.enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_json(out, value);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// `0.2f32` as `0.2`, not `0.20000000298023224`.
pub(crate) fn f32_as_decimal(value: f32) -> f64 {
    value.to_string().parse().unwrap_or(f64::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_cuts_long_text_on_a_char_boundary() {
        assert_eq!(quote("短文", 5), "短文");
        let cut = quote("预算预算预算", 2);
        assert!(cut.starts_with("预算…"), "{cut}");
    }

    #[test]
    fn arguments_are_read_leniently_and_sent_back_verbatim() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(parse_arguments("{oops"), json!("{oops"));
        assert_eq!(arguments_text(&json!("{oops")), "{oops");
        assert_eq!(arguments_text(&json!({"a": 1})), "{\"a\":1}");
        assert_eq!(f32_as_decimal(0.2), 0.2);
    }

    #[test]
    fn an_ordered_body_keeps_its_key_order() {
        let mut body = OrderedBody::default();
        body.push("model", json!("m"));
        body.push(
            "input",
            json!([{"b": 1, "a": 2, "cache_control": {"type": "ephemeral"}}]),
        );
        let bytes = body.to_bytes();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"{"model":"m","input":[{"a":2,"b":1,"cache_control":{"type":"ephemeral"}}]}"#
        );
        let parsed: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(parsed, body.to_value());
    }
}
