//! [`ResponsesModel`]: the OpenAI Responses API (`POST {base_url}/responses`; OpenAI, and
//! Ollama, vLLM, LM Studio), whole or streamed.
//!
//! Items, not messages: a tool call is a `function_call` item and its result a
//! `function_call_output`; a reasoning model's reasoning is a `reasoning` item. With
//! `store = false` (the default) nothing stays on the server, so the request asks for
//! `include = ["reasoning.encrypted_content"]` and the reasoning items come back to us; they
//! are kept beside the assistant message ([`crate::llm::ProviderPart`]) and sent back
//! unchanged on the next request to this model, so it keeps its chain of thought across tool
//! rounds. `prompt_cache_key` (one per session) routes a session's requests to the same
//! prompt cache; usage reports `cached_tokens` and `reasoning_tokens`.
//!
//! The wire format lives in [`wire`], the stream's accumulator in [`stream`], the HTTP
//! exchange (retries, backoff, `Retry-After`, the errors that name the fix) in
//! [`crate::llm::http`].

mod stream;
#[cfg(test)]
mod stream_props;
mod wire;

use std::time::Duration;

use async_trait::async_trait;

use self::stream::StreamState;
use self::wire::{parse_reply, request_body};
use super::http::{base_url, is_json, Endpoint};
use super::openai::bearer;
use super::{ChatModel, ChatRequest, ChatResponse, DeltaSender, LlmError};
use crate::config::models::OPENAI_API_KEY;

/// The provider's name in configuration and in the parts it keeps.
pub const PROVIDER: &str = "openai-responses";

/// How requests are shaped, from the model's table.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesOptions {
    /// Ask for SSE.
    pub stream: bool,
    /// Applies when a request sets none, and only without `reasoning_effort`.
    pub temperature: Option<f32>,
    /// `reasoning.effort`: `minimal`, `low`, `medium`, `high` (reasoning models only).
    pub reasoning_effort: Option<String>,
    /// `reasoning.summary`: `auto`, `concise` or `detailed` — a readable summary of the
    /// reasoning, counted for nothing but shown in traces.
    pub reasoning_summary: Option<String>,
    /// Keep responses on the server (`store: true`); false sends reasoning back encrypted.
    pub store: bool,
    /// Let the model call several tools in one step.
    pub parallel_tool_calls: bool,
    /// Bound on output tokens (reasoning included) when a request sets none.
    pub max_output_tokens: Option<u32>,
}

impl Default for ResponsesOptions {
    fn default() -> Self {
        Self {
            stream: true,
            temperature: None,
            reasoning_effort: None,
            reasoning_summary: None,
            store: false,
            parallel_tool_calls: true,
            max_output_tokens: None,
        }
    }
}

/// A model served over the OpenAI Responses API.
#[derive(Debug, Clone)]
pub struct ResponsesModel {
    endpoint: Endpoint,
    options: ResponsesOptions,
}

impl ResponsesModel {
    /// Model `model` at `base_url` (e.g. `https://api.openai.com/v1`); `api_key` is sent as a
    /// bearer token when set; `timeout` bounds one whole exchange.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Duration,
        options: ResponsesOptions,
    ) -> Result<Self, LlmError> {
        let base = self::base_url(base_url, "https://api.openai.com/v1")?;
        let endpoint = Endpoint::new(
            format!("{base}/responses"),
            model,
            timeout,
            bearer(api_key)?,
            OPENAI_API_KEY,
        )?;
        Ok(Self { endpoint, options })
    }

    /// Retry a 429, a 5xx or a refused connection up to `max_retries` times.
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

#[async_trait]
impl ChatModel for ResponsesModel {
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
            "responses request"
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
    fn the_endpoint_is_base_url_slash_responses() {
        let t = Duration::from_secs(5);
        let m = ResponsesModel::new(
            "http://h:1/v1/",
            "gpt-5-mini",
            None,
            t,
            ResponsesOptions::default(),
        )
        .unwrap();
        assert_eq!(m.endpoint.url, "http://h:1/v1/responses");
        assert_eq!(m.id(), "openai-responses:gpt-5-mini");
    }
}
