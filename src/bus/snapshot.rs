//! Reading and rewriting JetStream streams whole, for `hermes backup` / `hermes restore`
//! ([`crate::backup`]), without async-nats types leaving the bus module.

use async_trait::async_trait;
use bytes::Bytes;

use super::BusError;

/// One stream as the server describes it.
#[derive(Debug, Clone)]
pub struct StreamSummary {
    pub name: String,
    /// Its configuration, as the JetStream API writes it.
    pub config: serde_json::Value,
    pub first_seq: u64,
    pub last_seq: u64,
    pub messages: u64,
}

/// One stored message.
#[derive(Debug, Clone)]
pub struct StoredMessage {
    pub subject: String,
    pub headers: Vec<(String, String)>,
    pub payload: Bytes,
}

/// Streams of a JetStream account, read and written whole.
#[async_trait]
pub trait Snapshots: Send + Sync {
    /// Every stream of the account.
    async fn streams(&self) -> Result<Vec<StreamSummary>, BusError>;
    /// The message at `seq` of `stream`; `None` when it was deleted.
    async fn message(&self, stream: &str, seq: u64) -> Result<Option<StoredMessage>, BusError>;
    /// Delete `stream` if it exists, then create it with `config`.
    async fn recreate(&self, stream: &str, config: &serde_json::Value) -> Result<(), BusError>;
    /// Store a message, waiting for the stream's acknowledgement.
    async fn append(&self, message: StoredMessage) -> Result<(), BusError>;
}
