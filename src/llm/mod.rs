//! Chat models behind one small trait, so a provider's wire format touches one file.
//!
//! Providers, one folder per wire format: [`openai`] (any OpenAI-compatible chat-completions
//! endpoint, streaming included), [`responses`] (the OpenAI Responses API: reasoning items kept
//! across tool calls), [`anthropic`] (the Anthropic Messages API: signed thinking blocks,
//! prompt-cache breakpoints), [`replay`] (a deterministic scripted model read from a scenario
//! file, for the demo and tests) and [`bench`] (the instant model the engine benchmarks use).
//! What they share — the HTTP exchange with its retries and errors, the SSE parser — is
//! [`http`]. The configuration names one model per role: planner, summariser, extractor.
//!
//! The conversation stays provider-neutral ([`ChatMessage`]); what one provider needs back
//! (reasoning items, thinking signatures) rides beside its message as [`ProviderPart`]s, sent
//! back only to the provider and model that made them.

pub mod anthropic;
pub mod bench;
mod error_kind;
pub mod factory;
pub mod fallback;
pub(crate) mod http;
pub mod openai;
pub mod probe;
pub mod replay;
pub mod responses;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

pub use crate::protocol::chat::{ChatMessage, ProviderPart, Role, ToolCall, ToolSpec, Usage};
pub use error_kind::ModelErrorKind;

/// One call to a chat model.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Shared, not copied: a turn's context is its session's history (see [`ChatMessage`]'s
    /// `Arc` in [`crate::store::sessions::StoredMessage`]).
    pub messages: Vec<Arc<ChatMessage>>,
    /// Shared with the planning request that asked for it, uncopied.
    #[serde(default)]
    pub tools: Arc<[ToolSpec]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Ask for a JSON object reply (OpenAI `response_format: {type: json_object}`).
    #[serde(default)]
    pub json_mode: bool,
    /// Names the conversation for the provider's prompt cache (OpenAI `prompt_cache_key`):
    /// requests with the same key are routed to the same cache. One per session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_key: Option<String>,
}

/// Messages made for one request, in the shared form [`ChatRequest::messages`] takes.
pub fn shared(messages: impl IntoIterator<Item = ChatMessage>) -> Vec<Arc<ChatMessage>> {
    messages.into_iter().map(Arc::new).collect()
}

/// What the model answered: text, tool calls, or both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub text: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// What this provider needs back with the message on its next request (reasoning items,
    /// signed thinking blocks); stored beside the message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<ProviderPart>,
    /// The reasoning text the provider showed (a summary or the thinking itself), if any:
    /// counted for the reasoning tokens of a provider that reports none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
}

/// Where streamed text fragments go while the model is still answering.
pub type DeltaSender = mpsc::UnboundedSender<String>;

/// What can go wrong talking to a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    #[error("model endpoint {url} is unreachable: {reason}; check `base_url` in the [models] config and that the server runs")]
    Unreachable { url: String, reason: String },
    #[error("model endpoint answered HTTP {status} after {attempts} attempts: {body}; check that the server is healthy, or configure a `fallback` model for this role")]
    Http {
        status: u16,
        attempts: u32,
        body: String,
    },
    #[error("model endpoint {url} refused the API key (HTTP {status}: {body}); {hint}")]
    Auth {
        status: u16,
        url: String,
        hint: String,
        body: String,
    },
    #[error("model `{model}` was not found at {url} (HTTP 404: {body}); check `model` (run `hermes doctor` to see what the endpoint serves) and that `base_url` ends in /v1")]
    ModelNotFound {
        model: String,
        url: String,
        body: String,
    },
    #[error("the request does not fit the model's context window ({}, {}): {body}; lower `context_window` of the agent to the model's real window so older turns are summarised sooner", count_or("window", *limit), count_or("request", *requested))]
    ContextLength {
        limit: Option<u64>,
        requested: Option<u64>,
        body: String,
    },
    #[error("model reply could not be understood: {0}")]
    BadResponse(String),
    #[error("model did not answer within {0:?}; raise `timeout_secs` for this model or use a faster one")]
    Timeout(std::time::Duration),
    #[error("replay scenario has no rule for this request ({0}); add a rule to the scenario file")]
    NoReplayRule(String),
    #[error("model configuration is invalid: {0}")]
    Config(String),
    #[error("the model failed ({primary}) and so did its fallback ({fallback})")]
    BothFailed {
        primary: Box<LlmError>,
        fallback: Box<LlmError>,
    },
}

/// `"window 8192 tokens"`, or that the server did not say.
fn count_or(what: &str, count: Option<u64>) -> String {
    match count {
        Some(n) => format!("{what} {n} tokens"),
        None => format!("{what}: the server gave no count"),
    }
}

/// A chat model. Implementations must be cheap to share between tasks.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// A short id for logs and traces, e.g. `openai:gpt-4o-mini` or `replay:demo`.
    fn id(&self) -> String;

    /// The model name used to pick a tokenizer.
    fn model_name(&self) -> String;

    /// True when answering needs no network I/O (scripted and benchmark models): callers may
    /// then run it in their own task instead of on the I/O runtime.
    fn is_local(&self) -> bool {
        false
    }

    /// Answer `request`. When `deltas` is given and the provider streams, text fragments are
    /// sent there as they arrive; the full answer is returned at the end either way.
    async fn complete(
        &self,
        request: &ChatRequest,
        deltas: Option<DeltaSender>,
    ) -> Result<ChatResponse, LlmError>;
}
