//! A live feed of one replicated log's appends (the memory log): an ephemeral consumer that
//! delivers the last record of every key, then every append — headers only: each append
//! carries its record's fingerprint — into a [`TailBoard`] that readers ask instead of the
//! stream's leader (see [`crate::store::log_tails`]).
//!
//! The feed checks its own order: a delivery out of sequence, a missed heartbeat, a deleted
//! consumer or a lost connection ends it, the board stops vouching at once, and a new consumer
//! starts from every key's last record again. It costs one delivery per append and, when the
//! log is quiet, a heartbeat every [`HEARTBEAT`] and a new pull every [`EXPIRES`].

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::pull::Config;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy};
use futures::StreamExt;
use tokio::runtime::Handle;

use super::log::{NatsSessionLog, FINGERPRINT_HEADER};
use super::AbortOnDrop;
use crate::store::log_tails::{Heard, HeardTails, TailBoard};
use crate::store::replica::LogError;

/// Why a feed stopped.
#[derive(Debug, thiserror::Error)]
enum FeedBreak {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("cannot create its consumer: {0}")]
    Create(String),
    #[error("cannot pull: {0}")]
    Pull(String),
    #[error("the connection to nats-server lost deliveries (disconnected or too slow)")]
    Connection,
    #[error("the feed skipped a delivery (expected {expected}, got {got})")]
    Skipped { expected: u64, got: u64 },
}

/// How long one pull waits at the server.
const EXPIRES: Duration = Duration::from_secs(10);
/// The server's sign of life on a quiet feed; two missed end the feed, so a feed that went
/// silent stops vouching within about twice this.
const HEARTBEAT: Duration = Duration::from_secs(2);
/// Records asked for per pull while catching up.
const BATCH: usize = 512;
/// An ephemeral consumer nobody pulls is removed by the server after this long.
const INACTIVE: Duration = Duration::from_secs(30);
/// Waits before starting a broken feed again: the first, and the longest.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// The tails heard by a running feed; the feed stops when this is dropped.
pub(super) struct LogFeed {
    board: Arc<TailBoard>,
    _task: AbortOnDrop,
}

impl LogFeed {
    /// Start following `log` on `runtime`; `breaks` changes whenever the connection loses
    /// deliveries.
    pub(super) fn start(log: Arc<NatsSessionLog>, breaks: Breaks, runtime: &Handle) -> Self {
        let board = Arc::new(TailBoard::default());
        let task = runtime.spawn(follow(log, breaks, board.clone()));
        Self {
            board,
            _task: AbortOnDrop(task),
        }
    }
}

impl HeardTails for LogFeed {
    fn heard(&self, a: &str, b: &str) -> Heard {
        self.board.heard(a, b)
    }
}

/// Changes whenever the connection loses deliveries it was owed.
pub(super) type Breaks = tokio::sync::watch::Receiver<u64>;

/// Counts the times a connection may have lost deliveries it was owed (a disconnection, a
/// slow consumer): what a feed cannot vouch across. A disconnection is seen at once, where
/// missed heartbeats take seconds.
pub(super) struct BreakCount(tokio::sync::watch::Sender<u64>);

impl Default for BreakCount {
    fn default() -> Self {
        Self(tokio::sync::watch::Sender::new(0))
    }
}

impl BreakCount {
    /// Count `event` (from the connection's event callback) if it may have lost deliveries.
    pub(super) fn observe(&self, event: &async_nats::Event) {
        use async_nats::Event;
        if matches!(
            event,
            Event::Disconnected | Event::SlowConsumer(_) | Event::LameDuckMode | Event::Closed
        ) {
            self.0.send_modify(|n| *n += 1);
        }
    }

    pub(super) fn subscribe(&self) -> Breaks {
        self.0.subscribe()
    }
}

/// Follow the log for as long as the task lives, starting again after every break.
async fn follow(log: Arc<NatsSessionLog>, mut breaks: Breaks, board: Arc<TailBoard>) {
    let mut wait = RETRY_FIRST;
    let mut failing = false;
    loop {
        breaks.mark_unchanged();
        let result = tokio::select! {
            result = follow_once(&log, &board) => result,
            _ = breaks.changed() => Err(FeedBreak::Connection),
        };
        if board.is_live() {
            wait = RETRY_FIRST;
            failing = false;
        }
        // Vouch for nothing from the moment it broke until a new consumer has caught up.
        board.restart();
        match result {
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(stream = log.stream_name(), reason = %e, "the feed of the log's appends broke; recalls read the log's last record until it has caught up again");
            }
            Err(e) => {
                tracing::debug!(stream = log.stream_name(), reason = %e, "the feed of the log's appends still cannot start");
            }
            Ok(()) => {
                tracing::debug!(
                    stream = log.stream_name(),
                    "the feed of the log's appends ended; starting it again"
                );
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RETRY_MAX);
    }
}

/// One consumer's life: every key's last record, then every append, until something breaks.
async fn follow_once(log: &NatsSessionLog, board: &TailBoard) -> Result<(), FeedBreak> {
    let pull = |e: &dyn std::fmt::Display| FeedBreak::Pull(e.to_string());
    let stream = log.stream().await?;
    let config = Config {
        deliver_policy: DeliverPolicy::LastPerSubject,
        ack_policy: AckPolicy::None,
        filter_subject: format!("{}.>", log.prefix()),
        inactive_threshold: INACTIVE,
        memory_storage: true,
        num_replicas: 1,
        // The fingerprint header says what the feed needs of a record: a user's whole
        // memory, re-seeded in one entry, is not shipped to every copy.
        headers_only: true,
        ..Default::default()
    };
    let consumer = stream
        .create_consumer(config)
        .await
        .map_err(|e| FeedBreak::Create(e.to_string()))?;
    let caught_up = |keys: u64| {
        board.caught_up();
        tracing::debug!(
            stream = log.stream_name(),
            records = keys,
            "the feed of the log's appends caught up"
        );
    };
    if consumer.cached_info().num_pending == 0 {
        caught_up(0);
    }
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(BATCH)
        .expires(EXPIRES)
        .heartbeat(HEARTBEAT)
        .messages()
        .await
        .map_err(|e| pull(&e))?;
    let below_prefix = log.prefix().len() + 1;
    let mut delivered = 0u64;
    while let Some(item) = messages.next().await {
        let message = item.map_err(|e| pull(&e))?;
        let info = message.info().map_err(|e| pull(&e))?;
        delivered += 1;
        if info.consumer_sequence != delivered {
            return Err(FeedBreak::Skipped {
                expected: delivered,
                got: info.consumer_sequence,
            });
        }
        let key = message.subject.get(below_prefix..).unwrap_or_default();
        let print = message
            .headers
            .as_ref()
            .and_then(|h| h.get(FINGERPRINT_HEADER))
            .and_then(|v| u64::from_str_radix(v.as_str(), 16).ok());
        board.record(key, info.stream_sequence, print);
        if info.pending == 0 && !board.is_live() {
            caught_up(delivered);
        }
    }
    Ok(())
}
