//! The Anthropic Messages wire format (`POST /v1/messages`): request bodies built from our
//! [`ChatRequest`] — the leading system messages as `system` blocks, the conversation as
//! `user`/`assistant` messages of content blocks (`text`, `tool_use`, `tool_result`, and the
//! thinking blocks this model signed, sent back unchanged), `cache_control` breakpoints — and
//! a whole reply's content blocks read back into a [`ChatResponse`].
//!
//! Breakpoints (at most 4 are allowed; 2 are used): after the tools and the system prompt (on
//! the first system block, or on the last tool when there is no system prompt), and at the
//! end of the stable history — the last block of the request: the next request (the next step
//! of a tool loop, or the next turn) begins with all of this one, so it reads all of it from
//! the cache. A breakpoint that moved to an earlier block would change the bytes there; the
//! last block is the only one that changes, so each request stays a byte prefix of the next
//! up to its final block.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use super::{AnthropicOptions, PROVIDER};
use crate::llm::http::text::{f32_as_decimal, quote, OrderedBody};
use crate::llm::{
    ChatMessage, ChatRequest, ChatResponse, LlmError, ProviderPart, Role, ToolCall, ToolSpec, Usage,
};

/// Appended to the system prompt of a request that wants a JSON object (the API has no JSON
/// mode).
pub(super) const JSON_INSTRUCTION: &str =
    "Reply with one JSON object and nothing else: no prose, no code fence.";

/// The JSON body of `POST /v1/messages`: settings, tools and system first, the growing
/// `messages` last (see [`OrderedBody`]).
pub(super) fn request_body(
    model: &str,
    request: &ChatRequest,
    options: &AnthropicOptions,
) -> Result<OrderedBody, LlmError> {
    let leading = request
        .messages
        .iter()
        .take_while(|m| m.role == Role::System)
        .count();
    let (system, conversation) = request.messages.split_at(leading);
    let mut system: Vec<Value> = system
        .iter()
        .filter(|m| !m.content.is_empty())
        .map(|m| json!({"type": "text", "text": m.content}))
        .collect();
    if request.json_mode {
        system.push(json!({"type": "text", "text": JSON_INSTRUCTION}));
    }
    let mut tools: Vec<Value> = request.tools.iter().map(wire_tool).collect();
    if options.cache {
        // Breakpoint 1: the tools and the system prompt, the same for every request.
        match (system.first_mut(), tools.last_mut()) {
            (Some(first), _) => first["cache_control"] = ephemeral(),
            (None, Some(last)) => last["cache_control"] = ephemeral(),
            (None, None) => {}
        }
    }
    let mut messages = wire_messages(conversation, model)?;
    if options.cache {
        if let Some(last) = messages.last_mut() {
            mark_last_block(last);
        }
    }
    let thinking = options
        .thinking_budget
        .filter(|_| thinking_allowed(conversation, model));
    let mut body = OrderedBody::default();
    body.push("model", json!(model));
    body.push(
        "max_tokens",
        json!(request
            .max_tokens
            .unwrap_or(options.max_tokens)
            .max(thinking.map_or(1, |budget| budget + 1))),
    );
    if options.stream {
        body.push("stream", json!(true));
    }
    match thinking {
        Some(budget) => body.push(
            "thinking",
            json!({"type": "enabled", "budget_tokens": budget}),
        ),
        // Thinking allows no temperature but the default.
        None => {
            if let Some(t) = request.temperature.or(options.temperature) {
                body.push("temperature", json!(f32_as_decimal(t)));
            }
        }
    }
    if !tools.is_empty() {
        body.push("tools", Value::Array(tools));
        body.push("tool_choice", json!({"type": "auto"}));
    }
    if !system.is_empty() {
        body.push("system", Value::Array(system));
    }
    body.push("messages", Value::Array(messages));
    Ok(body)
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Thinking may be on unless the request ends inside a tool loop whose assistant step has no
/// thinking block of this model (it came from another provider, e.g. a fallback): the API
/// requires that step to start with one when thinking is enabled.
fn thinking_allowed(conversation: &[Arc<ChatMessage>], model: &str) -> bool {
    let Some(last_assistant) = conversation.iter().rposition(|m| m.role == Role::Assistant) else {
        return true;
    };
    let in_tool_loop = conversation[last_assistant + 1..]
        .iter()
        .all(|m| m.role == Role::Tool)
        && !conversation[last_assistant].tool_calls.is_empty();
    !in_tool_loop
        || conversation[last_assistant]
            .provider_parts
            .iter()
            .any(|p| p.is_for(PROVIDER, model))
}

/// The conversation as alternating `user` / `assistant` messages of content blocks.
fn wire_messages(conversation: &[Arc<ChatMessage>], model: &str) -> Result<Vec<Value>, LlmError> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (i, message) in conversation.iter().enumerate() {
        let (role, blocks) = match message.role {
            Role::User => ("user", vec![text_block(&message.content)]),
            // A system message inside the conversation: the API has no such role.
            Role::System => (
                "user",
                vec![text_block(&format!("<system>{}</system>", message.content))],
            ),
            Role::Assistant => ("assistant", assistant_blocks(message, model)),
            Role::Tool => ("user", vec![tool_result(i, message)?]),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    Ok(out
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect())
}

fn text_block(text: &str) -> Value {
    // The API refuses text blocks that are empty or only whitespace.
    let text = if text.trim().is_empty() {
        "(empty message)"
    } else {
        text
    };
    json!({"type": "text", "text": text})
}

/// This model's thinking blocks (unchanged, first), the text, the tool calls.
fn assistant_blocks(message: &ChatMessage, model: &str) -> Vec<Value> {
    let mut blocks: Vec<Value> = message
        .provider_parts
        .iter()
        .filter(|p| p.is_for(PROVIDER, model))
        .map(|p| p.item.clone())
        .collect();
    // Whitespace alone is refused as a text block; it says nothing anyway.
    if !message.content.trim().is_empty() {
        blocks.push(json!({"type": "text", "text": message.content}));
    }
    for call in &message.tool_calls {
        let input = match &call.arguments {
            Value::Object(_) => call.arguments.clone(),
            // Not JSON, or not an object: the model sees what it sent.
            other => json!({"raw": other}),
        };
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    blocks
}

fn tool_result(index: usize, message: &ChatMessage) -> Result<Value, LlmError> {
    let id = message.tool_call_id.as_deref().ok_or_else(|| {
        LlmError::Config(format!(
            "message #{index} is a tool result without tool_call_id; every tool message must \
             name the call it answers (build it with ChatMessage::tool)"
        ))
    })?;
    Ok(json!({"type": "tool_result", "tool_use_id": id, "content": message.content}))
}

/// The history breakpoint: on the message's last block that is not a thinking block (those
/// cannot carry one).
fn mark_last_block(message: &mut Value) {
    let block = message["content"].as_array_mut().and_then(|blocks| {
        blocks.iter_mut().rev().find(|b| {
            !matches!(
                b.get("type").and_then(Value::as_str),
                Some("thinking" | "redacted_thinking")
            )
        })
    });
    if let Some(block) = block {
        block["cache_control"] = ephemeral();
    }
}

fn wire_tool(tool: &ToolSpec) -> Value {
    json!({"name": tool.name, "description": tool.description, "input_schema": tool.input_schema})
}

/// `usage` of a message (or the cumulative counts of a `message_delta`).
#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub input_tokens: Option<u32>,
    #[serde(default)]
    pub output_tokens: Option<u32>,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u32>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u32>,
}

impl WireUsage {
    /// Counts of a later event replace those it repeats.
    pub(super) fn update(&mut self, later: WireUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
    }
}

impl From<WireUsage> for Usage {
    /// `input_tokens` excludes the cached ones; our prompt count includes them.
    fn from(u: WireUsage) -> Self {
        let written = u.cache_creation_input_tokens.unwrap_or(0);
        let read = u.cache_read_input_tokens.unwrap_or(0);
        Usage {
            cached_tokens: read,
            cache_write_tokens: written,
            ..Usage::new(
                u.input_tokens.unwrap_or(0) + written + read,
                u.output_tokens.unwrap_or(0),
            )
        }
    }
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Vec<Value>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

/// Parse a whole (non-streamed) message.
pub(super) fn parse_reply(body: &[u8], model: &str) -> Result<ChatResponse, LlmError> {
    let reply: WireMessage = serde_json::from_slice(body).map_err(|e| {
        LlmError::BadResponse(format!(
            "not a message object ({e}); the reply began: {}",
            quote(&String::from_utf8_lossy(body), 200)
        ))
    })?;
    if reply.kind.as_deref() == Some("error") {
        return Err(LlmError::BadResponse(format!(
            "the endpoint answered with an error object: {}",
            quote(&reply.error.unwrap_or_default().to_string(), 1000)
        )));
    }
    Ok(from_blocks(
        &reply.content,
        reply.usage.map(Usage::from),
        reply.stop_reason,
        model,
    ))
}

/// The answer from a message's content blocks.
pub(super) fn from_blocks(
    blocks: &[Value],
    usage: Option<Usage>,
    stop_reason: Option<String>,
    model: &str,
) -> ChatResponse {
    let mut reply = ChatResponse {
        usage,
        ..ChatResponse::default()
    };
    for (i, block) in blocks.iter().enumerate() {
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        match block.get("type").and_then(Value::as_str) {
            Some("text") => reply.text.push_str(text("text")),
            Some("tool_use") => reply.tool_calls.push(ToolCall {
                id: Some(text("id"))
                    .filter(|id| !id.is_empty())
                    .map_or_else(|| format!("toolu_{i}"), str::to_string),
                name: text("name").to_string(),
                arguments: block
                    .get("input")
                    .cloned()
                    .filter(|v| !v.is_null())
                    .unwrap_or_else(|| json!({})),
            }),
            Some("thinking" | "redacted_thinking") => {
                reply.reasoning.push_str(text("thinking"));
                reply.parts.push(ProviderPart {
                    provider: PROVIDER.into(),
                    model: model.into(),
                    item: block.clone(),
                });
            }
            _ => {}
        }
    }
    reply.finish_reason = Some(
        match stop_reason.as_deref() {
            Some("tool_use") => "tool_calls",
            Some("end_turn" | "stop_sequence") | None => "stop",
            Some("max_tokens") => "length",
            Some(other) => other,
        }
        .to_string(),
    );
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn options() -> AnthropicOptions {
        AnthropicOptions {
            thinking_budget: Some(1024),
            ..AnthropicOptions::default()
        }
    }

    fn thinking(model: &str) -> ProviderPart {
        ProviderPart {
            provider: PROVIDER.into(),
            model: model.into(),
            item: json!({"type": "thinking", "thinking": "2+3 is 5", "signature": "sig-1"}),
        }
    }

    fn call() -> ToolCall {
        ToolCall {
            id: "toolu_1".into(),
            name: "add".into(),
            arguments: json!({"a": 2}),
        }
    }

    #[test]
    fn request_has_system_blocks_tool_blocks_thinking_and_two_breakpoints() {
        let mut asked = ChatMessage::assistant_calls("", vec![call()]);
        asked.provider_parts = vec![thinking("m"), thinking("other")];
        let request = ChatRequest {
            messages: crate::llm::shared([
                ChatMessage::system("be brief"),
                ChatMessage::system("Task goal: add"),
                ChatMessage::user("hi"),
                ChatMessage::assistant("hello"),
                ChatMessage::user("2+3?"),
                asked,
                ChatMessage::tool("toolu_1", "add", "5"),
            ]),
            tools: vec![ToolSpec {
                name: "add".into(),
                description: "adds".into(),
                input_schema: json!({"type": "object"}),
            }]
            .into(),
            temperature: Some(0.2),
            ..ChatRequest::default()
        };
        let body = request_body("m", &request, &options()).unwrap().to_value();
        let expected = json!({
            "model": "m",
            "max_tokens": 4096,
            "stream": true,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "tools": [{"name": "add", "description": "adds", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "auto"},
            "system": [
                {"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Task goal: add"},
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
                {"role": "user", "content": [{"type": "text", "text": "2+3?"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "2+3 is 5", "signature": "sig-1"},
                    {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2}},
                ]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                    "content": "5", "cache_control": {"type": "ephemeral"}}]},
            ],
        });
        assert_eq!(body, expected);
    }

    #[test]
    fn a_tool_loop_begun_by_another_provider_is_sent_without_thinking() {
        let request = ChatRequest {
            messages: crate::llm::shared([
                ChatMessage::user("2+3?"),
                ChatMessage::assistant_calls("", vec![call()]),
                ChatMessage::tool("toolu_1", "add", "5"),
            ]),
            temperature: Some(0.5),
            json_mode: true,
            ..ChatRequest::default()
        };
        let options = AnthropicOptions {
            cache: false,
            stream: false,
            ..options()
        };
        let body = request_body("m", &request, &options).unwrap().to_value();
        assert_eq!(body.get("thinking"), None);
        assert_eq!(body["temperature"], json!(0.5));
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": JSON_INSTRUCTION}])
        );
        assert_eq!(body["messages"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn a_whole_reply_gives_text_calls_usage_and_the_signed_thinking() {
        let body = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [
                {"type": "thinking", "thinking": "Add.", "signature": "sig"},
                {"type": "text", "text": "Calling."},
                {"type": "tool_use", "id": "toolu_9", "name": "add", "input": {"a": 1}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "cache_creation_input_tokens": 100,
                      "cache_read_input_tokens": 1000, "output_tokens": 30}
        });
        let reply = parse_reply(body.to_string().as_bytes(), "m").unwrap();
        assert_eq!(reply.text, "Calling.");
        assert_eq!(reply.reasoning, "Add.");
        assert_eq!(reply.tool_calls[0].arguments, json!({"a": 1}));
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(reply.parts[0].item, body["content"][0]);
        assert_eq!(
            reply.usage,
            Some(Usage {
                cached_tokens: 1000,
                cache_write_tokens: 100,
                ..Usage::new(1110, 30)
            })
        );
    }
}
