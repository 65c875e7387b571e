//! Who pulls which session partition: every session process pulls every partition of stream
//! `HERMES_INBOX` through its durable consumer `owner-p<p>` in priority group `owner`, the
//! server delivers each partition to the one client it pinned, and [`super::balance`] says
//! which live process should hold it (see [`super::cluster`]'s module docs).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::pull::{Config as PullConfig, Stream as PullStream};
use async_nats::jetstream::consumer::{AckPolicy, PriorityPolicy, PullConsumer};
use async_nats::jetstream::Context;
use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::mpsc;

use super::balance::{self, Membership};
use super::cluster::{storage_error, INBOX_PREFIX, INBOX_STREAM, REPEAT_HEADER, REPLY_HEADER};
use super::jetstream::{through_failover, while_forming, JetStreamAcker};
use crate::bus::cluster::{ClusterOptions, OwnedItem, OwnedItems};
use crate::bus::{Acker, BusError};

/// The priority group every session process pulls in.
const OWNER_GROUP: &str = "owner";
/// Items of one partition an owner may hold unsettled at once (turns of different sessions
/// run in parallel; one session's items still run one after another).
const MAX_UNSETTLED_PER_PARTITION: i64 = 1024;
/// Longest a pull request waits at the server; shorter pulls notice a hand-over sooner.
const MAX_PULL_WAIT: Duration = Duration::from_secs(1);
/// How often a partition's puller looks at which process prefers the partition.
const PREFERENCE_CHECK: Duration = Duration::from_millis(200);

pub(super) async fn pull_every_partition(
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
