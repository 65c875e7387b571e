//! Typed request/reply over the bus: encode an envelope, send it, decode the typed answer.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Bus, BusError};
use crate::envelope::{Envelope, EnvelopeError};

/// Why a typed call failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error(transparent)]
    Bus(#[from] BusError),
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
}

/// Largest reply a typed call accepts (the bus limit applies before this).
const MAX_REPLY_BYTES: usize = 64 * 1024 * 1024;

/// Send `request` on `subject` and decode a reply of kind `reply_kind`.
pub async fn call<Req: Serialize, Resp: DeserializeOwned>(
    bus: &dyn Bus,
    subject: &str,
    request: &Envelope<Req>,
    reply_kind: &str,
    timeout: Duration,
) -> Result<Envelope<Resp>, RpcError> {
    let payload = request.encode()?;
    let reply = bus.request(subject, payload, timeout).await?;
    Ok(Envelope::decode_as(&reply, MAX_REPLY_BYTES, reply_kind)?)
}

/// Publish an envelope on `subject`.
pub async fn publish<B: Serialize>(
    bus: &dyn Bus,
    subject: &str,
    envelope: &Envelope<B>,
) -> Result<(), RpcError> {
    bus.publish(subject, envelope.encode()?).await?;
    Ok(())
}
