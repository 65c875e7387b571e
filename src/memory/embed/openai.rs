//! [`OpenAiEmbedder`]: any OpenAI-compatible embeddings endpoint
//! (`POST {base_url}/embeddings` with `{"model", "input": [texts]}`, answer
//! `{"data": [{"index", "embedding"}]}`). Vectors are L2-normalised here, whatever the server
//! does, and put back in input order by `index`.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::{normalize, EmbedError, Embedder};

/// Most texts sent in one request; longer inputs are split into several requests.
pub const MAX_BATCH: usize = 64;

/// An OpenAI-compatible embeddings endpoint.
pub struct OpenAiEmbedder {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
    id: String,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    /// `base_url` is the API root (`…/v1`); `api_key`, when set and non-empty, is sent as a
    /// bearer token; `timeout_secs` bounds one request.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout_secs: u64,
    ) -> Result<Self, EmbedError> {
        let url = format!("{}/embeddings", base_url.trim_end_matches('/'));
        reqwest::Url::parse(&url).map_err(|e| EmbedError::Http {
            url: url.clone(),
            reason: format!("not a valid URL ({e})"),
        })?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(timeout_secs.max(1)))
            .build()
            .map_err(|e| EmbedError::Http {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        Ok(Self {
            client,
            url,
            id: format!("openai:{model}"),
            model: model.to_string(),
            api_key: api_key.filter(|k| !k.is_empty()),
        })
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let http = |reason: String| EmbedError::Http {
            url: self.url.clone(),
            reason,
        };
        let mut request = self
            .client
            .post(&self.url)
            .json(&json!({"model": self.model, "input": texts}));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| http(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let excerpt: String = body.chars().take(300).collect();
            return Err(http(format!("HTTP {status}: {excerpt}")));
        }
        let parsed: Response = response.json().await.map_err(|e| EmbedError::BadResponse {
            url: self.url.clone(),
            reason: e.to_string(),
        })?;
        order_vectors(parsed.data, texts.len()).map_err(|reason| EmbedError::BadResponse {
            url: self.url.clone(),
            reason,
        })
    }
}

/// The items' vectors in `index` order, normalised; every index `0..n` exactly once.
fn order_vectors(items: Vec<Item>, n: usize) -> Result<Vec<Vec<f32>>, String> {
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; n];
    for item in items {
        let slot = slots
            .get_mut(item.index)
            .ok_or_else(|| format!("index {} is out of range for {n} inputs", item.index))?;
        let mut v = item.embedding;
        normalize(&mut v);
        *slot = Some(v);
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, v)| v.ok_or_else(|| format!("no embedding for input {i}")))
        .collect()
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(MAX_BATCH) {
            out.extend(self.embed_batch(batch).await?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_come_back_in_input_order_and_normalised() {
        let items = vec![
            Item {
                index: 1,
                embedding: vec![0.0, 2.0],
            },
            Item {
                index: 0,
                embedding: vec![3.0, 0.0],
            },
        ];
        assert_eq!(
            order_vectors(items, 2).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
    }

    #[test]
    fn missing_or_out_of_range_index_is_an_error() {
        let one = || Item {
            index: 0,
            embedding: vec![1.0],
        };
        assert!(order_vectors(vec![one()], 2)
            .unwrap_err()
            .contains("input 1"));
        let far = Item {
            index: 5,
            embedding: vec![1.0],
        };
        assert!(order_vectors(vec![one(), far], 2)
            .unwrap_err()
            .contains("out of range"));
    }

    #[test]
    fn id_names_the_model_and_bad_url_is_refused() {
        let e = OpenAiEmbedder::new("http://127.0.0.1:1/v1/", "mini", None, 5).unwrap();
        assert_eq!(e.id(), "openai:mini");
        assert_eq!(e.url, "http://127.0.0.1:1/v1/embeddings");
        assert!(OpenAiEmbedder::new("not a url", "m", None, 5).is_err());
    }
}
