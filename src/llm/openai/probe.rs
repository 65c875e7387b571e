//! [`probe`]: is an OpenAI-compatible endpoint there, does it take our key, and does it serve
//! our model? `GET {base_url}/models` answers all three on OpenAI, Ollama, vLLM and llama.cpp;
//! a server without that route gets a one-token chat completion instead.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::wire::{quote, QUOTE_CHARS};

/// What the endpoint said.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeOutcome {
    /// `/models` answered: the models it serves, and whether ours is among them.
    Listed {
        models: Vec<String>,
        has_model: bool,
    },
    /// `/models` is missing but a one-token completion with our model worked.
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

/// Ask `base_url` about `model`, sending `api_key` as a bearer token when given.
pub async fn probe(base_url: &str, model: &str, api_key: Option<&str>, timeout: Duration) -> Probe {
    let base = base_url.trim().trim_end_matches('/').to_string();
    let started = Instant::now();
    let outcome = match reqwest::Client::builder().timeout(timeout).build() {
        Ok(client) => ask(&client, &base, model, api_key).await,
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
    base: &str,
    model: &str,
    api_key: Option<&str>,
) -> ProbeOutcome {
    let authorised = |builder: reqwest::RequestBuilder| match api_key {
        Some(key) => builder.bearer_auth(key),
        None => builder,
    };
    let listed = authorised(client.get(format!("{base}/models")))
        .send()
        .await;
    let response = match listed {
        Ok(response) => response,
        Err(e) => {
            return ProbeOutcome::Failed(format!(
                "unreachable ({e}); check that the server runs and `base_url` / OPENAI_BASE_URL"
            ))
        }
    };
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    match status {
        200..=299 => listed_models(&body, model),
        401 | 403 => refused(status, &body, api_key.is_some()),
        _ => {
            let request = json!({"model": model, "max_tokens": 1,
                                 "messages": [{"role": "user", "content": "ping"}]});
            let sent = authorised(client.post(format!("{base}/chat/completions")))
                .json(&request)
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => ProbeOutcome::Completed,
                Ok(r) => {
                    let status = r.status().as_u16();
                    let body = r.text().await.unwrap_or_default();
                    match status {
                        401 | 403 => refused(status, &body, api_key.is_some()),
                        404 => ProbeOutcome::Failed(format!(
                            "HTTP 404 for /models and /chat/completions ({}); check that \
                             `base_url` ends in /v1 and that model `{model}` exists",
                            quote(body.trim(), 200)
                        )),
                        _ => ProbeOutcome::Failed(format!(
                            "a one-token completion answered HTTP {status}: {}",
                            quote(body.trim(), QUOTE_CHARS)
                        )),
                    }
                }
                Err(e) => ProbeOutcome::Failed(format!("unreachable ({e})")),
            }
        }
    }
}

fn refused(status: u16, body: &str, sent_key: bool) -> ProbeOutcome {
    let fix = if sent_key {
        "the key was refused: check OPENAI_API_KEY (or the table's `api_key_env`)"
    } else {
        "no key was sent: export OPENAI_API_KEY=<your key>"
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
