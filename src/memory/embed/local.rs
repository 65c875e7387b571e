//! [`LocalEmbedder`]: all-MiniLM-L6-v2 (a 6-layer BERT, 384-dim sentence vectors) run on the
//! CPU with candle, from the three files `scripts/fetch-embedder.sh` installs (sha256-checked):
//! `model.safetensors`, `tokenizer.json`, `config.json`.
//!
//! Inference follows sentence-transformers: tokenise (the shipped tokenizer pads every input to
//! 128 tokens; padding is switched to `BatchLongest` so a batch pads only to its longest text,
//! truncation stays at 128), run BERT, mean-pool the last hidden states over the attention mask,
//! L2-normalise. Work runs in `spawn_blocking` in batches of [`BATCH`]. Needs the cargo feature
//! `local-embedder` (on by default); without it [`load`] returns [`EmbedError::NotCompiled`].

use std::path::{Path, PathBuf};

use super::{EmbedError, SharedEmbedder};

/// Embedder id of vectors from this model.
pub const MODEL_ID: &str = "local:all-MiniLM-L6-v2";
/// Texts per forward pass.
pub const BATCH: usize = 32;

/// `$HERMES_EMBEDDER_MODEL_DIR`, else `.tools/models/all-MiniLM-L6-v2` (relative to the
/// working directory).
pub fn default_model_dir() -> PathBuf {
    std::env::var_os("HERMES_EMBEDDER_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".tools/models/all-MiniLM-L6-v2"))
}

/// Load the model from `dir` (≈ 0.5 s; blocking).
#[cfg(feature = "local-embedder")]
pub fn load(dir: &Path) -> Result<SharedEmbedder, EmbedError> {
    Ok(std::sync::Arc::new(model::LocalEmbedder::load(dir)?))
}

/// Without the `local-embedder` feature there is no local model.
#[cfg(not(feature = "local-embedder"))]
pub fn load(_dir: &Path) -> Result<SharedEmbedder, EmbedError> {
    Err(EmbedError::NotCompiled)
}

#[cfg(feature = "local-embedder")]
pub use model::LocalEmbedder;

#[cfg(feature = "local-embedder")]
mod model {
    use std::path::Path;
    use std::sync::Arc;

    use async_trait::async_trait;
    use candle_core::{DType, Device, Tensor};
    use candle_nn::VarBuilder;
    use candle_transformers::models::bert::{BertModel, Config, DTYPE};
    use tokenizers::{PaddingStrategy, Tokenizer};

    use super::super::{normalize, EmbedError, Embedder};
    use super::{BATCH, MODEL_ID};

    struct Inner {
        model: BertModel,
        tokenizer: Tokenizer,
        device: Device,
    }

    /// all-MiniLM-L6-v2 on the CPU.
    pub struct LocalEmbedder {
        inner: Arc<Inner>,
    }

    fn inference(e: impl std::fmt::Display) -> EmbedError {
        EmbedError::Inference(e.to_string())
    }

    impl LocalEmbedder {
        /// Read `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
        pub fn load(dir: &Path) -> Result<Self, EmbedError> {
            let files = |reason: String| EmbedError::ModelFiles {
                dir: dir.display().to_string(),
                reason,
            };
            let read = |name: &str| {
                std::fs::read(dir.join(name)).map_err(|e| files(format!("{name}: {e}")))
            };
            let config: Config = serde_json::from_slice(&read("config.json")?)
                .map_err(|e| files(format!("config.json: {e}")))?;
            let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
                .map_err(|e| files(format!("tokenizer.json: {e}")))?;
            match tokenizer.get_padding_mut() {
                Some(padding) => padding.strategy = PaddingStrategy::BatchLongest,
                None => {
                    tokenizer.with_padding(Some(tokenizers::PaddingParams::default()));
                }
            }
            let device = Device::Cpu;
            let vb =
                VarBuilder::from_buffered_safetensors(read("model.safetensors")?, DTYPE, &device)
                    .map_err(|e| files(format!("model.safetensors: {e}")))?;
            let model = BertModel::load(vb, &config)
                .map_err(|e| files(format!("model.safetensors does not fit config.json: {e}")))?;
            Ok(Self {
                inner: Arc::new(Inner {
                    model,
                    tokenizer,
                    device,
                }),
            })
        }

        /// Embed on the calling thread (blocking; for benches and tools without a runtime).
        pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            let mut out = Vec::with_capacity(texts.len());
            for batch in texts.chunks(BATCH) {
                out.extend(self.inner.embed_batch(batch)?);
            }
            Ok(out)
        }
    }

    impl Inner {
        fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            let encodings = self
                .tokenizer
                .encode_batch(texts.to_vec(), true)
                .map_err(inference)?;
            let rows = |f: &dyn Fn(&tokenizers::Encoding) -> Vec<u32>| {
                let rows = encodings
                    .iter()
                    .map(|e| Tensor::new(f(e).as_slice(), &self.device))
                    .collect::<Result<Vec<_>, _>>()?;
                Tensor::stack(&rows, 0)
            };
            let ids = rows(&|e| e.get_ids().to_vec()).map_err(inference)?;
            let mask = rows(&|e| e.get_attention_mask().to_vec()).map_err(inference)?;
            let type_ids = ids.zeros_like().map_err(inference)?;
            let hidden = self
                .model
                .forward(&ids, &type_ids, Some(&mask))
                .map_err(inference)?;
            let pooled = mean_pool(&hidden, &mask).map_err(inference)?;
            let mut vectors: Vec<Vec<f32>> = pooled.to_vec2().map_err(inference)?;
            vectors.iter_mut().for_each(|v| normalize(v));
            Ok(vectors)
        }
    }

    /// Mean of `hidden` `[batch, tokens, dim]` over the tokens whose `mask` is 1.
    fn mean_pool(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
        summed.broadcast_div(&counts)
    }

    #[async_trait]
    impl Embedder for LocalEmbedder {
        fn id(&self) -> &str {
            MODEL_ID
        }

        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            let this = LocalEmbedder {
                inner: self.inner.clone(),
            };
            let texts = texts.to_vec();
            tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
                .await
                .map_err(inference)?
        }
    }
}

#[cfg(all(test, feature = "local-embedder"))]
mod tests {
    use super::*;
    use crate::memory::embed::cosine;

    /// The model folder of the set-up script, relative to the repository.
    fn model_dir() -> Option<PathBuf> {
        let dir = std::env::var_os("HERMES_EMBEDDER_MODEL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/models/all-MiniLM-L6-v2")
            });
        dir.join("model.safetensors").exists().then_some(dir)
    }

    #[test]
    fn minilm_puts_paraphrases_closer_than_unrelated_text() {
        let Some(dir) = model_dir() else {
            panic!("all-MiniLM-L6-v2 is missing: run scripts/setup-test-deps.sh (it calls scripts/fetch-embedder.sh)");
        };
        let embedder = LocalEmbedder::load(&dir).unwrap();
        let texts: Vec<String> = [
            "My cat is allergic to chicken.",
            "The kitten cannot eat poultry.",
            "The train to Berlin leaves at nine.",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let v = embedder.embed_blocking(&texts).unwrap();
        assert_eq!(v.len(), 4);
        assert!(v.iter().all(|x| x.len() == 384));
        assert!((cosine(&v[0], &v[0]) - 1.0).abs() < 1e-4);
        let para = cosine(&v[0], &v[1]);
        let unrelated = cosine(&v[0], &v[2]);
        assert!(
            para > unrelated + 0.2,
            "paraphrase {para} vs unrelated {unrelated}"
        );
        // A batch pads to its longest text: the same text alone embeds the same.
        let alone = embedder.embed_blocking(&texts[..1]).unwrap();
        assert!(cosine(&alone[0], &v[0]) > 0.9999);
    }

    #[test]
    fn missing_model_folder_names_the_fetch_script() {
        let err = load(Path::new("/nonexistent/minilm")).err().unwrap();
        assert!(err.to_string().contains("fetch-embedder.sh"), "{err}");
    }
}
