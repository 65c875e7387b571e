//! Sessions as the A2A side reaches them: over the bus, wherever they live (this process or
//! another one on NATS). Messages, decisions and cancels go to `hermes.in.<agent>.<session>`;
//! a session's durable state comes from `hermes.sessions.show` / `.list`; its events from
//! `hermes.out.<agent>.<session>.*`.

use std::time::Duration;

use crate::bus::{rpc, BusError, SharedBus, Subscription};
use crate::protocol::envelope::{Envelope, EnvelopeError};
use crate::protocol::request::Request;
use crate::protocol::session_view::{
    SessionDetail, SessionListRequest, SessionMessage, SessionShowRequest, SessionSummary,
};
use crate::protocol::subjects::{self, IdError};
use crate::protocol::{
    Accepted, Cancel, CancelAccepted, Confirmation, ConfirmationAccepted, UserMessage,
};

/// How long a request waits for a session service that is (re)starting.
const SERVICE_GRACE: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// The session service answered with an error (`code` as in its error envelopes).
    #[error("{message}")]
    Refused { code: String, message: String },
    #[error("no session service answered within {0:?}; is a `hermes serve` with the session actors running on this bus?")]
    Unavailable(Duration),
    #[error("the bus failed: {0}")]
    Bus(#[from] BusError),
    #[error(transparent)]
    Id(#[from] IdError),
}

/// One session's durable state and every message it stored.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub detail: SessionDetail,
    pub messages: Vec<SessionMessage>,
}

/// A decision on a paused turn: approve or decline one call (or, with no call id, every call
/// it waits on), with the answer to what a call's MCP server asked.
#[derive(Debug, Clone, Default)]
pub struct Decision {
    pub approve: bool,
    pub call_id: Option<String>,
    /// See [`Confirmation::content`].
    pub content: Option<serde_json::Value>,
}

/// Requests to sessions over one bus.
#[derive(Clone)]
pub struct Sessions {
    bus: SharedBus,
    timeout: Duration,
}

impl Sessions {
    pub fn new(bus: SharedBus, timeout: Duration) -> Self {
        Self { bus, timeout }
    }

    /// Send `text` as `user`'s message with envelope id `id`: a message with an id the
    /// session already stored is acknowledged again (with the turn it started), not re-run.
    pub async fn send(
        &self,
        agent: &str,
        session: &str,
        user: &str,
        id: &str,
        text: &str,
    ) -> Result<Accepted, SessionsError> {
        let body = UserMessage {
            resendable: true,
            ..UserMessage::text(text)
        };
        self.to_session(agent, session, user, Some(id), body).await
    }

    /// Approve or decline the calls the session's paused turn waits on (one call, or all).
    pub async fn confirm(
        &self,
        agent: &str,
        session: &str,
        user: &str,
        id: &str,
        decision: Decision,
    ) -> Result<ConfirmationAccepted, SessionsError> {
        let body = Confirmation {
            approve: decision.approve,
            call_id: decision.call_id,
            content: decision.content,
        };
        self.to_session(agent, session, user, Some(id), body).await
    }

    /// Cancel the session's unfinished turn (and the turns it delegated).
    pub async fn cancel(
        &self,
        agent: &str,
        session: &str,
        user: &str,
    ) -> Result<CancelAccepted, SessionsError> {
        self.cancel_because(
            agent,
            session,
            user,
            "cancelled by the A2A client (CancelTask)",
        )
        .await
    }

    /// Cancel the session's unfinished turn (and the turns it delegated), saying why.
    pub async fn cancel_because(
        &self,
        agent: &str,
        session: &str,
        user: &str,
        reason: &str,
    ) -> Result<CancelAccepted, SessionsError> {
        let body = Cancel {
            reason: Some(reason.to_owned()),
        };
        self.to_session(agent, session, user, None, body).await
    }

    /// Subscribe to the session's events (before sending, so none is missed).
    pub async fn events(&self, agent: &str, session: &str) -> Result<Subscription, SessionsError> {
        let subject = subjects::outbound_any_reader(agent, session)?;
        Ok(self.bus.subscribe_local(&subject).await?)
    }

    /// The session with all its messages; none when it does not exist.
    pub async fn load(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Option<Snapshot>, SessionsError> {
        let mut from_seq = 0;
        let mut snapshot: Option<Snapshot> = None;
        loop {
            let request = SessionShowRequest {
                agent: agent.to_owned(),
                session: session.to_owned(),
                from_seq,
                limit: 0,
            };
            let page = match self.ask(Envelope::request(request)).await {
                Ok(page) => page,
                Err(SessionsError::Refused { code, .. }) if code == "not_found" => return Ok(None),
                Err(e) => return Err(e),
            };
            let next = page.next_seq;
            match snapshot.as_mut() {
                Some(s) => s.messages.extend(page.messages),
                None => {
                    snapshot = Some(Snapshot {
                        detail: page.session,
                        messages: page.messages,
                    })
                }
            }
            match next {
                Some(seq) if seq > from_seq => from_seq = seq,
                _ => return Ok(snapshot),
            }
        }
    }

    /// `user`'s sessions of `agent`, newest first.
    pub async fn list(
        &self,
        agent: &str,
        user: &str,
    ) -> Result<Vec<SessionSummary>, SessionsError> {
        let mut all = Vec::new();
        let mut offset = 0;
        loop {
            let request = SessionListRequest {
                user: Some(user.to_owned()),
                agent: Some(agent.to_owned()),
                offset,
                limit: 0,
            };
            let page = self.ask(Envelope::request(request)).await?;
            let got = page.sessions.len();
            all.extend(page.sessions);
            match page.next_offset {
                Some(next) if got > 0 => offset = next,
                _ => return Ok(all),
            }
        }
    }

    async fn to_session<R: Request + Clone>(
        &self,
        agent: &str,
        session: &str,
        user: &str,
        id: Option<&str>,
        body: R,
    ) -> Result<R::Reply, SessionsError> {
        subjects::check_id("user", user)?;
        subjects::inbound(agent, session)?;
        let mut envelope = Envelope::request(body).for_session(agent, session, Some(user));
        if let Some(id) = id {
            envelope.id = id.to_owned();
        }
        self.ask(envelope).await
    }

    /// A request, waiting a little for a session service that is starting.
    async fn ask<R: Request + Clone>(
        &self,
        envelope: Envelope<R>,
    ) -> Result<R::Reply, SessionsError> {
        let grace = tokio::time::Instant::now() + self.timeout.min(SERVICE_GRACE);
        loop {
            match rpc::request(self.bus.as_ref(), envelope.clone(), self.timeout).await {
                Ok(reply) => return Ok(reply.body),
                Err(rpc::RpcError::Bus(BusError::NoResponders { .. }))
                    if tokio::time::Instant::now() < grace =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(rpc::RpcError::Bus(BusError::NoResponders { .. })) => {
                    return Err(SessionsError::Unavailable(self.timeout.min(SERVICE_GRACE)))
                }
                Err(rpc::RpcError::Bus(BusError::Timeout { .. })) => {
                    return Err(SessionsError::Unavailable(self.timeout))
                }
                Err(rpc::RpcError::Bus(e)) => return Err(SessionsError::Bus(e)),
                Err(rpc::RpcError::Subject(e)) => return Err(SessionsError::Id(e)),
                Err(rpc::RpcError::Envelope(EnvelopeError::Answered { code, message, .. })) => {
                    return Err(SessionsError::Refused { code, message })
                }
                Err(rpc::RpcError::Envelope(e)) => {
                    return Err(SessionsError::Refused {
                        code: "bad_reply".into(),
                        message: e.to_string(),
                    })
                }
            }
        }
    }
}
