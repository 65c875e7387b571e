//! [`OpenAiModel`]: any OpenAI-compatible `POST {base_url}/chat/completions` endpoint (OpenAI,
//! vLLM, Ollama, llama.cpp server, DeepSeek, Qwen…), whole or streamed.
//!
//! The wire format lives in [`wire`], the streaming machinery in [`stream`], what a failed
//! exchange means and whether to try again in [`failure`]; this file owns the HTTP exchange:
//! connection failure → `Unreachable`, non-2xx → `Auth` / `ModelNotFound` / `ContextLength` /
//! `Http` (body quoted, cut to 1000 characters), `timeout` elapsed (for one attempt, streamed
//! body included) → `Timeout`, a reply that is not the wire format → `BadResponse`.
//!
//! A 429, a 5xx or a refused connection is retried up to `max_retries` times, waiting what
//! `Retry-After` asks or an exponential backoff with jitter. A stream that breaks after its
//! first bytes is not retried: its deltas have already reached the user.

mod failure;
pub mod probe;
mod stream;
#[cfg(test)]
mod stream_props;
mod wire;

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;

use self::failure::{into_error, jitter, parse_retry_after, Caller, Failure};
use self::stream::{SseParser, StreamState};
use self::wire::{parse_reply, request_body};
use super::{ChatModel, ChatRequest, ChatResponse, DeltaSender, LlmError};

/// Longest wait for the TCP/TLS connection itself, whatever the overall timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A chat model served over the OpenAI chat-completions API.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
    timeout: Duration,
    stream: bool,
    temperature: Option<f32>,
    max_retries: u32,
    /// The environment variable the key came from, named in a 401/403 error.
    key_variable: Option<String>,
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
        let base = base_url.trim().trim_end_matches('/');
        let parsed = reqwest::Url::parse(base).map_err(|e| {
            LlmError::Config(format!(
                "base_url `{base_url}` is not a URL ({e}); write it like `https://api.openai.com/v1`"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(LlmError::Config(format!(
                "base_url `{base_url}` must start with http:// or https://"
            )));
        }
        if model.trim().is_empty() {
            return Err(LlmError::Config(
                "the model name is empty; set `model` (e.g. `gpt-4o-mini`) in the [models] config"
                    .into(),
            ));
        }
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            url: format!("{base}/chat/completions"),
            model: model.to_string(),
            api_key: api_key.filter(|k| !k.is_empty()),
            timeout,
            stream,
            temperature,
            max_retries: 0,
            key_variable: None,
        })
    }

    /// Retry a 429, a 5xx or a refused connection up to `max_retries` times.
    pub fn with_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Name the environment variable the key came from, for the error of a refused key.
    pub fn with_key_variable(mut self, variable: Option<String>) -> Self {
        self.key_variable = variable;
        self
    }

    /// Send the request, retrying transient failures; the final failure is classified.
    async fn send(&self, body: &Value) -> Result<reqwest::Response, LlmError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let failure = match self.send_once(body).await {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            if attempt > self.max_retries || !failure.is_transient() {
                let caller = Caller {
                    url: &self.url,
                    model: &self.model,
                    key_variable: self.key_variable.as_deref(),
                    attempts: attempt,
                };
                return Err(into_error(failure, &caller));
            }
            let wait = failure.delay(attempt, jitter());
            tracing::warn!(model = %self.model, attempt, ?wait, ?failure, "model call failed; retrying");
            tokio::time::sleep(wait).await;
        }
    }

    async fn send_once(&self, body: &Value) -> Result<reqwest::Response, Failure> {
        let mut builder = self.client.post(&self.url).json(body);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder
            .send()
            .await
            .map_err(|e| Failure::Other(self.transport_error(&e, "sending the request")))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let body = response.text().await.unwrap_or_default();
        Err(Failure::Status {
            status: status.as_u16(),
            body,
            retry_after,
        })
    }

    async fn read_whole(&self, response: reqwest::Response) -> Result<ChatResponse, LlmError> {
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(&e, "reading the reply"))?;
        parse_reply(&bytes)
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        deltas: Option<&DeltaSender>,
    ) -> Result<ChatResponse, LlmError> {
        let mut parser = SseParser::default();
        let mut state = StreamState::default();
        let mut body = response.bytes_stream();
        'read: while let Some(chunk) = body.next().await {
            let chunk =
                chunk.map_err(|e| self.transport_error(&e, "reading the streamed reply"))?;
            for data in parser.push(&chunk)? {
                feed(&mut state, &data, deltas)?;
                if state.is_done() {
                    break 'read;
                }
            }
        }
        if !state.is_done() {
            if let Some(data) = parser.finish()? {
                feed(&mut state, &data, deltas)?;
            }
        }
        state.finish()
    }

    fn transport_error(&self, error: &reqwest::Error, during: &str) -> LlmError {
        if error.is_timeout() {
            return LlmError::Timeout(self.timeout);
        }
        LlmError::Unreachable {
            url: self.url.clone(),
            reason: format!("{during}: {}", error_chain(error)),
        }
    }
}

/// Apply one event and pass its text on; a dropped receiver just stops the forwarding.
fn feed(state: &mut StreamState, data: &str, deltas: Option<&DeltaSender>) -> Result<(), LlmError> {
    if let (Some(fragment), Some(tx)) = (state.apply(data)?, deltas) {
        let _ = tx.send(fragment);
    }
    Ok(())
}

/// An error and its sources, `outer: inner: innermost` (reqwest hides the useful part inside).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

#[async_trait]
impl ChatModel for OpenAiModel {
    fn id(&self) -> String {
        format!("openai:{}", self.model)
    }

    fn model_name(&self) -> String {
        self.model.clone()
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        deltas: Option<DeltaSender>,
    ) -> Result<ChatResponse, LlmError> {
        let body = request_body(&self.model, request, self.stream, self.temperature)?;
        tracing::debug!(
            model = %self.model,
            messages = request.messages.len(),
            tools = request.tools.len(),
            stream = self.stream,
            "chat completion request"
        );
        let response = self.send(&body).await?;
        // A server that ignores `stream: true` answers with one JSON object: accept it.
        if !self.stream || is_json(&response) {
            let reply = self.read_whole(response).await?;
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
        assert_eq!(m.url, "http://127.0.0.1:1/v1/chat/completions");
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
        let t = Duration::from_secs(5);
        let m = OpenAiModel::new("http://x/v1", "m", Some(String::new()), t, false, None).unwrap();
        assert!(m.api_key.is_none());
    }
}
