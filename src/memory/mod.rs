//! Memory: records, the sled store with merge rules, hybrid recall (BM25 for Chinese and
//! English + optional embedder vectors, weighted fusion), the expiry sweep, the extraction
//! prompt and parser, and the LoCoMo-format evaluation.
//!
//! Only the memory-extractor actor writes the store of a running engine (through
//! [`service::MemoryService`]); everyone else asks over `hermes.memory.*`.

pub mod bm25;
pub mod embed;
pub mod eval;
pub mod extract;
mod in_memory;
pub mod merge;
pub mod recall;
pub mod record;
pub mod refs;
pub mod replica;
pub mod service;
pub mod signals;
pub mod store;
mod store_recall;
pub mod sweep;
pub mod temporal;
pub mod tokenize;
pub mod user_index;
pub mod vectors;
pub mod wire;

pub use extract::{build_request, parse_updates, ExtractError};
pub use record::{
    MemoryKind, MemoryRecord, MemoryUpdate, RecallFilter, RecallHit, Source, UpdateOp,
    DEFAULT_NAMESPACE,
};
pub use service::{MemoryService, RecallQuery};
pub use store::{AppliedOp, AppliedUpdate, MemoryError, MemoryStore};
