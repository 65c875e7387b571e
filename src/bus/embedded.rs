//! The embedded (in-process) bus: NATS semantics without a server, for `hermes demo`, `hermes
//! chat` and single-process deployments.
//!
//! - Subjects, `*`/`>` wildcards, queue groups and request/reply live in [`fanout`]: bounded
//!   per-subscription channels, no background tasks, so every method works from any tokio
//!   runtime (including actix's current-thread arbiters); it only needs the caller's runtime to
//!   have timers enabled. Backpressure and the slow-subscriber rule are documented there.
//! - Request/reply uses a unique inbox subject `_INBOX.<uuid>`; a request nobody subscribes to
//!   fails at once with [`BusError::NoResponders`], like NATS.
//! - Durable work queues are stored in the sled database given to [`EmbeddedBus::open`]; see
//!   [`durable`] for storage layout, redelivery and restart behaviour.
//!
//! Dropping the bus ends every subscription and durable consumer stream (their `next()`
//! returns `None`).

mod durable;
mod fanout;
mod queue_state;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use super::pattern::{check_group, check_payload, check_subject};
use super::{
    Bus, BusError, DurableConsumer, DurableOptions, Message, Subscription, DEFAULT_MAX_PAYLOAD,
};
use durable::Queues;
use fanout::{Fanout, SUBSCRIPTION_CAPACITY};

/// Replies a request inbox buffers (a request takes the first; extra replies are discarded).
const INBOX_CAPACITY: usize = 4;

/// The in-process bus.
pub struct EmbeddedBus {
    fanout: Arc<Fanout>,
    queues: Queues,
}

impl EmbeddedBus {
    /// A bus whose durable queues live in `db` (trees `bus.queue.*`). Messages stored by an
    /// earlier process in the same database are delivered again to the first consumers.
    pub fn open(db: sled::Db) -> Result<Self, BusError> {
        Ok(Self {
            fanout: Fanout::new(),
            queues: Queues::new(db),
        })
    }

    fn check_size(&self, payload: &Bytes) -> Result<(), BusError> {
        check_payload(payload.len(), DEFAULT_MAX_PAYLOAD)
    }

    async fn send_request(&self, subject: &str, payload: Bytes) -> Result<Bytes, BusError> {
        let inbox = format!("_INBOX.{}", uuid::Uuid::new_v4().simple());
        let mut replies = self.fanout.subscribe(&inbox, None, INBOX_CAPACITY);
        let message = Message {
            subject: subject.to_string(),
            reply: Some(inbox),
            payload,
        };
        if self.fanout.publish(message).await == 0 {
            return Err(BusError::NoResponders {
                subject: subject.to_string(),
            });
        }
        match replies.recv().await {
            Some(reply) => Ok(reply.payload),
            None => Err(BusError::Closed),
        }
    }
}

impl Drop for EmbeddedBus {
    fn drop(&mut self) {
        self.queues.close();
    }
}

#[async_trait]
impl Bus for EmbeddedBus {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    fn max_payload(&self) -> usize {
        DEFAULT_MAX_PAYLOAD
    }

    async fn publish(&self, subject: &str, payload: Bytes) -> Result<(), BusError> {
        check_subject(subject, false)?;
        self.check_size(&payload)?;
        let message = Message {
            subject: subject.to_string(),
            reply: None,
            payload,
        };
        self.fanout.publish(message).await;
        Ok(())
    }

    async fn subscribe(&self, pattern: &str) -> Result<Subscription, BusError> {
        check_subject(pattern, true)?;
        let live = self.fanout.subscribe(pattern, None, SUBSCRIPTION_CAPACITY);
        Ok(Subscription::new(live))
    }

    async fn queue_subscribe(&self, pattern: &str, group: &str) -> Result<Subscription, BusError> {
        check_subject(pattern, true)?;
        check_group(group)?;
        let live = self
            .fanout
            .subscribe(pattern, Some(group), SUBSCRIPTION_CAPACITY);
        Ok(Subscription::new(live))
    }

    async fn request(
        &self,
        subject: &str,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, BusError> {
        check_subject(subject, false)?;
        self.check_size(&payload)?;
        match tokio::time::timeout(timeout, self.send_request(subject, payload)).await {
            Ok(result) => result,
            Err(_) => Err(BusError::Timeout {
                subject: subject.to_string(),
                after: timeout,
            }),
        }
    }

    async fn durable_publish(&self, queue: &str, payload: Bytes) -> Result<(), BusError> {
        check_subject(queue, false)?;
        self.check_size(&payload)?;
        self.queues.get(queue)?.publish(payload).await
    }

    async fn durable_consume(
        &self,
        queue: &str,
        options: DurableOptions,
    ) -> Result<DurableConsumer, BusError> {
        check_subject(queue, false)?;
        Ok(self.queues.get(queue)?.consumer(options))
    }

    /// Every publish has already been handed to its subscribers' buffers (and every durable
    /// publish flushed) when it returns, so there is nothing left to wait for.
    async fn flush(&self) -> Result<(), BusError> {
        Ok(())
    }
}
