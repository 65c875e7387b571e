//! Typed request/reply over the bus: encode an envelope, send it, decode the typed answer.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Bus, BusError};
use crate::protocol::envelope::{Envelope, EnvelopeError};
use crate::protocol::request::{Reply, Request};
use crate::protocol::subjects::IdError;

/// Why a typed call failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error(transparent)]
    Bus(#[from] BusError),
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    #[error(transparent)]
    Subject(#[from] IdError),
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

/// Send a typed request to its own subject and decode its typed reply.
pub async fn request<R: Request>(
    bus: &dyn Bus,
    request: &Envelope<R>,
    timeout: Duration,
) -> Result<Envelope<R::Reply>, RpcError> {
    let subject = R::subject(request)?;
    let payload = request.encode()?;
    let reply = bus.request(&subject, payload, timeout).await?;
    Ok(Envelope::decode_typed(
        &reply,
        MAX_REPLY_BYTES,
        <R::Reply as Reply>::KIND,
    )?)
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
