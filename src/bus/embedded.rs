//! The embedded (in-process) bus: NATS semantics without a server, for `hermes demo`, `hermes
//! chat` and single-process deployments.
//!
//! - Subjects, `*`/`>` wildcards and queue groups live in [`fanout`]: bounded per-subscription
//!   channels, and services ([`Handler`]s) that are *called* in the publisher's task — so a
//!   request to an in-process service and its reply cost no thread switch. No background
//!   tasks: every method works from any tokio runtime (actix's current-thread arbiters
//!   included) that has timers enabled. Backpressure and the slow-subscriber rule are there.
//! - Request/reply uses an inbox subject `_INBOX.<n>` backed by a oneshot: a reply completes
//!   the waiting request directly (a handler that answered inline leaves it ready before the
//!   requester even waits). A request nobody listens to fails at once with
//!   [`BusError::NoResponders`], like NATS.
//! - Durable work queues are stored in the sled database given to [`EmbeddedBus::open`]; see
//!   [`durable`] for storage layout, redelivery and restart behaviour.
//!
//! Dropping the bus ends every subscription and durable consumer stream (their `next()`
//! returns `None`).

mod durable;
mod fanout;
mod queue_state;
mod wild_index;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::oneshot;

use super::local::LocalValue;
use super::pattern::{check_group, check_payload, check_subject};
use super::{
    Bus, BusError, CaptureOptions, DurableConsumer, DurableMessage, DurableOptions, Handler,
    Message, Serving, Subscription, DEFAULT_MAX_PAYLOAD,
};
use crate::store::durability::Durable;
use durable::Queues;
use fanout::{Fanout, SUBSCRIPTION_CAPACITY};

/// What every inbox subject of this bus starts with.
const INBOX_PREFIX: &str = "_INBOX.";

/// The in-process bus.
pub struct EmbeddedBus {
    fanout: Arc<Fanout>,
    queues: Queues,
    /// Requests waiting for their reply, by inbox subject; a reply completes one at once.
    inboxes: Arc<Inboxes>,
}

#[derive(Default)]
struct Inboxes {
    next: AtomicU64,
    waiting: Mutex<HashMap<String, oneshot::Sender<Bytes>>>,
}

impl Inboxes {
    fn open(&self) -> (String, oneshot::Receiver<Bytes>) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let subject = format!("{INBOX_PREFIX}{n}");
        let (tx, rx) = oneshot::channel();
        self.lock().insert(subject.clone(), tx);
        (subject, rx)
    }

    fn close(&self, subject: &str) {
        self.lock().remove(subject);
    }

    /// Complete the request waiting on `subject`; false when none waits (late or unknown).
    fn deliver(&self, subject: &str, payload: Bytes) -> bool {
        let waiting = self.lock().remove(subject);
        match waiting {
            Some(tx) => tx.send(payload).is_ok(),
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Bytes>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Removes an inbox whose request gave up (timeout, cancellation).
struct InboxGuard<'a> {
    inboxes: &'a Inboxes,
    subject: String,
}

impl Drop for InboxGuard<'_> {
    fn drop(&mut self) {
        self.inboxes.close(&self.subject);
    }
}

impl EmbeddedBus {
    /// A bus whose durable queues live in `db` (trees `bus.queue.*`). Messages stored by an
    /// earlier process in the same database are delivered again to the first consumers.
    pub fn open(db: Durable) -> Result<Self, BusError> {
        Ok(Self {
            fanout: Fanout::new(),
            queues: Queues::new(db),
            inboxes: Arc::default(),
        })
    }

    fn check_size(&self, payload: &Bytes) -> Result<(), BusError> {
        check_payload(payload.len(), DEFAULT_MAX_PAYLOAD)
    }

    /// Store `payload` on durable queue `queue`, with `local`, the value it encodes, for a
    /// consumer in this process.
    async fn enqueue(
        &self,
        queue: &str,
        payload: Bytes,
        local: Option<Arc<dyn LocalValue>>,
    ) -> Result<(), BusError> {
        check_subject(queue, false)?;
        self.check_size(&payload)?;
        self.queues.get(queue)?.publish(payload, local).await
    }

    /// Hand `message` to its listeners (handlers run now) or to the request waiting on it.
    async fn route(&self, message: Message) -> usize {
        if message.subject.starts_with(INBOX_PREFIX)
            && self
                .inboxes
                .deliver(&message.subject, message.payload.clone())
        {
            return 1;
        }
        let inboxes = self.inboxes.clone();
        let fanout = self.fanout.clone();
        let reply = move |to: String, answer: Bytes| {
            let inboxes = inboxes.clone();
            let fanout = fanout.clone();
            async move {
                if !inboxes.deliver(&to, answer.clone()) {
                    let message = Message::new(to, None, answer);
                    fanout.publish(message, |_, _| async {}).await;
                }
            }
        };
        self.fanout.publish(message, reply).await
    }

    async fn send_request(&self, subject: &str, payload: Bytes) -> Result<Bytes, BusError> {
        let (inbox, reply) = self.inboxes.open();
        let _guard = InboxGuard {
            inboxes: &self.inboxes,
            subject: inbox.clone(),
        };
        let message = Message {
            subject: subject.to_string(),
            reply: Some(inbox),
            payload,
            traceparent: crate::telemetry::trace_context::current(),
            local: None,
        };
        if self.route(message).await == 0 {
            return Err(BusError::NoResponders {
                subject: subject.to_string(),
            });
        }
        reply.await.map_err(|_| BusError::Closed)
    }
}

impl Drop for EmbeddedBus {
    fn drop(&mut self) {
        self.queues.close();
    }
}

#[async_trait]
impl Bus for EmbeddedBus {
    fn backend(&self) -> crate::bus::BusBackend {
        crate::bus::BusBackend::Embedded
    }

    fn max_payload(&self) -> usize {
        DEFAULT_MAX_PAYLOAD
    }

    async fn publish(&self, subject: &str, payload: Bytes) -> Result<(), BusError> {
        check_subject(subject, false)?;
        self.check_size(&payload)?;
        // Services run in this task (the span goes along by itself); a subscriber reading
        // from its channel gets the context with the message.
        let message = Message {
            subject: subject.to_string(),
            reply: None,
            payload,
            traceparent: crate::telemetry::trace_context::current(),
            local: None,
        };
        self.route(message).await;
        Ok(())
    }

    async fn subscribe(&self, pattern: &str) -> Result<Subscription, BusError> {
        check_subject(pattern, true)?;
        let live = self.fanout.subscribe(pattern, None, SUBSCRIPTION_CAPACITY);
        Ok(Subscription::new(live))
    }

    async fn publish_local(
        &self,
        subject: &str,
        body: Arc<dyn LocalValue>,
    ) -> Result<(), BusError> {
        check_subject(subject, false)?;
        if subject.starts_with(INBOX_PREFIX) {
            // A request's reply inbox reads bytes.
            let payload = super::local::encode_for(subject, body.as_ref())?;
            return self.publish(subject, payload).await;
        }
        let message = Message {
            subject: subject.to_string(),
            reply: None,
            payload: Bytes::new(),
            traceparent: crate::telemetry::trace_context::current(),
            local: Some(body),
        };
        self.route(message).await;
        Ok(())
    }

    async fn subscribe_local(&self, pattern: &str) -> Result<Subscription, BusError> {
        check_subject(pattern, true)?;
        let live = self.fanout.subscribe_values(pattern, SUBSCRIPTION_CAPACITY);
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

    async fn serve(
        &self,
        pattern: &str,
        group: &str,
        handler: Arc<dyn Handler>,
    ) -> Result<Serving, BusError> {
        check_subject(pattern, true)?;
        check_group(group)?;
        Ok(Serving::new(self.fanout.serve(
            pattern,
            Some(group),
            handler,
        )))
    }

    fn local_handler(&self, subject: &str) -> Option<Arc<dyn Handler>> {
        self.fanout.sole_handler(subject)
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
        self.enqueue(queue, payload, None).await
    }

    async fn durable_publish_local(
        &self,
        queue: &str,
        body: Arc<dyn LocalValue>,
    ) -> Result<(), BusError> {
        let payload = super::local::encode_for(queue, body.as_ref())?;
        self.enqueue(queue, payload, Some(body)).await
    }

    async fn durable_consume(
        &self,
        queue: &str,
        options: DurableOptions,
    ) -> Result<DurableConsumer, BusError> {
        check_subject(queue, false)?;
        Ok(self.queues.get(queue)?.consumer(options))
    }

    /// A subscription to each subject whose messages are settled by handling them: an
    /// in-process publisher has nothing to replay after a restart.
    async fn capture(
        &self,
        _name: &str,
        subjects: &[String],
        _options: CaptureOptions,
    ) -> Result<DurableConsumer, BusError> {
        let mut streams = Vec::new();
        for subject in subjects {
            check_subject(subject, true)?;
            streams.push(self.subscribe(subject).await?.into_stream());
        }
        let merged = futures::stream::select_all(streams).map(|message| {
            Ok(DurableMessage::new(message.payload, 1, Box::new(Settled))
                .with_origin(message.subject, None)
                .with_traceparent(message.traceparent))
        });
        Ok(DurableConsumer::new(merged))
    }

    /// Every publish has already been handed to its listeners (and every handler has run)
    /// when it returns, so there is nothing left to wait for.
    async fn flush(&self) -> Result<(), BusError> {
        Ok(())
    }
}

/// The acknowledgement of a captured message on the embedded bus: nothing to settle.
struct Settled;

#[async_trait]
impl super::Acker for Settled {
    async fn ack(&self) -> Result<(), BusError> {
        Ok(())
    }
    async fn nak(&self, _delay: Option<Duration>) -> Result<(), BusError> {
        Ok(())
    }
    async fn in_progress(&self) -> Result<(), BusError> {
        Ok(())
    }
}
