//! Typed request/reply over the bus: encode an envelope, send it, decode the typed answer.

use std::time::Duration;

use serde::Serialize;

use super::service::LocalAnswer;
use super::{Bus, BusError, Handler};
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

/// Send a typed request to its own subject and return its typed reply. When the subject's only
/// listener is an in-process service (the embedded bus), the envelope is handed over as it is
/// and so is the reply: no encoding, no decoding, no copy of the request.
pub async fn request<R: Request>(
    bus: &dyn Bus,
    request: Envelope<R>,
    timeout: Duration,
) -> Result<Envelope<R::Reply>, RpcError> {
    // A sender with an identity on the bus says so in the subject of a message to a session.
    let subject = R::subject_from(&request, bus.identity())?;
    let request = match bus.local_handler(&subject) {
        Some(handler) => match local(handler.as_ref(), &subject, request, timeout).await? {
            Local::Answered(reply) => return Ok(reply),
            Local::Declined(request) => request,
        },
        None => request,
    };
    let payload = request.encode()?;
    let reply = bus.request(&subject, payload, timeout).await?;
    Ok(Envelope::decode_reply(&reply, MAX_REPLY_BYTES)?)
}

enum Local<R: Request> {
    Answered(Envelope<R::Reply>),
    /// The handler has no typed path: the request, back.
    Declined(Envelope<R>),
}

/// Hand `request` to an in-process handler, typed; its error answers read as the encoded
/// path's do.
async fn local<R: Request>(
    handler: &dyn Handler,
    subject: &str,
    request: Envelope<R>,
    timeout: Duration,
) -> Result<Local<R>, RpcError> {
    let answer = tokio::time::timeout(timeout, handler.handle_local(Box::new(request)))
        .await
        .map_err(|_| BusError::Timeout {
            subject: subject.to_string(),
            after: timeout,
        })?;
    let mismatch = || EnvelopeError::Kind {
        found: "an in-process value of another type".into(),
        expected: <R::Reply as Reply>::KIND.to_string(),
    };
    match answer {
        Ok(reply) => match reply.downcast::<LocalAnswer<R>>() {
            Ok(answer) => match *answer {
                Ok(reply) => Ok(Local::Answered(reply)),
                Err(e) => Err(RpcError::Envelope(EnvelopeError::Answered {
                    kind: <R::Reply as Reply>::KIND.to_string(),
                    code: e.code.to_string(),
                    message: e.message,
                })),
            },
            Err(_) => Err(mismatch().into()),
        },
        Err(back) => match back.downcast::<Envelope<R>>() {
            Ok(request) => Ok(Local::Declined(*request)),
            Err(_) => Err(mismatch().into()),
        },
    }
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
