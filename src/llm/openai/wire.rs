//! The OpenAI chat-completions wire format: request bodies built from our [`ChatRequest`], and
//! whole (non-streamed) replies parsed back into a [`ChatResponse`].
//!
//! Leniencies, each seen in a real OpenAI-compatible server: `content` may be null or an array
//! of text parts; tool-call `arguments` may be a JSON string (OpenAI), an object (some Ollama
//! versions) or an empty string (a call without arguments, read as `{}`); a missing call id is
//! replaced by `call_<index>`.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::llm::http::text::{arguments_text, arguments_value, f32_as_decimal, quote, QUOTE_CHARS};
use crate::llm::{
    ChatMessage, ChatRequest, ChatResponse, LlmError, Role, ToolCall, ToolSpec, Usage,
};

/// The JSON body of `POST /chat/completions`.
pub(super) fn request_body(
    model: &str,
    request: &ChatRequest,
    stream: bool,
    default_temperature: Option<f32>,
) -> Result<Value, LlmError> {
    let messages = request
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| wire_message(i, m))
        .collect::<Result<Vec<_>, _>>()?;
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            request.tools.iter().map(wire_tool).collect(),
        );
    }
    if let Some(t) = request.temperature.or(default_temperature) {
        body.insert("temperature".into(), json!(f32_as_decimal(t)));
    }
    if let Some(max) = request.max_tokens {
        body.insert("max_tokens".into(), json!(max));
    }
    if request.json_mode {
        body.insert("response_format".into(), json!({"type": "json_object"}));
    }
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(body))
}

fn wire_message(index: usize, message: &ChatMessage) -> Result<Value, LlmError> {
    Ok(match message.role {
        Role::System => json!({"role": "system", "content": message.content}),
        Role::User => json!({"role": "user", "content": message.content}),
        Role::Assistant if message.tool_calls.is_empty() => {
            json!({"role": "assistant", "content": message.content})
        }
        Role::Assistant => {
            let content = if message.content.is_empty() {
                Value::Null
            } else {
                json!(message.content)
            };
            let calls: Vec<Value> = message.tool_calls.iter().map(wire_tool_call).collect();
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        Role::Tool => {
            let id = message.tool_call_id.as_deref().ok_or_else(|| {
                LlmError::Config(format!(
                    "message #{index} is a tool result without tool_call_id; every tool message \
                     must name the call it answers (build it with ChatMessage::tool)"
                ))
            })?;
            json!({"role": "tool", "tool_call_id": id, "content": message.content})
        }
    })
}

fn wire_tool_call(call: &ToolCall) -> Value {
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments_text(&call.arguments)},
    })
}

fn wire_tool(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    })
}

/// `usage` of a reply or of the last streamed chunk.
#[derive(Debug, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_tokens: u32,
    #[serde(default)]
    completion_tokens: u32,
    #[serde(default)]
    prompt_tokens_details: Option<WireDetails>,
    #[serde(default)]
    completion_tokens_details: Option<WireDetails>,
}

/// `prompt_tokens_details` / `completion_tokens_details` (OpenAI, vLLM); null elsewhere.
#[derive(Debug, Default, Deserialize)]
struct WireDetails {
    #[serde(default)]
    cached_tokens: Option<u32>,
    #[serde(default)]
    reasoning_tokens: Option<u32>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            cached_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            reasoning_tokens: u
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            ..Usage::new(u.prompt_tokens, u.completion_tokens)
        }
    }
}

#[derive(Debug, Deserialize)]
struct WireReply {
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

/// Parse a whole `chat.completion` reply.
pub(super) fn parse_reply(body: &[u8]) -> Result<ChatResponse, LlmError> {
    let reply: WireReply = serde_json::from_slice(body).map_err(|e| {
        LlmError::BadResponse(format!(
            "not a chat.completion object ({e}); the reply began: {}",
            quote(&String::from_utf8_lossy(body), 200)
        ))
    })?;
    if let Some(error) = reply.error {
        return Err(LlmError::BadResponse(format!(
            "the endpoint answered with an error object: {}",
            quote(&error.to_string(), QUOTE_CHARS)
        )));
    }
    let choice = reply.choices.into_iter().next().ok_or_else(|| {
        LlmError::BadResponse("the reply has no choices; the server produced no answer".into())
    })?;
    let message = choice.message.ok_or_else(|| {
        LlmError::BadResponse("choices[0] has no message; is this a streamed reply?".into())
    })?;
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, call)| ToolCall {
            id: call
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("call_{i}")),
            name: call.function.name,
            arguments: arguments_value(call.function.arguments),
        })
        .collect();
    Ok(ChatResponse {
        text: content_text(message.content),
        tool_calls,
        usage: reply.usage.map(Usage::from),
        finish_reason: choice.finish_reason,
        ..ChatResponse::default()
    })
}

/// `content` as text: a string, null, or an array of `{type: "text", text}` parts.
fn content_text(content: Option<Value>) -> String {
    match content {
        Some(Value::String(text)) => text,
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }

    #[test]
    fn request_maps_messages_tools_and_options_to_the_wire_format() {
        let request = ChatRequest {
            messages: crate::llm::shared([
                ChatMessage::system("be brief"),
                ChatMessage::user("2+3?"),
                ChatMessage::assistant_calls("", vec![call("c1", "add", json!({"a": 2, "b": 3}))]),
                ChatMessage::tool("c1", "add", "5"),
                ChatMessage::assistant("5"),
            ]),
            tools: vec![ToolSpec {
                name: "add".into(),
                description: "adds".into(),
                input_schema: json!({"type": "object"}),
            }]
            .into(),
            temperature: Some(0.2),
            max_tokens: Some(64),
            json_mode: true,
            ..ChatRequest::default()
        };
        let body = request_body("m", &request, true, Some(0.9)).unwrap();
        let expected = json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "2+3?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "add", "arguments": "{\"a\":2,\"b\":3}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "5"},
                {"role": "assistant", "content": "5"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "add", "description": "adds", "parameters": {"type": "object"}}}],
            "temperature": 0.2,
            "max_tokens": 64,
            "response_format": {"type": "json_object"},
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        assert_eq!(body, expected);
    }

    #[test]
    fn request_without_options_omits_them_and_uses_the_configured_temperature() {
        let request = ChatRequest {
            messages: crate::llm::shared([ChatMessage::user("hi")]),
            ..ChatRequest::default()
        };
        let body = request_body("m", &request, false, Some(0.5)).unwrap();
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.5})
        );
    }

    #[test]
    fn non_json_arguments_are_sent_back_verbatim() {
        let message =
            ChatMessage::assistant_calls("x", vec![call("c", "f", Value::String("{oops".into()))]);
        let wire = wire_message(0, &message).unwrap();
        assert_eq!(
            wire["tool_calls"][0]["function"]["arguments"],
            json!("{oops")
        );
        assert_eq!(wire["content"], json!("x"));
    }

    #[test]
    fn tool_message_without_call_id_is_rejected_with_its_index() {
        let mut message = ChatMessage::tool("c", "f", "r");
        message.tool_call_id = None;
        let err = wire_message(3, &message).unwrap_err().to_string();
        assert!(err.contains("#3") && err.contains("tool_call_id"), "{err}");
    }

    #[test]
    fn reply_with_null_content_and_tool_calls_is_parsed() {
        let body = json!({
            "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}},
                {"type": "function", "function": {"name": "g", "arguments": "not json"}},
                {"id": "", "type": "function", "function": {"name": "h", "arguments": ""}}
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
        });
        let reply = parse_reply(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            reply,
            ChatResponse {
                text: String::new(),
                tool_calls: vec![
                    call("a", "f", json!({"x": 1})),
                    call("call_1", "g", Value::String("not json".into())),
                    call("call_2", "h", json!({})),
                ],
                usage: Some(Usage::new(10, 4)),
                finish_reason: Some("tool_calls".into()),
                ..ChatResponse::default()
            }
        );
    }

    #[test]
    fn reply_content_parts_and_object_arguments_are_accepted() {
        let body = json!({"choices": [{"message": {
            "content": [{"type": "text", "text": "he"}, {"type": "text", "text": "llo"}],
            "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"x": 1}}}]
        }}]});
        let reply = parse_reply(body.to_string().as_bytes()).unwrap();
        assert_eq!(reply.text, "hello");
        assert_eq!(reply.tool_calls[0].arguments, json!({"x": 1}));
        assert_eq!(reply.usage, None);
    }

    #[test]
    fn garbage_and_empty_replies_are_bad_responses() {
        for body in [
            &b"<html>oops</html>"[..],
            b"{\"choices\": []}",
            b"{\"error\": {\"message\": \"x\"}}",
        ] {
            let err = parse_reply(body).unwrap_err();
            assert!(matches!(err, LlmError::BadResponse(_)), "{err}");
        }
    }
}
