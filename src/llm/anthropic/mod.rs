//! [`AnthropicModel`]: the Anthropic Messages API (`POST {base_url}/v1/messages`; Anthropic,
//! and Ollama ≥ 0.14, llama.cpp), whole or streamed.
//!
//! `tool_use` / `tool_result` blocks carry tool calls and their results; with
//! `thinking_budget` set the model thinks first, and each thinking block comes back signed: it
//! is kept beside the assistant message ([`crate::llm::ProviderPart`]) and returned unchanged
//! with the tool results, as the API requires. `cache_control` breakpoints (see [`wire`])
//! make the stable front of every request a prompt-cache hit; usage reports
//! `cache_creation_input_tokens` and `cache_read_input_tokens`.
//!
//! Auth is `x-api-key`, the API version the `anthropic-version` header. A 529
//! (`overloaded_error`) is retried like a 429, and a 429's wait comes from `retry-after` or
//! the `anthropic-ratelimit-*-reset` headers ([`crate::llm::http`]).

mod stream;
#[cfg(test)]
mod stream_props;
mod wire;

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::HeaderMap;

use self::stream::StreamState;
use self::wire::{parse_reply, request_body};
use super::http::{self, header_value, is_json, Endpoint};
use super::{ChatModel, ChatRequest, ChatResponse, DeltaSender, LlmError};

/// The provider's name in configuration and in the parts it keeps.
pub const PROVIDER: &str = "anthropic";
/// The environment variable read for the key when a table names none.
pub const ANTHROPIC_API_KEY: &str = "ANTHROPIC_API_KEY";
/// The API version sent when the table names none.
pub const DEFAULT_VERSION: &str = "2023-06-01";

/// How requests are shaped, from the model's table.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicOptions {
    /// Ask for SSE.
    pub stream: bool,
    /// Applies when a request sets none, and only without thinking.
    pub temperature: Option<f32>,
    /// `max_tokens` (the API requires it) when a request sets none; thinking included.
    pub max_tokens: u32,
    /// Extended thinking with this many tokens (at least 1024); none: no thinking.
    pub thinking_budget: Option<u32>,
    /// Place `cache_control` breakpoints.
    pub cache: bool,
    /// The `anthropic-version` header.
    pub version: String,
}

impl Default for AnthropicOptions {
    fn default() -> Self {
        Self {
            stream: true,
            temperature: None,
            max_tokens: 4096,
            thinking_budget: None,
            cache: true,
            version: DEFAULT_VERSION.into(),
        }
    }
}

/// A model served over the Anthropic Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicModel {
    endpoint: Endpoint,
    options: AnthropicOptions,
}

impl AnthropicModel {
    /// Model `model` at `base_url` (`https://api.anthropic.com`; a trailing `/v1` is
    /// accepted too); `api_key` is sent as `x-api-key` when set.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Duration,
        options: AnthropicOptions,
    ) -> Result<Self, LlmError> {
        if let Some(budget) = options.thinking_budget {
            if budget < 1024 {
                return Err(LlmError::Config(format!(
                    "thinking_budget = {budget} is below the API's minimum of 1024 tokens; raise \
                     it, or remove it to answer without extended thinking"
                )));
            }
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-version",
            header_value("anthropic_version", &options.version)?,
        );
        if let Some(key) = api_key.filter(|k| !k.is_empty()) {
            headers.insert("x-api-key", header_value("API key", &key)?);
        }
        let endpoint = Endpoint::new(
            messages_url(&http::base_url(base_url, "https://api.anthropic.com")?),
            model,
            timeout,
            headers,
            ANTHROPIC_API_KEY,
        )?;
        Ok(Self { endpoint, options })
    }

    /// Retry a 429, a 529, a 5xx or a refused connection up to `max_retries` times.
    pub fn with_retries(mut self, max_retries: u32) -> Self {
        self.endpoint.set_retries(max_retries);
        self
    }

    /// Name the environment variable the key came from, for the error of a refused key.
    pub fn with_key_variable(mut self, variable: Option<String>) -> Self {
        self.endpoint.set_key_variable(variable);
        self
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        deltas: Option<&DeltaSender>,
    ) -> Result<ChatResponse, LlmError> {
        let mut state = StreamState::default();
        self.endpoint
            .read_events(response, |data| {
                if let (Some(fragment), Some(tx)) = (state.apply(data)?, deltas) {
                    let _ = tx.send(fragment);
                }
                Ok(state.is_done())
            })
            .await?;
        state.finish(&self.endpoint.model)
    }
}

/// `{base}/v1/messages`, or `{base}/messages` for a base that already ends in `/v1`.
pub fn messages_url(base: &str) -> String {
    match base.strip_suffix("/v1") {
        Some(_) => format!("{base}/messages"),
        None => format!("{base}/v1/messages"),
    }
}

#[async_trait]
impl ChatModel for AnthropicModel {
    fn id(&self) -> String {
        format!("{PROVIDER}:{}", self.endpoint.model)
    }

    fn model_name(&self) -> String {
        self.endpoint.model.clone()
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        deltas: Option<DeltaSender>,
    ) -> Result<ChatResponse, LlmError> {
        let model = &self.endpoint.model;
        let body = request_body(model, request, &self.options)?;
        tracing::debug!(
            model = %model,
            messages = request.messages.len(),
            tools = request.tools.len(),
            stream = self.options.stream,
            "messages request"
        );
        let response = self.endpoint.send(&body.to_bytes()).await?;
        if !self.options.stream || is_json(&response) {
            let reply = parse_reply(&self.endpoint.read_whole(response).await?, model)?;
            if let (true, Some(tx)) = (self.options.stream && !reply.text.is_empty(), &deltas) {
                let _ = tx.send(reply.text.clone());
            }
            return Ok(reply);
        }
        self.read_stream(response, deltas.as_ref()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_base_url_slash_v1_messages_either_way() {
        assert_eq!(
            messages_url("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(messages_url("http://h:1/v1"), "http://h:1/v1/messages");
        let t = Duration::from_secs(5);
        let m = AnthropicModel::new(
            "http://h:1",
            "claude-x",
            None,
            t,
            AnthropicOptions::default(),
        )
        .unwrap();
        assert_eq!(m.id(), "anthropic:claude-x");
    }

    #[test]
    fn a_thinking_budget_below_the_minimum_is_refused_with_the_fix() {
        let options = AnthropicOptions {
            thinking_budget: Some(100),
            ..AnthropicOptions::default()
        };
        let t = Duration::from_secs(5);
        let err = AnthropicModel::new("http://h:1", "c", None, t, options).unwrap_err();
        assert!(err.to_string().contains("1024"), "{err}");
    }
}
