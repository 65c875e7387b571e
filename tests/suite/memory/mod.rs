//! Memory: the service subjects over the bus, durable extraction, embedders, the CLI and eval.

mod cli;
mod copies;
mod eval;
mod service;

use hermes::memory::{MemoryKind, MemoryUpdate, UpdateOp};

/// A fact to add for a user, kept `expiry_days` when given.
fn update(key: &str, content: &str, expiry_days: Option<u32>) -> MemoryUpdate {
    MemoryUpdate {
        op: UpdateOp::Add,
        kind: MemoryKind::Fact,
        key: key.into(),
        content: content.into(),
        importance: 0.6,
        expiry_days,
        topics: Vec::new(),
    }
}
