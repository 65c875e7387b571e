//! [`probe`]: is a model endpoint there, does it take our key, and does it serve our model —
//! asked in the endpoint's own wire format ([`Wire`]).
//!
//! The model list answers all three: `GET {base_url}/models` on OpenAI-compatible servers
//! (OpenAI, Ollama, vLLM, llama.cpp, LM Studio), `GET {base_url}/v1/models` with `x-api-key`
//! and `anthropic-version` on Anthropic. A server without that route gets the smallest real
//! request instead: a one-token chat completion, a 16-token response, a one-token message.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::http::text::{quote, QUOTE_CHARS};

/// Which wire format the endpoint speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI Chat Completions (`provider = "openai"`).
    ChatCompletions,
    /// OpenAI Responses (`provider = "openai-responses"`).
    Responses,
    /// Anthropic Messages (`provider = "anthropic"`), with its `anthropic-version`.
    Anthropic { version: String },
}

impl Wire {
    fn key_variable(&self) -> &'static str {
        match self {
            Wire::Anthropic { .. } => "ANTHROPIC_API_KEY",
            _ => "OPENAI_API_KEY",
        }
    }

    fn authorised(
        &self,
        builder: reqwest::RequestBuilder,
        key: Option<&str>,
    ) -> reqwest::RequestBuilder {
        match (self, key) {
            (Wire::Anthropic { version }, key) => {
                let builder = builder.header("anthropic-version", version);
                match key {
                    Some(key) => builder.header("x-api-key", key),
                    None => builder,
                }
            }
            (_, Some(key)) => builder.bearer_auth(key),
            (_, None) => builder,
        }
    }

    /// The model list's URL.
    fn models_url(&self, base: &str) -> String {
        match self {
            Wire::Anthropic { .. } if !base.ends_with("/v1") => format!("{base}/v1/models"),
            _ => format!("{base}/models"),
        }
    }

    /// The smallest real request: its URL and body.
    fn ping(&self, base: &str, model: &str) -> (String, Value) {
        match self {
            Wire::ChatCompletions => (
                format!("{base}/chat/completions"),
                json!({"model": model, "max_tokens": 1,
                       "messages": [{"role": "user", "content": "ping"}]}),
            ),
            Wire::Responses => (
                format!("{base}/responses"),
                json!({"model": model, "max_output_tokens": 16, "store": false, "input": "ping"}),
            ),
            Wire::Anthropic { .. } => (
                super::anthropic::messages_url(base),
                json!({"model": model, "max_tokens": 1,
                       "messages": [{"role": "user", "content": "ping"}]}),
            ),
        }
    }
}

/// What the endpoint said.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeOutcome {
    /// The model list answered: the models it serves, and whether ours is among them.
    Listed {
        models: Vec<String>,
        has_model: bool,
    },
    /// The model list is missing but the smallest real request with our model worked.
    Completed,
    /// Something is wrong; the text says what and what to do.
    Failed(String),
}

/// The outcome and how long the endpoint took.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub url: String,
    pub outcome: ProbeOutcome,
    pub elapsed: Duration,
}

/// Ask `base_url`, speaking `wire`, about `model`, sending `api_key` when given.
pub async fn probe(
    wire: &Wire,
    base_url: &str,
    model: &str,
    api_key: Option<&str>,
    timeout: Duration,
) -> Probe {
    let base = base_url.trim().trim_end_matches('/').to_string();
    let started = Instant::now();
    let outcome = match reqwest::Client::builder().timeout(timeout).build() {
        Ok(client) => ask(&client, wire, &base, model, api_key).await,
        Err(e) => ProbeOutcome::Failed(format!("cannot build an HTTP client: {e}")),
    };
    Probe {
        url: base,
        outcome,
        elapsed: started.elapsed(),
    }
}

async fn ask(
    client: &reqwest::Client,
    wire: &Wire,
    base: &str,
    model: &str,
    api_key: Option<&str>,
) -> ProbeOutcome {
    let listed = wire
        .authorised(client.get(wire.models_url(base)), api_key)
        .send()
        .await;
    let response = match listed {
        Ok(response) => response,
        Err(e) => {
            return ProbeOutcome::Failed(format!(
                "unreachable ({e}); check that the server runs and its `base_url`"
            ))
        }
    };
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    let refuse = |status, body: &str| refused(status, body, api_key.is_some(), wire.key_variable());
    match status {
        200..=299 => listed_models(&body, model),
        401 | 403 => refuse(status, &body),
        _ => {
            let (url, request) = wire.ping(base, model);
            let sent = wire
                .authorised(client.post(&url), api_key)
                .json(&request)
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => ProbeOutcome::Completed,
                Ok(r) => {
                    let status = r.status().as_u16();
                    let body = r.text().await.unwrap_or_default();
                    match status {
                        401 | 403 => refuse(status, &body),
                        404 => ProbeOutcome::Failed(format!(
                            "HTTP 404 for the model list and for {url} ({}); check `base_url` \
                             and that model `{model}` exists",
                            quote(body.trim(), 200)
                        )),
                        _ => ProbeOutcome::Failed(format!(
                            "the smallest request answered HTTP {status}: {}",
                            quote(body.trim(), QUOTE_CHARS)
                        )),
                    }
                }
                Err(e) => ProbeOutcome::Failed(format!("unreachable ({e})")),
            }
        }
    }
}

fn refused(status: u16, body: &str, sent_key: bool, variable: &str) -> ProbeOutcome {
    let fix = if sent_key {
        format!("the key was refused: check {variable} (or the table's `api_key_env`)")
    } else {
        format!("no key was sent: export {variable}=<your key>")
    };
    ProbeOutcome::Failed(format!(
        "HTTP {status} ({}); {fix}",
        quote(body.trim(), 200)
    ))
}

fn listed_models(body: &str, model: &str) -> ProbeOutcome {
    let models: Vec<String> = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("data").and_then(Value::as_array).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    let has_model = models.iter().any(|m| m == model);
    ProbeOutcome::Listed { models, has_model }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_list_is_read_and_our_model_found() {
        let body = r#"{"object":"list","data":[{"id":"a"},{"id":"gpt-4o-mini"}]}"#;
        assert_eq!(
            listed_models(body, "gpt-4o-mini"),
            ProbeOutcome::Listed {
                models: vec!["a".into(), "gpt-4o-mini".into()],
                has_model: true
            }
        );
        assert!(matches!(
            listed_models("not json", "m"),
            ProbeOutcome::Listed {
                has_model: false,
                ..
            }
        ));
    }
}
