//! Why a client call failed.

use std::time::Duration;

use hermes_protocol::envelope::EnvelopeError;
use hermes_protocol::subjects::IdError;

use crate::nats::ConnectError;
use crate::transport::TransportError;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Id(#[from] IdError),
    /// The request could not be encoded, or the service answered with an error or with
    /// something else than the reply the request expects.
    #[error("the request was not accepted: {0}")]
    Refused(#[from] EnvelopeError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(
        "no answer within {0:?}; is a session service running (hermes serve --actors session,…)?"
    )]
    Timeout(Duration),
    #[error("the event stream ended before the turn finished: the connection to the bus closed")]
    Closed,
}
