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

use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_nats::jetstream::consumer::pull::{Config as PullConfig, Stream as PullStream};
use async_nats::jetstream::consumer::{AckPolicy, PriorityPolicy, PullConsumer};
use async_nats::jetstream::stream::{
    Config, LastRawMessageErrorKind, RetentionPolicy, StorageType,
};
use async_nats::jetstream::Context;
use async_nats::HeaderMap;
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, OnceCell};

use super::balance::{self, Membership};
use super::jetstream::{through_failover, while_forming, JetStreamAcker};
use super::kv::NatsKv;
use super::log::NatsSessionLog;
use super::log_feed::LogFeed;
use super::outbox;
use crate::bus::cluster::{partition_of, Cluster, ClusterOptions, OwnedItem, OwnedItems};
use crate::bus::kv::SharedKv;
use crate::bus::{Acker, BusError, DurableConsumer, DurableOptions};
use crate::store::log_tails::HeardTails;
use crate::store::replica::SessionLog;

const INBOX_STREAM: &str = "HERMES_INBOX";
const INBOX_PREFIX: &str = "hermes.inbox";
pub(super) const LOG_STREAM: &str = "HERMES_SESSION_LOG";
const LOG_PREFIX: &str = "hermes.slog";
/// The replicated memory log: one subject per user (see [`crate::memory::replica`]).
const MEMORY_LOG_STREAM: &str = "HERMES_MEMORY_LOG";
const MEMORY_LOG_PREFIX: &str = "hermes.mlog";
/// The header marking an item as a publisher's resend of one already stored.
const REPEAT_HEADER: &str = "Hermes-Repeat";
/// The header carrying the original publisher's reply subject through the inbox.
const REPLY_HEADER: &str = "Hermes-Reply";
/// The priority group every session process pulls in.
const OWNER_GROUP: &str = "owner";
/// Items of one partition an owner may hold unsettled at once (turns of different sessions
/// run in parallel; one session's items still run one after another).
const MAX_UNSETTLED_PER_PARTITION: i64 = 1024;
/// Longest a pull request waits at the server; shorter pulls notice a hand-over sooner.
const MAX_PULL_WAIT: Duration = Duration::from_secs(1);
/// How often a partition's puller looks at which process prefers the partition.
const PREFERENCE_CHECK: Duration = Duration::from_millis(200);

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

fn storage_error(what: &str, err: impl std::fmt::Display) -> BusError {
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
        let setup = self
            .runtime
            .spawn(async move { pull_every_partition(&jetstream, &options).await });
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

async fn pull_every_partition(
    jetstream: &Context,
    options: &ClusterOptions,
) -> Result<OwnedItems, BusError> {
    // The stream exists (`ensure_inbox`), but on a cluster where another process created it a
    // moment ago its group may still be forming: "stream not found" for a while, as in a
    // failover.
    let stream = through_failover("opening the session inbox", || {
        jetstream.get_stream(INBOX_STREAM)
    })
    .await
    .map_err(|e| storage_error("cannot open the session inbox stream", e))?;
    let membership = Arc::new(Membership::new(options.partitions, options.failover));
    let (items, received) = mpsc::channel(1024);
    for p in 0..options.partitions.max(1) {
        let name = format!("owner-p{p}");
        let config = PullConfig {
            durable_name: Some(name.clone()),
            filter_subject: format!("{INBOX_PREFIX}.{p}.>"),
            ack_policy: AckPolicy::Explicit,
            ack_wait: options.ack_wait,
            max_ack_pending: MAX_UNSETTLED_PER_PARTITION,
            priority_policy: PriorityPolicy::PinnedClient,
            priority_groups: vec![OWNER_GROUP.to_string()],
            priority_timeout: options.failover,
            ..Default::default()
        };
        let consumer = while_forming("creating a partition consumer", || {
            stream.create_consumer(config.clone())
        })
        .await
        .map_err(|e| storage_error(&format!("cannot create consumer {name}"), e))?;
        let owner = PartitionOwner {
            partition: p,
            name,
            consumer,
            stream: stream.clone(),
            options: options.clone(),
            membership: membership.clone(),
            items: items.clone(),
            unsettled: Arc::new(AtomicUsize::new(0)),
        };
        tokio::spawn(owner.run());
    }
    tracing::info!(
        member = membership.id(),
        partitions = options.partitions,
        "pulling every session partition"
    );
    let client = jetstream.client();
    let every = (options.failover / 3).max(Duration::from_millis(100));
    tokio::spawn(async move {
        tokio::select! {
            _ = balance::run(client.clone(), membership.clone(), every) => {}
            _ = items.closed() => balance::leave(&client, &membership).await,
        }
    });
    let received = futures::stream::unfold(received, |mut received| async move {
        received.recv().await.map(|item| (item, received))
    });
    Ok(OwnedItems::new(received))
}

/// Pulls one partition for as long as the router listens, handing the partition on when
/// another live process prefers it.
struct PartitionOwner {
    partition: u32,
    name: String,
    consumer: PullConsumer,
    stream: async_nats::jetstream::stream::Stream,
    options: ClusterOptions,
    membership: Arc<Membership>,
    items: mpsc::Sender<Result<OwnedItem, BusError>>,
    /// Items of this partition received here and not settled yet.
    unsettled: Arc<AtomicUsize>,
}

impl PartitionOwner {
    async fn run(self) {
        // Pulls renew well inside the failover time, or the pin would be lost between pulls.
        let expires = (self.options.failover / 3).clamp(Duration::from_millis(150), MAX_PULL_WAIT);
        loop {
            // Another live process prefers this partition: leave it to that one. When that
            // process goes silent for the failover time it drops out of the view, and this
            // one (or another) prefers the partition and pulls it again.
            if !self.membership.prefers_me(self.partition) {
                tokio::select! {
                    _ = tokio::time::sleep(PREFERENCE_CHECK) => continue,
                    _ = self.items.closed() => return,
                }
            }
            let pulled = self
                .consumer
                .stream()
                .group(OWNER_GROUP)
                .max_messages_per_batch(64)
                .expires(expires)
                .heartbeat(expires / 3)
                .messages()
                .await;
            let messages = match pulled {
                Ok(messages) => messages,
                Err(e) => {
                    tracing::warn!(partition = self.partition, error = %e, "cannot pull a session partition; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                        _ = self.items.closed() => return,
                    }
                }
            };
            match self.serve(messages).await {
                Served::Stopped => {
                    // This process stops: let a live one take the partition now rather than
                    // after the failover time.
                    if self.membership.owns(self.partition) {
                        let _ = self.stream.unpin_consumer(&self.name, OWNER_GROUP).await;
                    }
                    return;
                }
                Served::Ended => {}
                Served::Preferred(messages) => {
                    if !self.hand_over(messages).await {
                        return;
                    }
                }
            }
        }
    }

    /// Forward items until the router stops, the pull ends, or another live process
    /// prefers the partition.
    async fn serve(&self, mut messages: PullStream) -> Served {
        let mut check = tokio::time::interval(PREFERENCE_CHECK);
        loop {
            tokio::select! {
                _ = self.items.closed() => return Served::Stopped,
                _ = check.tick() => {
                    if !self.membership.prefers_me(self.partition) {
                        return Served::Preferred(Box::new(messages));
                    }
                }
                next = messages.next() => match next {
                    Some(Ok(message)) => {
                        if !self.forward(message).await {
                            return Served::Stopped;
                        }
                    }
                    Some(Err(e)) => {
                        tracing::debug!(partition = self.partition, error = %e, "pulling a session partition failed; retrying");
                    }
                    None => return Served::Ended,
                },
            }
        }
    }

    async fn forward(&self, message: async_nats::jetstream::Message) -> bool {
        self.membership.set_owned(self.partition, true);
        let item = owned_item(message).map(|mut item| {
            self.unsettled.fetch_add(1, Ordering::AcqRel);
            item.acker = Arc::new(CountedAcker {
                inner: item.acker,
                unsettled: self.unsettled.clone(),
                settled: AtomicBool::new(false),
            });
            item
        });
        self.items.send(item).await.is_ok()
    }

    /// Give the partition to the process that prefers it: keep handling what arrives until
    /// nothing received here is unsettled (so no session runs in two processes at once; at
    /// most `ack_wait`), then stop pulling and unpin, so the preferred process's pull takes
    /// the pin at once. False when the router stopped.
    async fn hand_over(&self, mut messages: Box<PullStream>) -> bool {
        let deadline = tokio::time::Instant::now() + self.options.ack_wait;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        while self.unsettled.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
            tokio::select! {
                _ = self.items.closed() => return false,
                _ = tick.tick() => {}
                next = messages.next() => match next {
                    Some(Ok(message)) => {
                        if !self.forward(message).await {
                            return false;
                        }
                    }
                    Some(Err(_)) => {}
                    None => break,
                },
            }
        }
        // Dropping the pull unsubscribes its inbox first, so the server drops our waiting
        // pull requests instead of pinning one of them again.
        drop(messages);
        if self.membership.owns(self.partition) {
            if let Err(e) = self.stream.unpin_consumer(&self.name, OWNER_GROUP).await {
                tracing::debug!(partition = self.partition, error = %e, "unpin failed; the pin moves after the failover time");
            }
            tracing::info!(
                partition = self.partition,
                "session partition handed to the process that prefers it"
            );
        }
        self.membership.set_owned(self.partition, false);
        true
    }
}

/// How serving a partition's pull ended.
enum Served {
    /// The router stopped listening.
    Stopped,
    /// The pull stream ended; pull again.
    Ended,
    /// Another live process prefers the partition: hand it over.
    Preferred(Box<PullStream>),
}

/// Counts a partition's unsettled items, so a hand-over waits for them.
struct CountedAcker {
    inner: Arc<dyn Acker>,
    unsettled: Arc<AtomicUsize>,
    settled: AtomicBool,
}

impl CountedAcker {
    fn settle(&self) {
        if !self.settled.swap(true, Ordering::AcqRel) {
            self.unsettled.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for CountedAcker {
    fn drop(&mut self) {
        self.settle();
    }
}

#[async_trait]
impl Acker for CountedAcker {
    async fn ack(&self) -> Result<(), BusError> {
        let result = self.inner.ack().await;
        self.settle();
        result
    }

    async fn ack_unconfirmed(&self) -> Result<(), BusError> {
        let result = self.inner.ack_unconfirmed().await;
        self.settle();
        result
    }

    async fn nak(&self, delay: Option<Duration>) -> Result<(), BusError> {
        let result = self.inner.nak(delay).await;
        self.settle();
        result
    }

    async fn in_progress(&self) -> Result<(), BusError> {
        self.inner.in_progress().await
    }
}

fn owned_item(message: async_nats::jetstream::Message) -> Result<OwnedItem, BusError> {
    let delivery = message
        .info()
        .map(|info| u64::try_from(info.delivered).unwrap_or(1))
        .unwrap_or(1);
    let reply = message
        .headers
        .as_ref()
        .and_then(|h| h.get(REPLY_HEADER))
        .map(|v| v.to_string());
    let repeat = message
        .headers
        .as_ref()
        .is_some_and(|h| h.get(REPEAT_HEADER).is_some());
    let traceparent = super::trace::received(message.headers.as_ref());
    let subject = message.subject.to_string();
    // hermes.inbox.<partition>.<agent>.<session>
    let mut tokens = subject.splitn(5, '.').skip(3);
    let (agent, session) = match (tokens.next(), tokens.next()) {
        (Some(a), Some(s)) => (a.to_string(), s.to_string()),
        _ => {
            return Err(BusError::InvalidSubject {
                subject,
                reason: "a session inbox subject is hermes.inbox.<partition>.<agent>.<session>"
                    .into(),
            })
        }
    };
    let payload = message.payload.clone();
    let age = message.info().map_or(std::time::Duration::ZERO, |info| {
        let published = info.published.unix_timestamp_nanos();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
        // A publish time ahead of this clock (skew) reads as just stored.
        u64::try_from(now.saturating_sub(published).max(0))
            .map_or(std::time::Duration::ZERO, std::time::Duration::from_nanos)
    });
    Ok(OwnedItem {
        agent,
        session,
        payload,
        reply,
        delivery,
        age,
        repeat,
        seq: message.info().ok().map(|info| info.stream_sequence),
        acker: Arc::new(JetStreamAcker::new(message)),
        traceparent,
    })
}
