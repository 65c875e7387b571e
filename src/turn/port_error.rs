//! Why one of a turn's ports could not do what the turn asked: which request failed and how
//! (the bus, the envelope, the service's `error` answer), or why a remote delegation could
//! not start. The turn branches on it; its text is what the log and the model see.

use crate::a2a::delegate::DelegateError;
use crate::bus::rpc::RpcError;

/// A port's failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PortError {
    /// A request over the bus failed: `what` names it ("recalling memories", …).
    #[error("{what}: {source}")]
    Request {
        what: &'static str,
        #[source]
        source: RpcError,
    },
    /// The agent lives elsewhere (A2A) and this process does not delegate to remote agents.
    #[error(
        "agent `{agent}` lives elsewhere (A2A) and this process cannot reach it; run the \
         session service with the agent's [agents.{agent}.a2a] table"
    )]
    NoRemote { agent: String },
    /// A remote A2A delegation could not be recorded.
    #[error(transparent)]
    Remote(#[from] DelegateError),
}

impl PortError {
    /// A request that failed as `what`.
    pub fn request(what: &'static str) -> impl FnOnce(RpcError) -> PortError {
        move |source| PortError::Request { what, source }
    }

    /// The code of the service's `error` answer, when it answered with one.
    pub fn answered_code(&self) -> Option<&str> {
        match self {
            PortError::Request {
                source:
                    RpcError::Envelope(crate::protocol::envelope::EnvelopeError::Answered {
                        code, ..
                    }),
                ..
            } => Some(code),
            _ => None,
        }
    }
}
