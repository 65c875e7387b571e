//! placeholder: being written
#[derive(Debug, thiserror::Error)]
#[error("memory placeholder")]
pub struct MemoryError;
pub struct MemoryStore;
