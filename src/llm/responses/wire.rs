//! The OpenAI Responses wire format (`POST /responses`): request bodies built from our
//! [`ChatRequest`] — the first system message as `instructions`, the conversation as input
//! items (`message`, `function_call`, `function_call_output`, and the reasoning items this
//! model wrote, sent back unchanged) — and the output items of a reply read back into a
//! [`ChatResponse`].

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{ResponsesOptions, PROVIDER};
use crate::llm::http::text::{
    arguments_text, f32_as_decimal, parse_arguments, quote, OrderedBody, QUOTE_CHARS,
};
use crate::llm::{
    ChatMessage, ChatRequest, ChatResponse, LlmError, ProviderPart, Role, ToolCall, ToolSpec, Usage,
};

/// The JSON body of `POST /responses`: the settings and tools first, the growing `input`
/// last (see [`OrderedBody`]).
pub(super) fn request_body(
    model: &str,
    request: &ChatRequest,
    options: &ResponsesOptions,
) -> Result<OrderedBody, LlmError> {
    let mut messages = request.messages.as_slice();
    let mut body = OrderedBody::default();
    body.push("model", json!(model));
    if let Some((first, rest)) = messages.split_first() {
        if first.role == Role::System {
            body.push("instructions", json!(first.content));
            messages = rest;
        }
    }
    if !request.tools.is_empty() {
        body.push("tools", request.tools.iter().map(wire_tool).collect());
        body.push("tool_choice", json!("auto"));
        body.push("parallel_tool_calls", json!(options.parallel_tool_calls));
    }
    if options.reasoning_effort.is_some() || options.reasoning_summary.is_some() {
        let mut reasoning = Map::new();
        if let Some(effort) = &options.reasoning_effort {
            reasoning.insert("effort".into(), json!(effort));
        }
        if let Some(summary) = &options.reasoning_summary {
            reasoning.insert("summary".into(), json!(summary));
        }
        body.push("reasoning", Value::Object(reasoning));
    }
    // Reasoning models refuse `temperature`: it is sent only to models without an effort.
    if options.reasoning_effort.is_none() {
        if let Some(t) = request.temperature.or(options.temperature) {
            body.push("temperature", json!(f32_as_decimal(t)));
        }
    }
    if let Some(max) = request.max_tokens.or(options.max_output_tokens) {
        body.push("max_output_tokens", json!(max));
    }
    if request.json_mode {
        body.push("text", json!({"format": {"type": "json_object"}}));
    }
    body.push("store", json!(options.store));
    if !options.store {
        // Nothing is kept server-side: the reasoning comes back encrypted, for us to return.
        body.push("include", json!(["reasoning.encrypted_content"]));
    }
    if let Some(key) = &request.cache_key {
        body.push("prompt_cache_key", json!(key));
    }
    if options.stream {
        body.push("stream", json!(true));
    }
    let mut input = Vec::with_capacity(messages.len() + 4);
    for (i, message) in messages.iter().enumerate() {
        input_items(i, message, model, &mut input)?;
    }
    body.push("input", Value::Array(input));
    Ok(body)
}

/// The input items of one message.
fn input_items(
    index: usize,
    message: &ChatMessage,
    model: &str,
    out: &mut Vec<Value>,
) -> Result<(), LlmError> {
    match message.role {
        Role::System => out.push(json!({"role": "system", "content": message.content})),
        Role::User => out.push(json!({"role": "user", "content": message.content})),
        Role::Assistant => {
            // This model's reasoning first, where it stood in the model's output.
            out.extend(
                message
                    .provider_parts
                    .iter()
                    .filter(|p| p.is_for(PROVIDER, model))
                    .map(|p| p.item.clone()),
            );
            if !message.content.is_empty() || message.tool_calls.is_empty() {
                out.push(json!({"role": "assistant", "content": message.content}));
            }
            out.extend(message.tool_calls.iter().map(wire_call));
        }
        Role::Tool => {
            let id = message.tool_call_id.as_deref().ok_or_else(|| {
                LlmError::Config(format!(
                    "message #{index} is a tool result without tool_call_id; every tool message \
                     must name the call it answers (build it with ChatMessage::tool)"
                ))
            })?;
            out.push(json!({"type": "function_call_output", "call_id": id,
                            "output": message.content}));
        }
    }
    Ok(())
}

fn wire_call(call: &ToolCall) -> Value {
    json!({
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": arguments_text(&call.arguments),
    })
}

/// A function tool. `strict` is false: the API's default (true) accepts only schemas written
/// for its structured outputs (every property required, `additionalProperties: false`), which
/// most tool and MCP schemas are not; Hermes validates and repairs arguments itself.
fn wire_tool(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.input_schema,
        "strict": false,
    })
}

/// `usage` of a response.
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    input_tokens: u32,
    #[serde(default)]
    output_tokens: u32,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<u32>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            cached_tokens: u
                .input_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            reasoning_tokens: u
                .output_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            ..Usage::new(u.input_tokens, u.output_tokens)
        }
    }
}

/// A response object (`object: "response"`), whole or as `response.completed` carries it.
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireResponse {
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub output: Vec<Value>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    #[serde(default)]
    pub error: Option<Value>,
    #[serde(default)]
    pub incomplete_details: Option<Value>,
}

/// Parse a whole (non-streamed) response.
pub(super) fn parse_reply(body: &[u8], model: &str) -> Result<ChatResponse, LlmError> {
    let reply: WireResponse = serde_json::from_slice(body).map_err(|e| {
        LlmError::BadResponse(format!(
            "not a response object ({e}); the reply began: {}",
            quote(&String::from_utf8_lossy(body), 200)
        ))
    })?;
    if let Some(error) = reply.error.as_ref().filter(|e| !e.is_null()) {
        return Err(failed(error));
    }
    let finish = finish_reason(reply.status.as_deref(), reply.incomplete_details.as_ref());
    Ok(from_items(
        &reply.output,
        None,
        reply.usage.map(Usage::from),
        finish,
        model,
    ))
}

/// How the model stopped: `length` when the response is incomplete for lack of output tokens,
/// else set later from the items (`tool_calls` or `stop`).
pub(super) fn finish_reason(status: Option<&str>, incomplete: Option<&Value>) -> Option<String> {
    match status {
        Some("incomplete") => Some(
            match incomplete
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str)
            {
                Some("max_output_tokens") | None => "length".to_string(),
                Some(other) => other.to_string(),
            },
        ),
        _ => None,
    }
}

/// The error a failed response (or an `error` event) becomes: a context window error with
/// its counts when it is one, else a bad response quoting the server.
pub(super) fn failed(error: &Value) -> LlmError {
    let text = error.to_string();
    let code = error.get("code").and_then(Value::as_str).unwrap_or("");
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    if code == "context_length_exceeded" || message.contains("context window") {
        return crate::llm::http::failure::context_error(message, &text);
    }
    LlmError::BadResponse(format!(
        "the endpoint reported a failed response: {}; retry, or check the model's status page \
         if it persists",
        quote(&text, QUOTE_CHARS)
    ))
}

/// Build the answer from the output items. `streamed_text` is the text already taken from
/// `response.output_text.delta` events, used when no message item carries it.
pub(super) fn from_items(
    items: &[Value],
    streamed_text: Option<&str>,
    usage: Option<Usage>,
    finish: Option<String>,
    model: &str,
) -> ChatResponse {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    let mut parts = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => text.push_str(&message_text(item)),
            Some("function_call") => tool_calls.push(ToolCall {
                id: str_field(item, "call_id")
                    .or_else(|| str_field(item, "id"))
                    .unwrap_or_else(|| format!("call_{i}")),
                name: str_field(item, "name").unwrap_or_default(),
                arguments: parse_arguments(
                    item.get("arguments")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                ),
            }),
            Some("reasoning") => {
                for summary in item
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(t) = summary.get("text").and_then(Value::as_str) {
                        reasoning.push_str(t);
                    }
                }
                parts.push(ProviderPart {
                    provider: PROVIDER.into(),
                    model: model.into(),
                    item: item.clone(),
                });
            }
            _ => {}
        }
    }
    if text.is_empty() {
        text = streamed_text.unwrap_or_default().to_string();
    }
    let finish = finish.or_else(|| {
        Some(
            if tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }
            .to_string(),
        )
    });
    ChatResponse {
        text,
        tool_calls,
        usage,
        finish_reason: finish,
        parts,
        reasoning,
    }
}

fn str_field(item: &Value, key: &str) -> Option<String> {
    item.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The `output_text` parts of a message item.
fn message_text(item: &Value) -> String {
    match item.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("output_text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn options() -> ResponsesOptions {
        ResponsesOptions {
            reasoning_effort: Some("low".into()),
            ..ResponsesOptions::default()
        }
    }

    fn reasoning(model: &str) -> ProviderPart {
        ProviderPart {
            provider: PROVIDER.into(),
            model: model.into(),
            item: json!({"type": "reasoning", "id": "rs_1", "summary": [],
                         "encrypted_content": "gAAAA-secret"}),
        }
    }

    #[test]
    fn request_maps_the_conversation_to_items_and_returns_this_models_reasoning() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "add".into(),
            arguments: json!({"a": 2}),
        };
        let mut asked = ChatMessage::assistant_calls("", vec![call]);
        asked.provider_parts = vec![reasoning("m"), reasoning("other-model")];
        let request = ChatRequest {
            messages: crate::llm::shared([
                ChatMessage::system("be brief"),
                ChatMessage::system("Task goal: add"),
                ChatMessage::user("2+3?"),
                asked,
                ChatMessage::tool("call_1", "add", "5"),
            ]),
            tools: vec![ToolSpec {
                name: "add".into(),
                description: "adds".into(),
                input_schema: json!({"type": "object"}),
            }]
            .into(),
            temperature: Some(0.2),
            cache_key: Some("hermes-s1".into()),
            ..ChatRequest::default()
        };
        let body = request_body("m", &request, &options()).unwrap().to_value();
        let expected = json!({
            "model": "m",
            "instructions": "be brief",
            "input": [
                {"role": "system", "content": "Task goal: add"},
                {"role": "user", "content": "2+3?"},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-secret"},
                {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": "{\"a\":2}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "5"},
            ],
            "tools": [{"type": "function", "name": "add", "description": "adds",
                       "parameters": {"type": "object"}, "strict": false}],
            "tool_choice": "auto",
            "parallel_tool_calls": true,
            "reasoning": {"effort": "low"},
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "hermes-s1",
            "stream": true,
        });
        assert_eq!(body, expected);
    }

    #[test]
    fn a_model_without_reasoning_effort_gets_the_temperature_and_json_mode() {
        let request = ChatRequest {
            messages: crate::llm::shared([ChatMessage::user("hi")]),
            temperature: Some(0.0),
            json_mode: true,
            ..ChatRequest::default()
        };
        let options = ResponsesOptions {
            stream: false,
            store: true,
            ..ResponsesOptions::default()
        };
        let body = request_body("m", &request, &options).unwrap().to_value();
        assert_eq!(
            body,
            json!({"model": "m", "input": [{"role": "user", "content": "hi"}],
                   "temperature": 0.0, "text": {"format": {"type": "json_object"}},
                   "store": true})
        );
    }

    #[test]
    fn a_whole_reply_gives_text_calls_usage_and_the_reasoning_to_keep() {
        let body = json!({
            "id": "resp_1", "object": "response", "status": "completed",
            "output": [
                {"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text", "text": "Add them."}],
                 "encrypted_content": "enc"},
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "Calling.", "annotations": []}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_7", "name": "add",
                 "arguments": "{\"a\":1}", "status": "completed"}
            ],
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 64},
                      "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 20},
                      "total_tokens": 130}
        });
        let reply = parse_reply(body.to_string().as_bytes(), "m").unwrap();
        assert_eq!(reply.text, "Calling.");
        assert_eq!(reply.reasoning, "Add them.");
        assert_eq!(
            reply.tool_calls,
            vec![ToolCall {
                id: "call_7".into(),
                name: "add".into(),
                arguments: json!({"a": 1})
            }]
        );
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            reply.usage,
            Some(Usage {
                cached_tokens: 64,
                reasoning_tokens: 20,
                ..Usage::new(100, 30)
            })
        );
        assert_eq!(reply.parts.len(), 1);
        assert_eq!(reply.parts[0].item, body["output"][0]);
    }

    #[test]
    fn a_failed_or_incomplete_response_says_so() {
        let body = json!({"status": "failed", "output": [],
            "error": {"code": "context_length_exceeded",
                      "message": "Your input exceeds the context window of this model."}});
        let err = parse_reply(body.to_string().as_bytes(), "m").unwrap_err();
        assert!(matches!(err, LlmError::ContextLength { .. }), "{err}");
        let body = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "half"}]}]});
        let reply = parse_reply(body.to_string().as_bytes(), "m").unwrap();
        assert_eq!(
            (reply.text.as_str(), reply.finish_reason.as_deref()),
            ("half", Some("length"))
        );
    }
}
