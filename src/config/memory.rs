//! `[memory]`: recall size and threshold, extraction redelivery, the forgetting sweep, the
//! embedder behind recall's vector half and the weights of the BM25 / vector fusion (see
//! config/default.toml and `crate::memory`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Most memories recalled into a turn's context.
    pub recall_limit: usize,
    /// Recalled records scoring below this are left out.
    pub min_score: f64,
    /// Redeliver an extraction job not acknowledged within this many seconds.
    pub extract_ack_wait_secs: u64,
    /// Seconds between two sweeps of expired memories in the memory-extractor; `0` = never
    /// (`hermes memory sweep` still runs one).
    #[serde(default = "default_sweep_interval")]
    pub sweep_interval_secs: u64,
    /// Where recall's vector half comes from; `none` = BM25 only.
    #[serde(default)]
    pub embedder: EmbedderConfig,
    /// Weights of the BM25 / vector score fusion (used when an embedder is configured).
    #[serde(default)]
    pub fusion: FusionConfig,
}

fn default_sweep_interval() -> u64 {
    3600
}

/// `[memory.embedder]`: which model turns memories and queries into vectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum EmbedderConfig {
    /// No vectors: recall is BM25 only.
    None,
    /// The default: a static token-vector table distilled from all-MiniLM-L6-v2, in-process,
    /// no extra build features (`scripts/fetch-embedder.sh` installs it). When its files are
    /// missing recall runs on BM25 alone with one warning.
    Static {
        /// Folder with `static.safetensors` and `tokenizer.json`; default:
        /// `$HERMES_STATIC_EMBEDDER_DIR`, else `.tools/models/minilm-static` below the
        /// working directory or the checkout of the running executable.
        #[serde(default)]
        model_dir: Option<PathBuf>,
    },
    /// An OpenAI-compatible `POST {base_url}/embeddings` endpoint.
    Openai {
        /// e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`
        base_url: String,
        model: String,
        /// Name of the environment variable holding the API key (none for local servers).
        #[serde(default)]
        api_key_env: Option<String>,
        #[serde(default = "default_embed_timeout")]
        timeout_secs: u64,
    },
    /// all-MiniLM-L6-v2 run in-process with candle (cargo feature `local-embedder`).
    Local {
        /// Folder with `model.safetensors`, `tokenizer.json`, `config.json`
        /// (`scripts/fetch-embedder.sh`); default: `$HERMES_EMBEDDER_MODEL_DIR`, else
        /// `.tools/models/all-MiniLM-L6-v2`.
        #[serde(default)]
        model_dir: Option<PathBuf>,
    },
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        Self::Static { model_dir: None }
    }
}

fn default_embed_timeout() -> u64 {
    30
}

/// `[memory.fusion]`: `score = bm25_weight·bm25/max(bm25) + vector_weight·scaled(cosine)`,
/// where a cosine at or below `min_cosine` counts 0 (see [`crate::memory::recall`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FusionConfig {
    pub bm25_weight: f64,
    pub vector_weight: f64,
    /// Cosine similarity at or below which a memory gets nothing from the vector half: the
    /// absolute floor that keeps unrelated memories out however few the candidates are.
    #[serde(default = "default_min_cosine")]
    pub min_cosine: f64,
}

fn default_min_cosine() -> f64 {
    crate::memory::recall::DEFAULT_MIN_COSINE
}

impl Default for FusionConfig {
    fn default() -> Self {
        Self {
            bm25_weight: 0.7,
            vector_weight: 0.3,
            min_cosine: default_min_cosine(),
        }
    }
}
