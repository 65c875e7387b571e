//! The replicated session log: where a session's state lives when several processes may own
//! it in turn (`--bus nats://`). Every [`SessionStore::save`](super::sessions::SessionStore)
//! appends one [`LogRecord`] to the session's log; the local sled trees are then a cache that a
//! new owner brings up to date from the log before it runs the session.
//!
//! Appends are fenced: each names the sequence of the session's last record the writer has
//! seen, and the log refuses it when another writer appended since ([`LogError::Fenced`]). A
//! process that lost a session to another owner (a partition moved while it was paused) can
//! therefore never write over the new owner's history.

use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::sessions::{SessionMeta, StoredMessage};
use super::tasks::TaskState;

/// One save of a session: its metadata, the messages it added and its task state after it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogRecord {
    /// The extraction job of the turn this record answers (the encoded `hermes.memory.extract`
    /// envelope), on a deployment whose memory-extractors take their jobs from the log
    /// ([`crate::bus::cluster::Cluster::extraction_outbox`]): the answer's append is the job's
    /// queueing, with no message or write of its own. First in the record, so its readers
    /// ([`carried_job`]) stop after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract: Option<Box<serde_json::value::RawValue>>,
    pub meta: SessionMeta,
    pub messages: Vec<StoredMessage>,
    pub task: TaskState,
}

/// How a record that carries a job begins (the job is its first key).
const JOB_FIRST: &[u8] = br#"{"extract":"#;

/// The extraction job an encoded [`LogRecord`] carries, if any, read without decoding the rest
/// of the record (what the memory-extractors' consumer and a backup look at): the job alone
/// when it comes first, as this version writes it; no parse at all of a record without the key
/// anywhere (no job). A record of an older version (the job last) is read whole.
pub fn carried_job(
    record: &[u8],
) -> Result<Option<&serde_json::value::RawValue>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Carried<'a> {
        #[serde(borrow, default)]
        extract: Option<&'a serde_json::value::RawValue>,
    }
    if let Some(rest) = record.strip_prefix(JOB_FIRST) {
        let mut reader = serde_json::Deserializer::from_slice(rest);
        return <&serde_json::value::RawValue>::deserialize(&mut reader).map(Some);
    }
    // A key is written `"extract":` (compact JSON), whatever comes before it.
    if memchr::memmem::find(record, &JOB_FIRST[1..]).is_none() {
        return Ok(None);
    }
    serde_json::from_slice::<Carried>(record).map(|c| c.extract)
}

/// Why the replicated log refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("session {agent}/{session} was written by another owner since this process read it (expected last record {expected}); this process no longer owns it and stops working on it")]
    Fenced {
        agent: String,
        session: String,
        expected: u64,
    },
    #[error("the replicated session log is unavailable: {0}; check that nats-server (with -js) is reachable")]
    Unavailable(String),
}

/// A per-session append-only log with fenced appends (JetStream on the NATS bus).
#[async_trait]
pub trait SessionLog: Send + Sync + 'static {
    /// Append `record` if the session's last record is still `expected` (0: the log is
    /// empty). Returns the new record's sequence.
    async fn append(
        &self,
        agent: &str,
        session: &str,
        record: Bytes,
        expected: u64,
    ) -> Result<u64, LogError>;

    /// The sequence of the session's last record (0: none).
    async fn last(&self, agent: &str, session: &str) -> Result<u64, LogError>;

    /// The session's last record with its sequence (none: the log holds nothing of it).
    async fn last_record(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Option<(u64, Bytes)>, LogError>;

    /// The session's records with a sequence above `after`, in order.
    async fn read_after(
        &self,
        agent: &str,
        session: &str,
        after: u64,
    ) -> Result<Vec<(u64, Bytes)>, LogError>;

    /// The last record of every session in the log — of `agent`'s sessions only, when given —
    /// with its sequence, in no particular order. What `hermes sessions ls` reads on a cluster.
    async fn last_of_each(&self, agent: Option<&str>) -> Result<Vec<(u64, Bytes)>, LogError>;
}
