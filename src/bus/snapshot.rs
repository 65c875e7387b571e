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

/// Where a deployment's session log carries memory-extraction jobs, and how far its
/// memory-extractors have done them: what a backup turns into messages of the extraction
/// queue, so that a restore does the jobs that were still to do (the consumer that tracks
/// them is not part of a backup).
#[derive(Debug, Clone)]
pub struct ExtractionOutbox {
    /// The stream whose records carry the jobs (the session log).
    pub log_stream: String,
    /// Every record of `log_stream` up to this sequence is done (the consumer's ack floor);
    /// a job after it may be done or not, and counts as not.
    pub done_through: u64,
    /// The extraction queue: its stream, its subject, and its configuration (as
    /// [`StreamSummary::config`]) for a backup that holds no such stream.
    pub queue_stream: String,
    pub queue_subject: String,
    pub queue_config: serde_json::Value,
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
    /// The session log's extraction jobs and how far they are done; `None` when no
    /// memory-extractor reads jobs from the log (no consumer, or no log).
    async fn extraction_outbox(&self) -> Result<Option<ExtractionOutbox>, BusError>;
}
