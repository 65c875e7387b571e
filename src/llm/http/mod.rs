//! What every HTTP model provider shares: one [`Endpoint`] (URL, headers, timeout) that sends a
//! JSON body and retries what is worth retrying, the SSE parser ([`sse`]), what a failed
//! exchange means ([`failure`]) and small text helpers ([`text`]). A provider's folder holds
//! only its wire format.
//!
//! A 429, a 529, a 5xx or a refused connection is retried up to `max_retries` times, waiting
//! what the server asks (`Retry-After`, `retry-after-ms`, the providers' rate-limit reset
//! headers) or an exponential backoff with jitter. A stream that breaks after its first bytes
//! is not retried: its deltas have already reached the user.

pub(crate) mod failure;
pub(crate) mod sse;
pub(crate) mod text;

use std::time::Duration;

use futures::StreamExt;
use reqwest::header::HeaderMap;

use self::failure::{into_error, jitter, retry_wait, Caller, Failure};
use self::sse::SseParser;
use self::text::error_chain;
use super::LlmError;

/// Longest wait for the TCP/TLS connection itself, whatever the overall timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One model endpoint: where requests go, what they carry besides the body, and how hard to
/// try.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    client: reqwest::Client,
    pub(crate) url: String,
    pub(crate) model: String,
    headers: HeaderMap,
    pub(crate) timeout: Duration,
    max_retries: u32,
    /// The environment variable the key came from, named in a 401/403 error.
    key_variable: Option<String>,
    /// The variable to name when no key was sent (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`).
    default_key_variable: &'static str,
}

impl Endpoint {
    /// `POST url` for `model`, with `headers` (auth, versions) on every request; `timeout`
    /// bounds one whole attempt.
    pub(crate) fn new(
        url: String,
        model: &str,
        timeout: Duration,
        headers: HeaderMap,
        default_key_variable: &'static str,
    ) -> Result<Self, LlmError> {
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
            url,
            model: model.to_string(),
            headers,
            timeout,
            max_retries: 0,
            key_variable: None,
            default_key_variable,
        })
    }

    pub(crate) fn set_retries(&mut self, max_retries: u32) {
        self.max_retries = max_retries;
    }

    pub(crate) fn set_key_variable(&mut self, variable: Option<String>) {
        self.key_variable = variable;
    }

    /// Send `body` (JSON), retrying transient failures; the final failure is classified.
    pub(crate) async fn send(&self, body: &[u8]) -> Result<reqwest::Response, LlmError> {
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
                    default_key_variable: self.default_key_variable,
                    attempts: attempt,
                };
                return Err(into_error(failure, &caller));
            }
            let wait = failure.delay(attempt, jitter());
            tracing::warn!(model = %self.model, url = %self.url, attempt, ?wait, ?failure, "model call failed; retrying");
            tokio::time::sleep(wait).await;
        }
    }

    async fn send_once(&self, body: &[u8]) -> Result<reqwest::Response, Failure> {
        let response = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec())
            .send()
            .await
            .map_err(|e| Failure::Other(self.transport_error(&e, "sending the request")))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_wait(response.headers());
        let body = response.text().await.unwrap_or_default();
        Err(Failure::Status {
            status: status.as_u16(),
            body,
            retry_after,
        })
    }

    /// The whole body of a reply that is not streamed.
    pub(crate) async fn read_whole(
        &self,
        response: reqwest::Response,
    ) -> Result<bytes::Bytes, LlmError> {
        response
            .bytes()
            .await
            .map_err(|e| self.transport_error(&e, "reading the reply"))
    }

    /// Feed each SSE event's data to `on_event` until it says the stream is done (`true`) or
    /// the body ends.
    pub(crate) async fn read_events(
        &self,
        response: reqwest::Response,
        mut on_event: impl FnMut(&str) -> Result<bool, LlmError>,
    ) -> Result<(), LlmError> {
        let mut parser = SseParser::default();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk =
                chunk.map_err(|e| self.transport_error(&e, "reading the streamed reply"))?;
            for data in parser.push(&chunk)? {
                if on_event(&data)? {
                    return Ok(());
                }
            }
        }
        if let Some(data) = parser.finish()? {
            on_event(&data)?;
        }
        Ok(())
    }

    pub(crate) fn transport_error(&self, error: &reqwest::Error, during: &str) -> LlmError {
        if error.is_timeout() {
            return LlmError::Timeout(self.timeout);
        }
        LlmError::Unreachable {
            url: self.url.clone(),
            reason: format!("{during}: {}", error_chain(error)),
        }
    }
}

/// `base_url` trimmed of spaces and a trailing slash, after checking it is an http(s) URL;
/// `example` shows how one is written.
pub(crate) fn base_url(base_url: &str, example: &str) -> Result<String, LlmError> {
    let base = base_url.trim().trim_end_matches('/');
    let parsed = reqwest::Url::parse(base).map_err(|e| {
        LlmError::Config(format!(
            "base_url `{base_url}` is not a URL ({e}); write it like `{example}`"
        ))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(LlmError::Config(format!(
            "base_url `{base_url}` must start with http:// or https://"
        )));
    }
    Ok(base.to_string())
}

/// A header value from configuration or a key, or an error naming which.
pub(crate) fn header_value(
    what: &str,
    value: &str,
) -> Result<reqwest::header::HeaderValue, LlmError> {
    let mut value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
        LlmError::Config(format!(
            "the {what} contains characters an HTTP header cannot carry; check it for stray \
             newlines or quotes"
        ))
    })?;
    value.set_sensitive(what.contains("key"));
    Ok(value)
}

/// True when the reply is one JSON object (a server that ignored `stream: true`).
pub(crate) fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_is_validated_and_trimmed() {
        assert_eq!(
            base_url(" http://h:1/v1/ ", "x").unwrap(),
            "http://h:1/v1".to_string()
        );
        for bad in ["not a url", "ftp://x/v1"] {
            let err = base_url(bad, "https://api.openai.com/v1").unwrap_err();
            assert!(matches!(err, LlmError::Config(_)), "{bad}: {err}");
        }
    }

    #[test]
    fn empty_model_name_is_refused() {
        let err = Endpoint::new(
            "http://x".into(),
            " ",
            Duration::from_secs(1),
            HeaderMap::new(),
            "K",
        )
        .unwrap_err();
        assert!(err.to_string().contains("model name is empty"), "{err}");
    }
}
