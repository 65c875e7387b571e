//! Memory: records, the sled store with merge rules, BM25 recall (Chinese and English), and
//! the extraction prompt and parser.
//!
//! Only the memory-extractor actor writes the store; everyone else asks over
//! `hermes.memory.*`.

pub mod bm25;
pub mod extract;
pub mod merge;
pub mod recall;
pub mod record;
pub mod store;
pub mod tokenize;

pub use extract::{build_request, parse_updates, ExtractError};
pub use record::{MemoryKind, MemoryRecord, MemoryUpdate, RecallHit, Source, UpdateOp};
pub use store::{AppliedOp, AppliedUpdate, MemoryError, MemoryStore};
