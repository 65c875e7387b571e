//! Session ownership across processes: what a bus with a cluster behind it (NATS with
//! JetStream) offers the session service so that several session processes never fork a
//! session.
//!
//! Sessions are partitioned by a stable hash of `<agent>.<session>` ([`partition_of`]). Each
//! partition has a durable inbox; the cluster hands a partition's items to **one** live
//! consumer at a time and moves the partition to another when that one stops pulling (its
//! process died). An item is settled only once the session has handled it (its turn answered,
//! paused or refused), so the items a dead owner held come back to the next owner, which
//! carries on from the replicated session log ([`crate::store::replica`]).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::kv::SharedKv;
use super::{Acker, BusError};
use crate::store::replica::SessionLog;

/// How sessions are spread and how fast a dead owner's partitions move.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Number of session partitions. Every process of one deployment must use the same.
    pub partitions: u32,
    /// A partition whose owner has not pulled for this long moves to another process.
    pub failover: Duration,
    /// An item not settled (nor reported in progress) for this long is delivered again.
    pub ack_wait: Duration,
    /// Copies JetStream keeps of each stream (3 on a 3-node cluster).
    pub replicas: usize,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            partitions: 16,
            failover: Duration::from_secs(3),
            ack_wait: Duration::from_secs(6),
            replicas: 1,
        }
    }
}

/// The partition of session `<agent>.<session>` among `partitions`: FNV-1a over the key, so
/// it is the same in every process, build and version.
pub fn partition_of(agent: &str, session: &str, partitions: u32) -> u32 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    let mut hash = OFFSET;
    for byte in agent.bytes().chain([b'.']).chain(session.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    u32::try_from(hash % u64::from(partitions.max(1))).unwrap_or(0)
}

/// One item of a partition's inbox, delivered to its current owner.
pub struct OwnedItem {
    pub agent: String,
    pub session: String,
    /// The inbound envelope (a user message, a confirmation or a job's final event).
    pub payload: Bytes,
    /// Where the original publisher waits for the acknowledgement, if it asked for one.
    pub reply: Option<String>,
    /// 1 on first delivery; more when a previous owner did not settle it.
    pub delivery: u64,
    /// How long ago the item was stored (its first delivery's publish time, as the stream
    /// recorded it): what a publisher waiting for an answer has waited so far.
    pub age: std::time::Duration,
    /// A publisher's resend of an item already stored (its acknowledgement was lost): the
    /// session answers it as it answered the original and does not handle it twice.
    pub repeat: bool,
    /// Where the item sits in the inbox (its stream sequence), when the backend says: what
    /// [`Cluster::inbox_holds`] is asked about later.
    pub seq: Option<u64>,
    pub acker: Arc<dyn Acker>,
    /// The W3C trace context of the span that enqueued it, when this process exports traces.
    pub traceparent: Option<String>,
}

/// Every partition's items for this process, as the cluster assigns partitions to it.
pub struct OwnedItems {
    inner: Pin<Box<dyn Stream<Item = Result<OwnedItem, BusError>> + Send>>,
}

impl OwnedItems {
    pub fn new(inner: impl Stream<Item = Result<OwnedItem, BusError>> + Send + 'static) -> Self {
        Self {
            inner: Box::pin(inner),
        }
    }

    pub async fn next(&mut self) -> Option<Result<OwnedItem, BusError>> {
        self.inner.next().await
    }
}

/// The shared audit trail: every record published on `hermes.audit.<kind>` is stored (and
/// replicated) once, whichever process wrote it, and any process reads the newest back.
#[async_trait]
pub trait AuditTrail: Send + Sync {
    /// Create or open the store (done on first use otherwise).
    async fn open(&self) -> Result<(), BusError>;
    /// Publish `payload` on `subject` (a `hermes.audit.<kind>` subject) and return once it is
    /// stored; subscribers of the subject receive it as any publish.
    async fn record(&self, subject: &str, payload: Bytes) -> Result<(), BusError>;
    /// The newest `limit` records' payloads published on one of `subjects`, newest first.
    async fn latest(&self, limit: usize, subjects: &[String]) -> Result<Vec<Bytes>, BusError>;
}

/// Session partitions with one owner each, and the replicated session log.
#[async_trait]
pub trait Cluster: Send + Sync + 'static {
    fn options(&self) -> &ClusterOptions;

    /// Store an inbound item in its session's partition inbox; returns once it is stored.
    /// `dedupe_id` (the envelope id) makes a publisher's retry a no-op, except that one
    /// waiting on `reply` is answered again ([`OwnedItem::repeat`]). The current span's
    /// trace context goes along (see [`OwnedItem::traceparent`]).
    async fn enqueue(
        &self,
        agent: &str,
        session: &str,
        payload: Bytes,
        reply: Option<&str>,
        dedupe_id: &str,
    ) -> Result<(), BusError>;

    /// Whether the inbox still holds item `seq` (see [`OwnedItem::seq`]): true until the item
    /// is acked, false once it is (an inbox keeps no settled item).
    async fn inbox_holds(&self, seq: u64) -> Result<bool, BusError>;

    /// Start pulling every partition: items arrive for the partitions this process owns now,
    /// and for those it takes over from a dead owner.
    async fn own_partitions(&self) -> Result<OwnedItems, BusError>;

    /// The replicated session log.
    fn session_log(&self) -> Arc<dyn SessionLog>;

    /// The extraction jobs that answered turns' appends to the session log carry
    /// ([`crate::store::replica::LogRecord::extract`]), as a durable queue every
    /// memory-extractor of the deployment shares: each job goes to one of them, and comes
    /// back after `options.ack_wait` unless acked. Records without a job are passed.
    async fn extraction_outbox(
        &self,
        options: crate::bus::DurableOptions,
    ) -> Result<crate::bus::DurableConsumer, BusError>;

    /// The replicated memory log: each user's memory writes, in order, keyed
    /// (`user`, hex of the user id) — what every memory-extractor copy brings its store up to
    /// date from.
    fn memory_log(&self) -> Arc<dyn SessionLog>;

    /// A live feed of the memory log's appends, which a recall asks instead of the log when
    /// the feed vouches ([`crate::memory::replica::MemoryReplica::catch_up_heard`]); none
    /// where the log has no feed.
    fn memory_log_feed(&self) -> Option<Arc<dyn crate::store::log_tails::HeardTails>> {
        None
    }

    /// The MCP audit trail every process of the deployment writes and reads.
    fn audit_trail(&self) -> Arc<dyn AuditTrail>;

    /// A key-value bucket every process of the deployment reaches (created on first use;
    /// entries older than `max_age` expire when it is set).
    fn bucket(&self, name: &str, max_age: Option<Duration>) -> Arc<dyn SharedKv>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_is_stable_and_in_range() {
        // Fixed values: a change would move every session of a running deployment.
        assert_eq!(
            partition_of("assistant", "s1", 16),
            partition_of("assistant", "s1", 16)
        );
        assert_eq!(partition_of("a", "b", 1), 0);
        let spread: std::collections::BTreeSet<u32> = (0..200)
            .map(|i| partition_of("assistant", &format!("s{i}"), 8))
            .collect();
        assert_eq!(spread.len(), 8, "200 sessions use all 8 partitions");
        assert!(spread.iter().all(|p| *p < 8));
    }

    #[test]
    fn partition_of_a_known_key_never_changes() {
        assert_eq!(partition_of("assistant", "session-1", 16), 11);
    }
}
