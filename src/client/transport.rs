//! The engine's bus as a [`hermes_client::Transport`]: `hermes send` and `hermes chat` run the
//! client of `crates/hermes-client` whether the engine runs in their own process (the embedded
//! bus) or elsewhere (NATS, where they hand over the bus's own connection instead).

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use hermes_client::{Inbox, Incoming, Transport, TransportError};

use crate::bus::{BusError, SharedBus};

/// A [`SharedBus`] the client talks over.
pub struct BusTransport {
    bus: SharedBus,
}

impl BusTransport {
    pub fn new(bus: SharedBus) -> Self {
        Self { bus }
    }
}

fn transport_error(action: &'static str, subject: &str, error: BusError) -> TransportError {
    match error {
        BusError::NoResponders { subject } => TransportError::NoResponders { subject },
        BusError::Timeout { subject, after } => TransportError::Timeout { subject, after },
        other => TransportError::Failed {
            action,
            subject: subject.to_string(),
            reason: other.to_string(),
        },
    }
}

#[async_trait::async_trait]
impl Transport for BusTransport {
    async fn request(
        &self,
        subject: &str,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, TransportError> {
        self.bus
            .request(subject, payload, timeout)
            .await
            .map_err(|e| transport_error("request", subject, e))
    }

    /// In-process there is no JetStream to deduplicate by `msg_id`: the message goes as it is.
    async fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        _msg_id: Option<&str>,
    ) -> Result<(), TransportError> {
        self.bus
            .publish(subject, payload)
            .await
            .map_err(|e| transport_error("publish", subject, e))
    }

    async fn subscribe(&self, subject: &str, queue: Option<&str>) -> Result<Inbox, TransportError> {
        let subscription = match queue {
            Some(group) => self.bus.queue_subscribe(subject, group).await,
            None => self.bus.subscribe(subject).await,
        }
        .map_err(|e| transport_error("subscribe", subject, e))?;
        Ok(Box::pin(subscription.into_stream().map(|m| Incoming {
            subject: m.subject,
            reply: m.reply,
            payload: m.payload,
        })))
    }

    async fn flush(&self) -> Result<(), TransportError> {
        self.bus
            .flush()
            .await
            .map_err(|e| transport_error("flush", "the bus", e))
    }
}
