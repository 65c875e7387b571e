//! [`BenchModel`]: the instant model of `shared/bench/WORKLOAD.md`, so `hermes bench` measures
//! the engine and not a model. It looks only at the last message:
//! - a user message `turn t: add <a> and <b>` → one tool call `add {"a": a, "b": b}` with id
//!   `call_<a>_<b>`; an operand may be an integer or a sum of integers (`1000+5`), so both the
//!   literal template `add 5 and 1000+5` and the substituted `add 5 and 1005` work;
//! - a user message `turn t: call <tool> <JSON object>` → one call of `<tool>` with those
//!   arguments and id `call_<tool>_<t>` (the scale-out runs use it for write tools and jobs);
//! - a tool result → the text `The answer is R.`: R is, for a JSON object (or compact
//!   `key: value` lines), its `result` field, else `sum`, else `summary` (a finished
//!   `generate_report`), else `text` (an MCP text result), else the same rules applied to its
//!   `detail` field (the engine's transformed results `{tool_use_id, …, detail, …}`); otherwise
//!   the content trimmed. A JSON number or string is used as is; a final period is dropped.
//!
//! Anything else is a configuration mistake (the bench model only plays the benchmark).

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, DeltaSender, LlmError, Role, ToolCall,
};

/// The benchmark model; stateless and free to share.
#[derive(Debug, Clone, Copy, Default)]
pub struct BenchModel;

impl BenchModel {
    pub fn new() -> Self {
        Self
    }
}

/// `(a, b)` from `turn t: add <a> and <b>`.
fn parse_turn(text: &str) -> Option<(i64, i64)> {
    let (_, rest) = text.split_once("add ")?;
    let (a, b) = rest.split_once(" and ")?;
    Some((operand(a)?, operand(b)?))
}

/// The call of `turn t: call <tool> <JSON object>`, with id `call_<tool>_<t>`.
fn parse_call(text: &str) -> Option<ToolCall> {
    let (turn, rest) = text.split_once(": call ")?;
    let t = turn.strip_prefix("turn ")?.trim();
    let (tool, arguments) = rest.trim().split_once(' ')?;
    let arguments: Value = serde_json::from_str(arguments.trim()).ok()?;
    arguments.is_object().then(|| ToolCall {
        id: format!("call_{tool}_{t}"),
        name: tool.to_string(),
        arguments,
    })
}

/// An integer or a sum of integers (`1000+7`).
fn operand(text: &str) -> Option<i64> {
    text.trim()
        .trim_end_matches(['.', '?', '!'])
        .split('+')
        .try_fold(0_i64, |sum, term| {
            sum.checked_add(term.trim().parse().ok()?)
        })
}

/// R of `The answer is R.` from a tool result's content (rules in the module doc).
fn result_text(content: &str) -> String {
    let trimmed = content.trim();
    let text = match serde_json::from_str::<Value>(trimmed) {
        Ok(value @ Value::Object(_)) => from_object(&value).unwrap_or_else(|| trimmed.to_string()),
        _ => from_lines(trimmed).unwrap_or_else(|| trimmed.to_string()),
    };
    text.strip_suffix('.').map(str::to_string).unwrap_or(text)
}

/// The keys whose value is the answer, in order of preference.
const ANSWER_KEYS: [&str; 4] = ["result", "sum", "summary", "text"];

/// The value of the first answer key in compact `key: value` lines (the engine's rendering
/// of a small structured result).
fn from_lines(text: &str) -> Option<String> {
    ANSWER_KEYS.iter().find_map(|key| {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(key)?.strip_prefix(": "))
            .map(|value| value.trim().to_string())
    })
}

fn from_object(value: &Value) -> Option<String> {
    // The engine's transformed result also has a `summary`, of its own making: read `detail`.
    let transformed = value.get("tool_use_id").is_some();
    for key in ANSWER_KEYS.iter().filter(|_| !transformed) {
        if let Some(found) = value.get(key) {
            return Some(scalar_text(found));
        }
    }
    match value.get("detail")? {
        Value::String(detail) => Some(result_text(detail)),
        object @ Value::Object(_) => from_object(object),
        other => Some(scalar_text(other)),
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    }
}

fn reply(last: Option<&ChatMessage>) -> Result<ChatResponse, LlmError> {
    let misuse = |what: String| {
        LlmError::Config(format!(
            "the bench model only plays `hermes bench` (last message `turn t: add a and b` or a \
             tool result) but got {what}; configure a real or replay model for other uses"
        ))
    };
    let last = last.ok_or_else(|| misuse("no messages".into()))?;
    match last.role {
        Role::User => {
            let call = parse_call(&last.content)
                .or_else(|| {
                    parse_turn(&last.content).map(|(a, b)| ToolCall {
                        id: format!("call_{a}_{b}"),
                        name: "add".into(),
                        arguments: json!({"a": a, "b": b}),
                    })
                })
                .ok_or_else(|| misuse(format!("the user message {:?}", last.content)))?;
            Ok(ChatResponse {
                text: String::new(),
                tool_calls: vec![call],
                usage: None,
                finish_reason: Some("tool_calls".into()),
                ..ChatResponse::default()
            })
        }
        Role::Tool => Ok(ChatResponse {
            text: format!("The answer is {}.", result_text(&last.content)),
            tool_calls: Vec::new(),
            usage: None,
            finish_reason: Some("stop".into()),
            ..ChatResponse::default()
        }),
        Role::System | Role::Assistant => {
            Err(misuse(format!("a last message from {:?}", last.role)))
        }
    }
}

#[async_trait]
impl ChatModel for BenchModel {
    fn id(&self) -> String {
        "bench".into()
    }

    /// Counted as `gpt-4o` (o200k) so the engine's token accounting runs as with a real model.
    fn model_name(&self) -> String {
        "gpt-4o".into()
    }

    fn is_local(&self) -> bool {
        true
    }

    /// Answers at once; it does not stream, so `deltas` receives nothing.
    async fn complete(
        &self,
        request: &ChatRequest,
        _deltas: Option<DeltaSender>,
    ) -> Result<ChatResponse, LlmError> {
        reply(request.messages.last().map(|m| &**m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    async fn answer(messages: Vec<ChatMessage>) -> Result<ChatResponse, LlmError> {
        let request = ChatRequest {
            messages: crate::llm::shared(messages),
            ..ChatRequest::default()
        };
        BenchModel::new().complete(&request, None).await
    }

    #[tokio::test]
    async fn user_turn_becomes_one_add_call_with_a_deterministic_id() {
        for text in ["turn 7: add 7 and 1007", "turn 7: add 7 and 1000+7"] {
            let reply = answer(vec![ChatMessage::system("s"), ChatMessage::user(text)])
                .await
                .unwrap();
            assert_eq!(
                reply.tool_calls,
                vec![ToolCall {
                    id: "call_7_1007".into(),
                    name: "add".into(),
                    arguments: json!({"a": 7, "b": 1007}),
                }],
                "{text}"
            );
            assert_eq!(reply.text, "");
        }
    }

    #[tokio::test]
    async fn call_turn_becomes_a_call_of_the_named_tool() {
        let text = "turn 4: call generate_report {\"topic\": \"s1-4\", \"seconds\": 1}";
        let reply = answer(vec![ChatMessage::user(text)]).await.unwrap();
        assert_eq!(
            reply.tool_calls,
            vec![ToolCall {
                id: "call_generate_report_4".into(),
                name: "generate_report".into(),
                arguments: json!({"topic": "s1-4", "seconds": 1}),
            }]
        );
        let not_an_object = answer(vec![ChatMessage::user("turn 4: call x [1]")]).await;
        assert!(not_an_object.is_err());
    }

    #[tokio::test]
    async fn tool_result_becomes_the_answer_sentence() {
        let cases = [
            (" 1014 \n", "1014"),
            ("{\"result\": 1014}", "1014"),
            ("{\"sum\": 2000}", "2000"),
            (
                "{\"tool_name\": \"add\", \"status\": \"ok\", \"detail\": \"{\\\"sum\\\": 12}\"}",
                "12",
            ),
            (
                "{\"tool_use_id\": \"c\", \"summary\": \"result: 7\", \"detail\": {\"result\": 7}}",
                "7",
            ),
            ("{\"status\": \"ok\", \"detail\": {\"result\": \"9\"}}", "9"),
            ("{\"topic\": \"t\", \"summary\": \"A report.\"}", "A report"),
            ("tool: add\nresult: 1002", "1002"),
            ("{\"text\": \"s1-2\"}", "s1-2"),
            ("{\"other\": 1}", "{\"other\": 1}"),
        ];
        for (content, r) in cases {
            let messages = vec![
                ChatMessage::user("turn 1: add 1 and 1001"),
                ChatMessage::tool("c", "add", content),
            ];
            let reply = answer(messages).await.unwrap();
            assert_eq!(reply.text, format!("The answer is {r}."), "{content}");
            assert!(reply.tool_calls.is_empty());
        }
    }

    #[tokio::test]
    async fn anything_else_is_a_config_error_that_says_so() {
        for messages in [
            vec![],
            vec![ChatMessage::user("hello")],
            vec![ChatMessage::assistant("x")],
        ] {
            let err = answer(messages).await.unwrap_err();
            assert!(
                matches!(err, LlmError::Config(ref m) if m.contains("bench")),
                "{err}"
            );
        }
    }

    #[test]
    fn operands_parse_integers_and_sums_but_not_words() {
        assert_eq!(parse_turn("turn 12: add 12 and 1012"), Some((12, 1012)));
        assert_eq!(parse_turn("turn 3: add -3 and 1000 + 3."), Some((-3, 1003)));
        assert_eq!(parse_turn("turn x: add x and y"), None);
        assert_eq!(parse_turn("add 1 or 2"), None);
    }
}
