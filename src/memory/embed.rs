//! Embedders: turn memory texts and queries into unit vectors for recall's vector half.
//!
//! Four choices, picked by `[memory.embedder] kind` ([`crate::config::EmbedderConfig`]):
//! `static` (the default: [`static_model::StaticEmbedder`], a token-vector table distilled
//! from all-MiniLM-L6-v2, no extra build features), `none` (no embedder: BM25 only), `openai`
//! ([`openai::OpenAiEmbedder`], any OpenAI-compatible `POST {base_url}/embeddings`), and
//! `local` ([`local::LocalEmbedder`], all-MiniLM-L6-v2 in-process with candle, cargo feature
//! `local-embedder`). A missing static table is not an error: recall runs on BM25 alone and
//! says once how to install it.
//!
//! Every embedder has an [`Embedder::id`] (`openai:<model>`, `local:all-MiniLM-L6-v2`); stored
//! vectors carry it ([`super::vectors`]) and a query embedded by X is only ever compared with
//! vectors stored by X. Vectors are L2-normalised, so cosine similarity is a dot product.

pub mod local;
pub mod openai;
pub mod static_model;
pub mod wordpiece;

use std::sync::Arc;

use async_trait::async_trait;

use crate::config::EmbedderConfig;

/// What went wrong while embedding.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    #[error("embedding endpoint {url} failed: {reason}; check [memory.embedder] base_url, model and the API key, or set kind = \"none\"")]
    Http { url: String, reason: String },
    #[error("embedding endpoint {url} answered something unexpected: {reason}; it must follow the OpenAI /v1/embeddings response format")]
    BadResponse { url: String, reason: String },
    #[error("local embedder files in {dir} are missing or unreadable ({reason}); run scripts/fetch-embedder.sh or set [memory.embedder] model_dir")]
    ModelFiles { dir: String, reason: String },
    #[error("local embedder failed: {0}; this is a bug or a broken model file — re-run scripts/fetch-embedder.sh")]
    Inference(String),
    #[error("the local embedder is not compiled in; rebuild with `--features local-embedder` or set [memory.embedder] kind = \"none\" or \"openai\"")]
    NotCompiled,
}

/// A text → vector model.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Stable name of the model; vectors of different ids are never compared.
    fn id(&self) -> &str;

    /// One L2-normalised vector per text, in order. CPU-bound implementations run their work
    /// off the async threads (`spawn_blocking`).
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// A shared embedder, as the memory service holds it.
pub type SharedEmbedder = Arc<dyn Embedder>;

/// Build the configured embedder; `None` for `kind = "none"`. The local model is loaded here
/// (≈ 0.5 s): call from a blocking context or `spawn_blocking`.
pub fn from_config(config: &EmbedderConfig) -> Result<Option<SharedEmbedder>, EmbedError> {
    match config {
        EmbedderConfig::None => Ok(None),
        EmbedderConfig::Openai {
            base_url,
            model,
            api_key_env,
            timeout_secs,
        } => {
            let key = api_key_env
                .as_deref()
                .and_then(|name| std::env::var(name).ok());
            let embedder = openai::OpenAiEmbedder::new(base_url, model, key, *timeout_secs)?;
            Ok(Some(Arc::new(embedder)))
        }
        EmbedderConfig::Static { model_dir } => {
            let dir = model_dir
                .clone()
                .unwrap_or_else(static_model::default_model_dir);
            if !static_model::is_installed(&dir) {
                tracing::warn!("{}", static_model::not_installed_message(&dir));
                return Ok(None);
            }
            Ok(Some(static_model::load(&dir)?))
        }
        EmbedderConfig::Local { model_dir } => {
            let dir = model_dir.clone().unwrap_or_else(local::default_model_dir);
            Ok(Some(local::load(&dir)?))
        }
    }
}

/// Scale `v` to unit length in place (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Cosine similarity of two unit vectors (their dot product); `0.0` when the lengths differ.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_vectors_have_unit_length_and_cosine_of_self_is_one() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        assert!((cosine(&v, &v) - 1.0).abs() < 1e-6);
        let mut zero = vec![0.0, 0.0];
        normalize(&mut zero);
        assert_eq!(zero, vec![0.0, 0.0]);
        assert_eq!(cosine(&v, &[1.0]), 0.0, "different lengths never compare");
    }

    #[test]
    fn none_kind_builds_no_embedder() {
        assert!(from_config(&EmbedderConfig::None).unwrap().is_none());
    }

    #[test]
    fn a_missing_static_model_falls_back_to_bm25_instead_of_failing() {
        let config = EmbedderConfig::Static {
            model_dir: Some("/nonexistent/minilm-static".into()),
        };
        assert!(from_config(&config).unwrap().is_none());
        assert_eq!(
            EmbedderConfig::default(),
            EmbedderConfig::Static { model_dir: None }
        );
    }
}
