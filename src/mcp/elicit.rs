//! Questions an MCP server asks the user through Hermes' client — `elicitation/create` in the
//! 2025-11-25 revision, an `input_required` result in 2026-07-28 (SEP-2322) — and who answers
//! them ([`Elicitor`]). A client without an elicitor announces no elicitation capability, and
//! an `input_required` call fails with an error saying so.

use std::fmt::Debug;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

/// One question: a form (a message and the JSON Schema of the answer) or a URL to visit.
#[derive(Debug, Clone, PartialEq)]
pub enum Question {
    Form { message: String, schema: Value },
    Url { message: String, url: String },
}

/// The user's answer to a [`Question`].
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Accepted, with the form's content (`{}` for a URL question).
    Accept(Value),
    Decline,
    Cancel,
}

/// Whoever answers a server's questions.
pub trait Elicitor: Send + Sync + Debug {
    fn answer(&self, question: Question) -> BoxFuture<'static, Answer>;
}

/// Accepts every form with the defaults its schema declares (SEP-1034) and declines URL
/// questions (nobody would visit them): for a client that runs unattended on behalf of a
/// person who configured it so, such as `hermes mcp probe --accept-defaults`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptDefaults;

impl Elicitor for AcceptDefaults {
    fn answer(&self, question: Question) -> BoxFuture<'static, Answer> {
        let answer = match question {
            Question::Form { schema, .. } => Answer::Accept(defaults_of(&schema)),
            Question::Url { .. } => Answer::Decline,
        };
        Box::pin(std::future::ready(answer))
    }
}

/// `{property: default}` for each property of `schema` that declares a default.
pub fn defaults_of(schema: &Value) -> Value {
    let mut content = Map::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                content.insert(name.clone(), default.clone());
            }
        }
    }
    Value::Object(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accept_defaults_fills_each_declared_default_and_declines_a_url() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"},
            "age": {"type": "integer", "default": 36},
            "colour": {"type": "string", "enum": ["red", "blue"], "default": "blue"},
            "subscribed": {"type": "boolean", "default": false},
            "nickname": {"type": "string"}
        }});
        let form = Question::Form {
            message: "Who?".into(),
            schema,
        };
        let answer = futures::executor::block_on(AcceptDefaults.answer(form));
        assert_eq!(
            answer,
            Answer::Accept(
                json!({"name": "Ada", "age": 36, "colour": "blue", "subscribed": false})
            )
        );
        let url = Question::Url {
            message: "Pay".into(),
            url: "https://pay.example".into(),
        };
        assert_eq!(
            futures::executor::block_on(AcceptDefaults.answer(url)),
            Answer::Decline
        );
    }
}
