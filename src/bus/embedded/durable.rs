//! The embedded bus's durable work queues, stored in sled so a crash loses no queued message.
//!
//! Storage, per queue `<name>`:
//! - tree `bus.queue.<name>`: key = sequence (u64 big-endian, from `Db::generate_id`, so keys
//!   sort in publish order across restarts), value = payload. A publish and an ack do not flush
//!   by themselves: the queue lives in the engine's database, and the writer's next commit
//!   (a turn commits its `extraction_queued` mark after the publish) or sled's periodic flush
//!   makes them durable. A lost ack means a redelivery, which the extractor recognises.
//! - tree `bus.queue_deliveries.<name>`: key = the same sequence, value = how many times the
//!   message was handed out (u64 big-endian), written on each *re*delivery (`delivery` ≥ 2)
//!   *without* an explicit flush (sled's periodic flush persists it), so after a crash the
//!   count may lag by the deliveries of the last flush interval. A first delivery writes no
//!   count — most messages are acked on it, so the queue costs two writes a message, not four
//!   — because after a crash a restart counts every stored message without one as delivered
//!   once. That is enough for `max_deliver` to stop a poison message that crashes the process
//!   on every delivery. An orderly close ([`Queues::close`]) records the first deliveries of
//!   the messages still held and leaves a marker (key [`CLEAN_CLOSE`]), so the next start
//!   counts a message without a count as never delivered.
//!
//! A message published in this process is also kept in memory until its first delivery (up
//! to [`FRESH_BYTES`] a queue), with the value its publisher handed over, if any: that
//! delivery reads neither the tree nor, for a consumer that takes the value, the bytes.
//!
//! After a restart every stored message is ready again, and its delivery number continues from
//! the recorded count (so an unacked message usually comes back with `delivery` ≥ 2; after a
//! crash, every message does, as it may have been handed out before it).
//!
//! There is no background task: each consumer's `next()` promotes overdue in-flight and
//! delayed messages itself and sleeps until the earliest deadline or until the queue changes.
//! A message whose ack deadline passes is therefore redelivered to whichever consumer is
//! waiting (or to the next one that asks).

use crate::store::durability::Durable;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::queue_state::{Next, QueueState};
use crate::bus::local::LocalValue;
use crate::bus::{Acker, BusError, DurableConsumer, DurableMessage, DurableOptions};

/// Every durable queue of one embedded bus, opened on first use.
pub(crate) struct Queues {
    db: Durable,
    open: Mutex<HashMap<String, Arc<Queue>>>,
}

impl Queues {
    pub(crate) fn new(db: Durable) -> Self {
        Self {
            db,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The queue named `name`, loading its stored messages the first time.
    pub(crate) fn get(&self, name: &str) -> Result<Arc<Queue>, BusError> {
        let mut open = lock(&self.open);
        if let Some(queue) = open.get(name) {
            return Ok(queue.clone());
        }
        let queue = Arc::new(Queue::load(&self.db, name)?);
        open.insert(name.to_string(), queue.clone());
        Ok(queue)
    }

    /// The bus is going away: end every consumer stream, and record what the next start needs
    /// to count deliveries exactly ([`Queue::record_clean_close`]).
    pub(crate) fn close(&self) {
        for queue in lock(&self.open).values() {
            queue.closed.store(true, Ordering::SeqCst);
            queue.changed.notify_waiters();
            queue.record_clean_close();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a handful of map updates with no panicking calls, so a
    // poisoned lock still guards consistent data.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn storage(what: &str, queue: &str, err: impl std::fmt::Display) -> BusError {
    BusError::Storage(format!(
        "{what} for durable queue `{queue}`: {err}; check that the data directory is writable \
         and has free space"
    ))
}

/// The key, in a queue's deliveries tree, of the marker an orderly close leaves (not 8 bytes
/// long, so never a sequence).
const CLEAN_CLOSE: &[u8] = b"closed-cleanly";

fn seq_of(key: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(key).ok().map(u64::from_be_bytes)
}

/// One durable queue: its sled trees and its delivery bookkeeping.
pub(crate) struct Queue {
    name: String,
    db: Durable,
    messages: sled::Tree,
    deliveries: sled::Tree,
    state: Mutex<QueueState>,
    /// Messages published in this process and not yet delivered: the payload, and the value
    /// its publisher handed over. Taken by the first delivery; what a restart finds in the
    /// tree is read from there.
    fresh: Mutex<FreshSet>,
    changed: Notify,
    closed: AtomicBool,
}

/// At most this many bytes of a queue's messages are kept in memory until their first
/// delivery: a queue nobody in this process consumes keeps the rest in its tree alone.
const FRESH_BYTES: usize = 4 << 20;

/// A message published in this process, before its first delivery.
struct Fresh {
    payload: Bytes,
    local: Option<Arc<dyn LocalValue>>,
}

/// A queue's messages waiting in memory for their first delivery, and their bytes.
#[derive(Default)]
struct FreshSet {
    messages: HashMap<u64, Fresh>,
    bytes: usize,
}

impl FreshSet {
    fn keep(&mut self, seq: u64, fresh: Fresh) {
        let size = fresh.payload.len();
        if self.bytes + size <= FRESH_BYTES {
            self.bytes += size;
            self.messages.insert(seq, fresh);
        }
    }

    fn take(&mut self, seq: u64) -> Option<Fresh> {
        let fresh = self.messages.remove(&seq)?;
        self.bytes -= fresh.payload.len();
        Some(fresh)
    }
}

impl Queue {
    fn load(db: &Durable, name: &str) -> Result<Self, BusError> {
        let open = |tree: String| {
            db.open_tree(tree)
                .map_err(|e| storage("cannot open", name, e))
        };
        let messages = open(format!("bus.queue.{name}"))?;
        let deliveries = open(format!("bus.queue_deliveries.{name}"))?;
        let mut stored = Vec::new();
        for key in messages.iter().keys() {
            let key = key.map_err(|e| storage("cannot read", name, e))?;
            match seq_of(&key) {
                Some(seq) => stored.push(seq),
                None => tracing::warn!(queue = name, "ignoring a malformed key in the queue tree"),
            }
        }
        // After a crash a message without a count may have been handed out once (a first
        // delivery is not recorded): its next delivery is a redelivery. After an orderly close
        // every delivery was recorded.
        let clean = deliveries
            .remove(CLEAN_CLOSE)
            .map_err(|e| storage("cannot read", name, e))?
            .is_some();
        let mut counts: HashMap<u64, u64> = if clean {
            HashMap::new()
        } else {
            stored.iter().map(|&seq| (seq, 1)).collect()
        };
        for entry in deliveries.iter() {
            let (key, value) = entry.map_err(|e| storage("cannot read", name, e))?;
            match (seq_of(&key), seq_of(&value)) {
                (Some(seq), Some(count)) if stored.binary_search(&seq).is_ok() => {
                    counts.insert(seq, count);
                }
                // The message was acked but the crash came before its count was removed.
                _ => {
                    deliveries
                        .remove(&key)
                        .map_err(|e| storage("cannot clean", name, e))?;
                }
            }
        }
        Ok(Self {
            name: name.to_string(),
            db: db.clone(),
            messages,
            deliveries,
            state: Mutex::new(QueueState::recovered(stored, counts)),
            fresh: Mutex::default(),
            changed: Notify::new(),
            closed: AtomicBool::new(false),
        })
    }

    /// Store `payload` (durable with the database's next flush), then offer it to consumers,
    /// with `local`, the value it encodes, for an in-process consumer.
    pub(crate) async fn publish(
        &self,
        payload: Bytes,
        local: Option<Arc<dyn LocalValue>>,
    ) -> Result<(), BusError> {
        let seq = self
            .db
            .generate_id()
            .map_err(|e| storage("cannot allocate a sequence", &self.name, e))?;
        self.messages
            .insert(seq.to_be_bytes(), payload.as_ref())
            .map_err(|e| storage("cannot store a message", &self.name, e))?;
        self.db.commit_lazy();
        lock(&self.fresh).keep(seq, Fresh { payload, local });
        lock(&self.state).push(seq);
        self.changed.notify_waiters();
        Ok(())
    }

    /// A consumer stream; several consumers of one queue share its messages.
    pub(crate) fn consumer(self: Arc<Self>, options: DurableOptions) -> DurableConsumer {
        let stream = futures::stream::unfold(self, move |queue| async move {
            let item = queue.next_delivery(&options).await?;
            Some((item, queue))
        });
        DurableConsumer::new(stream)
    }

    async fn next_delivery(
        self: &Arc<Self>,
        options: &DurableOptions,
    ) -> Option<Result<DurableMessage, BusError>> {
        loop {
            // Register interest before looking, so a change between the look and the wait
            // still wakes us.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.closed.load(Ordering::SeqCst) {
                return None;
            }
            let next = lock(&self.state).next(Instant::now(), options);
            match next {
                Next::Deliver { seq, delivery } => {
                    self.changed.notify_waiters(); // others re-plan their wake-up time
                    match self.delivery(seq, delivery) {
                        Ok(Some(message)) => return Some(Ok(message)),
                        Ok(None) => {
                            lock(&self.state).settle(seq); // acked meanwhile
                        }
                        Err(err) => return Some(Err(err)),
                    }
                }
                Next::Exhausted { seq, deliveries } => {
                    tracing::error!(
                        queue = %self.name,
                        seq,
                        deliveries,
                        "durable message dropped after reaching max_deliver without an ack; \
                         its handler keeps failing, check the handler's logs"
                    );
                    if let Err(err) = self.remove(seq, true).await {
                        return Some(Err(err));
                    }
                }
                Next::Wait(Some(at)) => {
                    tokio::select! {
                        _ = &mut changed => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                Next::Wait(None) => changed.await,
            }
        }
    }

    /// Read message `seq` and record delivery number `delivery` (from the second on: see the
    /// module doc); `None` if it is gone.
    fn delivery(
        self: &Arc<Self>,
        seq: u64,
        delivery: u64,
    ) -> Result<Option<DurableMessage>, BusError> {
        let key = seq.to_be_bytes();
        let fresh = lock(&self.fresh).take(seq);
        let (payload, local) = match fresh {
            Some(Fresh { payload, local }) => (payload, local),
            None => match self
                .messages
                .get(key)
                .map_err(|e| storage("cannot read a message", &self.name, e))?
            {
                Some(stored) => (Bytes::copy_from_slice(&stored), None),
                None => return Ok(None),
            },
        };
        if delivery > 1 {
            self.deliveries
                .insert(key, &delivery.to_be_bytes())
                .map_err(|e| storage("cannot record a delivery", &self.name, e))?;
        }
        let acker = QueueAcker {
            queue: self.clone(),
            seq,
            delivery,
        };
        Ok(Some(
            DurableMessage::new(payload, delivery, Box::new(acker)).with_local(local),
        ))
    }

    /// Delete message `seq` for good (durable with the database's next flush), with its
    /// delivery count if it was redelivered (or `counted` says a count may be stored anyway).
    async fn remove(&self, seq: u64, counted: bool) -> Result<(), BusError> {
        let delivered = lock(&self.state).settle(seq);
        lock(&self.fresh).take(seq);
        let key = seq.to_be_bytes();
        self.messages
            .remove(key)
            .map_err(|e| storage("cannot remove a message", &self.name, e))?;
        if counted || delivered > 1 {
            self.deliveries
                .remove(key)
                .map_err(|e| storage("cannot remove a delivery count", &self.name, e))?;
        }
        self.db.commit_lazy();
        Ok(())
    }

    /// An orderly close: record the first deliveries (not recorded as they happen) of the
    /// messages still held, then the marker that says every delivery is recorded. Without it
    /// — a crash, or a failure here — the next start counts every message as delivered once.
    fn record_clean_close(&self) {
        let once = lock(&self.state).delivered_once();
        let recorded = once
            .iter()
            .try_for_each(|seq| {
                let count = 1u64.to_be_bytes();
                self.deliveries.insert(seq.to_be_bytes(), &count).map(drop)
            })
            .and_then(|()| self.deliveries.insert(CLEAN_CLOSE, &[]).map(drop));
        if let Err(e) = recorded {
            tracing::warn!(queue = %self.name, error = %e, "delivery counts not recorded at close; after the restart every queued message counts as delivered once");
        }
    }

    fn update(&self, change: impl FnOnce(&mut QueueState, Instant)) {
        change(&mut lock(&self.state), Instant::now());
        self.changed.notify_waiters();
    }
}

/// Settles one delivery of an embedded durable message.
struct QueueAcker {
    queue: Arc<Queue>,
    seq: u64,
    delivery: u64,
}

#[async_trait]
impl Acker for QueueAcker {
    async fn ack(&self) -> Result<(), BusError> {
        self.queue.remove(self.seq, false).await?;
        self.queue.changed.notify_waiters();
        Ok(())
    }

    async fn nak(&self, delay: Option<Duration>) -> Result<(), BusError> {
        let (seq, delivery) = (self.seq, self.delivery);
        self.queue
            .update(|state, now| state.nak(seq, delivery, delay, now));
        Ok(())
    }

    async fn in_progress(&self) -> Result<(), BusError> {
        let (seq, delivery) = (self.seq, self.delivery);
        self.queue
            .update(|state, now| state.extend(seq, delivery, now));
        Ok(())
    }
}

#[cfg(test)]
#[path = "durable_tests.rs"]
mod tests;
