//! [`OpenAiModel`]: any OpenAI-compatible `POST {base_url}/chat/completions` endpoint (OpenAI,
//! vLLM, Ollama, llama.cpp server, DeepSeek, Qwen…), whole or streamed.
//!
//! The wire format lives in [`wire`], the stream's accumulator in [`stream`]; the HTTP exchange
//! (retries, backoff, `Retry-After`, the errors that name the fix) is the shared
//! [`crate::llm::http`]: connection failure → `Unreachable`, non-2xx → `Auth` /
//! `ModelNotFound` / `ContextLength` / `Http` (body quoted, cut to 1000 characters), `timeout`
//! elapsed (for one attempt, streamed body included) → `Timeout`, a reply that is not the wire
//! format → `BadResponse`.

mod stream;
#[cfg(test)]
mod stream_props;
mod wire;

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, AUTHORIZATION};

use self::stream::StreamState;
use self::wire::{parse_reply, request_body};
use super::http::{base_url, header_value, is_json, Endpoint};
use super::{ChatModel, ChatRequest, ChatResponse, DeltaSender, LlmError};
use crate::config::models::OPENAI_API_KEY;

/// A chat model served over the OpenAI chat-completions API.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    endpoint: Endpoint,
    stream: bool,
    temperature: Option<f32>,
}

impl OpenAiModel {
    /// A model `model` at `base_url` (e.g. `https://api.openai.com/v1`); `api_key` is sent as a
    /// bearer token when set; `timeout` bounds one whole exchange; `stream` asks for SSE;
    /// `temperature` applies when a request sets none.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Duration,
        stream: bool,
        temperature: Option<f32>,
    ) -> Result<Self, LlmError> {
        let base = self::base_url(base_url, "https://api.openai.com/v1")?;
        let endpoint = Endpoint::new(
            format!("{base}/chat/completions"),
            model,
            timeout,
            bearer(api_key)?,
            OPENAI_API_KEY,
        )?;
        Ok(Self {
            endpoint,
            stream,
            temperature,
        })
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
                    // A dropped receiver just stops the forwarding.
                    let _ = tx.send(fragment);
                }
                Ok(state.is_done())
            })
            .await?;
        state.finish()
    }
}

/// `Authorization: Bearer <key>` when there is a key (an empty one sends nothing).
pub(crate) fn bearer(api_key: Option<String>) -> Result<HeaderMap, LlmError> {
    let mut headers = HeaderMap::new();
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        headers.insert(
            AUTHORIZATION,
            header_value("API key", &format!("Bearer {key}"))?,
        );
    }
    Ok(headers)
}

#[async_trait]
impl ChatModel for OpenAiModel {
    fn id(&self) -> String {
        format!("openai:{}", self.endpoint.model)
    }

    fn model_name(&self) -> String {
        self.endpoint.model.clone()
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        deltas: Option<DeltaSender>,
    ) -> Result<ChatResponse, LlmError> {
        let body = request_body(&self.endpoint.model, request, self.stream, self.temperature)?;
        tracing::debug!(
            model = %self.endpoint.model,
            messages = request.messages.len(),
            tools = request.tools.len(),
            stream = self.stream,
            "chat completion request"
        );
        let body = serde_json::to_vec(&body)
            .map_err(|e| LlmError::Config(format!("cannot encode the request: {e}")))?;
        let response = self.endpoint.send(&body).await?;
        // A server that ignores `stream: true` answers with one JSON object: accept it.
        if !self.stream || is_json(&response) {
            let reply = parse_reply(&self.endpoint.read_whole(response).await?)?;
            if let (true, Some(tx)) = (self.stream && !reply.text.is_empty(), &deltas) {
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
    fn base_url_is_validated_and_joined_without_double_slash() {
        let t = Duration::from_secs(5);
        let m = OpenAiModel::new("http://127.0.0.1:1/v1/", "m", None, t, true, None).unwrap();
        assert_eq!(m.endpoint.url, "http://127.0.0.1:1/v1/chat/completions");
        assert_eq!(m.id(), "openai:m");
        for bad in ["not a url", "ftp://x/v1"] {
            let err = OpenAiModel::new(bad, "m", None, t, true, None).unwrap_err();
            assert!(matches!(err, LlmError::Config(_)), "{bad}: {err}");
        }
        let err = OpenAiModel::new("http://x/v1", " ", None, t, true, None).unwrap_err();
        assert!(err.to_string().contains("model name is empty"), "{err}");
    }

    #[test]
    fn empty_api_key_sends_no_auth_header() {
        assert!(bearer(Some(String::new())).unwrap().is_empty());
        assert_eq!(bearer(Some("k".into())).unwrap()[AUTHORIZATION], "Bearer k");
    }
}
