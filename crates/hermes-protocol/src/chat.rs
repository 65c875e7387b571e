//! The conversation as it travels between actors and to models: messages, tool calls, the
//! tools a model is shown, and token usage.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// A tool call the model asked for. `arguments` is the parsed JSON the model sent; when the
/// model sent text that is not JSON, it is kept as a JSON string so validation can say so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// One message of a conversation, in the shape every provider understands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChatMessage {
    pub role: Role,
    #[serde(default)]
    pub content: String,
    /// Set on assistant messages that call tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Set on tool messages: which call this is the result of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Set on tool messages: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the provider that wrote this (assistant) message needs back with it on its next
    /// request: reasoning items, signed thinking blocks. Every other provider leaves them out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_parts: Vec<ProviderPart>,
}

/// Something a provider needs back, unchanged, on its next request: an OpenAI Responses
/// reasoning item (with its `encrypted_content`), an Anthropic thinking block and its
/// signature. Opaque to everything but the provider and model that made it: another provider
/// (a fallback, a session moved to another model) never sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProviderPart {
    /// The wire format that made it: `openai-responses` or `anthropic`.
    pub provider: String,
    /// The model that made it (encrypted reasoning and signatures are only valid for it).
    pub model: String,
    /// The item or block exactly as the provider sent it.
    pub item: Value,
}

impl ProviderPart {
    /// True when this part was made by `provider`'s `model`.
    pub fn is_for(&self, provider: &str, model: &str) -> bool {
        self.provider == provider && self.model == model
    }
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }
    pub fn assistant_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls: calls,
            ..Self::plain(Role::Assistant, content)
        }
    }
    pub fn tool(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            name: Some(name.into()),
            ..Self::plain(Role::Tool, content)
        }
    }
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            provider_parts: Vec::new(),
        }
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
}

/// Token usage as the provider reported it. `prompt_tokens` counts every input token, the
/// cached ones (read from the provider's prompt cache) and those written to the cache
/// included; `completion_tokens` counts every output token, reasoning included.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    /// Input tokens read from the provider's prompt cache (billed at the cached price).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u32,
    /// Input tokens written to the prompt cache (Anthropic bills them above the input price).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u32,
    /// Output tokens the model spent reasoning before it answered.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u32,
}

impl Usage {
    /// Just prompt and completion tokens, nothing cached, no reasoning.
    pub const fn new(prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            cached_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: 0,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_usage_stored_before_provider_parts_existed_still_read() {
        let old = r#"{"role":"assistant","content":"","tool_calls":[{"id":"c","name":"add","arguments":{}}]}"#;
        let message: ChatMessage = serde_json::from_str(old).unwrap();
        assert!(message.provider_parts.is_empty());
        let usage: Usage =
            serde_json::from_str(r#"{"prompt_tokens":9,"completion_tokens":2}"#).unwrap();
        assert_eq!(usage, Usage::new(9, 2));
        // And a message without parts is written as before.
        assert_eq!(serde_json::to_string(&message).unwrap(), old);
        assert_eq!(
            serde_json::to_string(&usage).unwrap(),
            r#"{"prompt_tokens":9,"completion_tokens":2}"#
        );
    }
}
