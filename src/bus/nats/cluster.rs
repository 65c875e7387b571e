//! Session partitions and the replicated session log on JetStream ([`crate::bus::cluster`]).
//!
//! - Stream `HERMES_INBOX` (work queue) holds every partition's inbox under
//!   `hermes.inbox.<partition>.<agent>.<session>`. Partition `p` is read through the durable
//!   pull consumer `owner-p<p>` with a priority group and the **pinned-client** policy (NATS ≥
//!   2.11): every session process pulls every partition, and the server delivers each
//!   partition to the one client it pinned. When that client stops pulling for
//!   `cluster.failover_secs` (its process died) the pin moves to another process, and the
//!   items the dead one had not acked come back to the new owner after `cluster.ack_wait_secs`.
//!   Partitions are spread over the live session processes by [`super::balance`].
//!   Why this and not KV leases: the server does the election, the hand-over and the
//!   redelivery in one primitive, and ordering within a partition comes with it; the session
//!   log's fenced appends (below) cover the one thing pinning alone does not — a paused old
//!   owner that wakes up and writes.
//! - Stream `HERMES_SESSION_LOG` (limits retention, read from its leader) holds each session's
//!   log under `hermes.slog.<agent>.<session>`, with fenced appends ([`super::log`]); the
//!   memory log `HERMES_MEMORY_LOG` is another such log.
//!
//! Pulling the partitions lives in [`super::partitions`].

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::stream::{
    Config, LastRawMessageErrorKind, RetentionPolicy, StorageType,
};
use async_nats::jetstream::Context;
use async_nats::HeaderMap;
use async_trait::async_trait;
use bytes::Bytes;
use tokio::runtime::Handle;
use tokio::sync::OnceCell;

use super::jetstream::{through_failover, while_forming};
use super::kv::NatsKv;
use super::log::NatsSessionLog;
use super::log_feed::LogFeed;
use super::outbox;
use crate::bus::cluster::{partition_of, Cluster, ClusterOptions, OwnedItems};
use crate::bus::kv::SharedKv;
use crate::bus::{BusError, DurableConsumer, DurableOptions};
use crate::store::log_tails::HeardTails;
use crate::store::replica::SessionLog;

pub(super) const INBOX_STREAM: &str = "HERMES_INBOX";
pub(super) const INBOX_PREFIX: &str = "hermes.inbox";
pub(super) const LOG_STREAM: &str = "HERMES_SESSION_LOG";
const LOG_PREFIX: &str = "hermes.slog";
/// The replicated memory log: one subject per user (see [`crate::memory::replica`]).
const MEMORY_LOG_STREAM: &str = "HERMES_MEMORY_LOG";
const MEMORY_LOG_PREFIX: &str = "hermes.mlog";
/// The header marking an item as a publisher's resend of one already stored.
pub(super) const REPEAT_HEADER: &str = "Hermes-Repeat";
/// The header carrying the original publisher's reply subject through the inbox.
pub(super) const REPLY_HEADER: &str = "Hermes-Reply";

/// JetStream-backed [`Cluster`].
pub struct NatsCluster {
    jetstream: Context,
    runtime: Handle,
    options: ClusterOptions,
    inbox: OnceCell<()>,
    log: Arc<NatsSessionLog>,
    memory_log: Arc<NatsSessionLog>,
    /// The memory log's feed, started by the first who asks for it.
    memory_feed: std::sync::OnceLock<Arc<LogFeed>>,
    /// The connection's count of lost deliveries, which the feed watches.
    breaks: tokio::sync::watch::Receiver<u64>,
    audit: Arc<super::audit::NatsAuditTrail>,
}

pub(super) fn storage_error(what: &str, err: impl std::fmt::Display) -> BusError {
    BusError::Storage(format!(
        "{what}: {err}; is JetStream enabled (nats-server -js), with as many nodes as \
         cluster.replicas?"
    ))
}

impl NatsCluster {
    /// `breaks` counts the times the connection lost deliveries (disconnected, slow consumer).
    pub fn new(
        jetstream: Context,
        runtime: Handle,
        options: ClusterOptions,
        breaks: tokio::sync::watch::Receiver<u64>,
    ) -> Self {
        let log = Arc::new(NatsSessionLog::new(
            &jetstream,
            options.replicas,
            LOG_STREAM,
            LOG_PREFIX,
        ));
        let memory_log = Arc::new(
            NatsSessionLog::new(
                &jetstream,
                options.replicas,
                MEMORY_LOG_STREAM,
                MEMORY_LOG_PREFIX,
            )
            .fingerprinted(),
        );
        let audit = Arc::new(super::audit::NatsAuditTrail::new(
            &jetstream,
            options.replicas,
        ));
        Self {
            jetstream,
            runtime,
            options,
            inbox: OnceCell::new(),
            log,
            memory_log,
            memory_feed: std::sync::OnceLock::new(),
            breaks,
            audit,
        }
    }

    async fn ensure_inbox(&self) -> Result<(), BusError> {
        self.inbox
            .get_or_try_init(|| async {
                let config = Config {
                    name: INBOX_STREAM.to_string(),
                    subjects: vec![format!("{INBOX_PREFIX}.>")],
                    retention: RetentionPolicy::WorkQueue,
                    storage: StorageType::File,
                    num_replicas: self.options.replicas.max(1),
                    duplicate_window: Duration::from_secs(120),
                    ..Default::default()
                };
                // A node of a cluster started together with this process may not be up yet.
                while_forming("creating the session inbox", || {
                    self.jetstream.get_or_create_stream(config.clone())
                })
                .await
                .map(|_| ())
                .map_err(|e| storage_error("cannot create or open the session inbox stream", e))
            })
            .await
            .map(|_| ())
    }

    fn inbox_subject(&self, agent: &str, session: &str) -> String {
        let p = partition_of(agent, session, self.options.partitions);
        format!("{INBOX_PREFIX}.{p}.{agent}.{session}")
    }

    /// Store one inbox item; true when JetStream already held its message id. Retried
    /// through a failover: the message id makes a repeat of a stored item a no-op.
    async fn store_item(
        &self,
        subject: &str,
        headers: &HeaderMap,
        payload: &Bytes,
    ) -> Result<bool, BusError> {
        through_failover("storing an inbox item", || async {
            let ack = self
                .jetstream
                .publish_with_headers(subject.to_string(), headers.clone(), payload.clone())
                .await
                .map_err(|e| storage_error("the session inbox refused the message", e))?;
            let ack = ack
                .await
                .map_err(|e| storage_error("the session inbox did not confirm the message", e))?;
            Ok::<bool, BusError>(ack.duplicate)
        })
        .await
    }
}

#[async_trait]
impl Cluster for NatsCluster {
    fn options(&self) -> &ClusterOptions {
        &self.options
    }

    async fn enqueue(
        &self,
        agent: &str,
        session: &str,
        payload: Bytes,
        reply: Option<&str>,
        dedupe_id: &str,
    ) -> Result<(), BusError> {
        self.ensure_inbox().await?;
        let mut headers = HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, dedupe_id);
        if let Some(reply) = reply {
            headers.insert(REPLY_HEADER, reply);
        }
        super::trace::add(&mut headers);
        let subject = self.inbox_subject(agent, session);
        let duplicate = self.store_item(&subject, &headers, &payload).await?;
        // A publisher's resend of an item already stored (its acknowledgement was lost) is
        // dropped by the message id; one waiting for a reply gets it through a repeat item,
        // which its session answers as it did the original, never handling it twice. (Our own
        // retry through a failover may see its first attempt as the duplicate: the repeat
        // item then only sends the reply once more.)
        if let (true, Some(reply)) = (duplicate, reply) {
            let mut repeat = HeaderMap::new();
            let repeat_id = format!("{dedupe_id}~repeat~{}", uuid::Uuid::now_v7().simple());
            repeat.insert(async_nats::header::NATS_MESSAGE_ID, repeat_id.as_str());
            repeat.insert(REPLY_HEADER, reply);
            repeat.insert(REPEAT_HEADER, "1");
            super::trace::add(&mut repeat);
            self.store_item(&subject, &repeat, &payload).await?;
        }
        Ok(())
    }

    async fn inbox_holds(&self, seq: u64) -> Result<bool, BusError> {
        self.ensure_inbox().await?;
        let jetstream = self.jetstream.clone();
        // On the connection's runtime, whatever runtime asks (a session actor's arbiter).
        let ask = self.runtime.spawn(async move {
            let stream = jetstream
                .get_stream_no_info(INBOX_STREAM)
                .await
                .map_err(|e| storage_error("cannot open the session inbox stream", e))?;
            match through_failover("reading the session inbox", || stream.get_raw_message(seq))
                .await
            {
                Ok(_) => Ok(true),
                // A work-queue stream deletes an item when it is acked.
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(false),
                Err(e) => Err(storage_error("cannot read the session inbox", e)),
            }
        });
        ask.await
            .map_err(|e| storage_error("asking the session inbox failed", e))?
    }

    async fn own_partitions(&self) -> Result<OwnedItems, BusError> {
        self.ensure_inbox().await?;
        // Before this process appends an answer carrying a job, so no extractor misses it.
        outbox::on_the_log(&self.runtime, self.log.clone(), |log| async move {
            outbox::ensure(&log, DurableOptions::default()).await
        })
        .await?;
        let (jetstream, options) = (self.jetstream.clone(), self.options.clone());
        // Pull tasks live on the connection's runtime, whatever runtime calls us.
        let setup = self.runtime.spawn(async move {
            super::partitions::pull_every_partition(&jetstream, &options).await
        });
        setup
            .await
            .map_err(|e| storage_error("starting the partition consumers failed", e))?
    }

    fn session_log(&self) -> Arc<dyn SessionLog> {
        self.log.clone()
    }

    async fn extraction_outbox(
        &self,
        options: DurableOptions,
    ) -> Result<DurableConsumer, BusError> {
        outbox::on_the_log(&self.runtime, self.log.clone(), move |log| async move {
            outbox::consume(&log, options).await
        })
        .await
    }

    fn memory_log(&self) -> Arc<dyn SessionLog> {
        self.memory_log.clone()
    }

    fn memory_log_feed(&self) -> Option<Arc<dyn HeardTails>> {
        let feed = self.memory_feed.get_or_init(|| {
            Arc::new(LogFeed::start(
                self.memory_log.clone(),
                self.breaks.clone(),
                &self.runtime,
            ))
        });
        Some(feed.clone())
    }

    fn audit_trail(&self) -> Arc<dyn crate::bus::cluster::AuditTrail> {
        self.audit.clone()
    }

    fn bucket(&self, name: &str, max_age: Option<Duration>) -> Arc<dyn SharedKv> {
        Arc::new(NatsKv::new(
            self.jetstream.clone(),
            name,
            self.options.replicas,
            max_age,
        ))
    }
}
