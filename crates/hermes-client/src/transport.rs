//! What the client needs from a message bus: request/reply, publish (with a dedupe id),
//! subscribe (optionally in a queue group), flush. [`crate::nats`] implements it over
//! async-nats; the engine implements it over its in-process bus, so `hermes send` runs the
//! same client code with or without a NATS server.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;

/// One message received on a subscription.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub subject: String,
    /// Where the answer goes, when the sender used request/reply.
    pub reply: Option<String>,
    pub payload: Bytes,
}

/// The messages of one subscription, in order; it ends when the connection closes.
pub type Inbox = Pin<Box<dyn Stream<Item = Incoming> + Send>>;

/// Why the bus did not carry a message.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("nobody answers on {subject}: is `hermes serve` (with the actor that serves it) running on this bus?")]
    NoResponders { subject: String },
    #[error("no answer on {subject} within {after:?}: the service is busy or gone; try again or raise the timeout")]
    Timeout { subject: String, after: Duration },
    #[error("{action} on {subject} failed: {reason}; check the connection to the bus")]
    Failed {
        action: &'static str,
        subject: String,
        reason: String,
    },
}

/// A bus the client can talk over.
#[async_trait::async_trait]
pub trait Transport: Send + Sync {
    /// Send `payload` to `subject` and wait at most `timeout` for the one answer.
    async fn request(
        &self,
        subject: &str,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, TransportError>;

    /// Publish `payload` on `subject`; `msg_id` (the `Nats-Msg-Id` header) lets JetStream and
    /// a trigger's `dedupe` handle a repeated message once.
    async fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        msg_id: Option<&str>,
    ) -> Result<(), TransportError>;

    /// Receive what is published on `subject` (wildcards allowed); with `queue`, share the
    /// messages with the other members of that queue group.
    async fn subscribe(&self, subject: &str, queue: Option<&str>) -> Result<Inbox, TransportError>;

    /// Wait until everything published so far reached the server.
    async fn flush(&self) -> Result<(), TransportError>;
}
