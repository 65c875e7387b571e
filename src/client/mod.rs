//! A session seen from inside the process that runs the engine: send a message and follow its
//! events over the in-process bus, handing envelopes over as values where the bus allows.
//!
//! Used by `hermes demo`, the benchmarks, evals, A2A and the tests. A process outside the
//! engine — `hermes send` and `hermes chat` among them — uses `hermes-client`
//! (`crates/hermes-client`), over NATS or over the engine's bus ([`transport`]); the turn's
//! trace and the event helpers are that crate's.

pub mod transport;

use std::collections::VecDeque;
use std::time::Duration;

use crate::bus::{rpc, SharedBus, Subscription};
use crate::protocol::envelope::Envelope;
use crate::protocol::request::Request;
use crate::protocol::subjects;
use crate::protocol::{
    Accepted, Cancel, CancelAccepted, Confirmation, ConfirmationAccepted, TurnEvent, TurnEvents,
    UserMessage,
};
pub use hermes_client::{event_turn, PendingCall, TurnTrace};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Id(#[from] subjects::IdError),
    #[error("the message was not accepted: {0}")]
    Refused(String),
    #[error(transparent)]
    Bus(#[from] crate::bus::BusError),
    #[error(
        "no answer within {0:?}; is a session service running (hermes serve --actors session,…)?"
    )]
    Timeout(Duration),
    #[error("the event stream ended before the turn finished")]
    Closed,
}

/// How long a request waits for a session service to appear on the bus.
const SERVICE_GRACE: Duration = Duration::from_secs(15);

/// A session as seen from outside.
pub struct SessionClient {
    bus: SharedBus,
    agent: String,
    session: String,
    user: String,
    inbound: String,
    events: Subscription,
    /// Events that arrived together with the one last returned, not yet read.
    pending: VecDeque<TurnEvent>,
}

impl SessionClient {
    /// Subscribe to the session's events (before anything is sent, so none is missed),
    /// whoever their reader is: for a bus without permissions, Hermes' own services and
    /// operators. A publisher held to its own events opens with [`SessionClient::open_reading`].
    pub async fn open(
        bus: SharedBus,
        agent: &str,
        session: &str,
        user: &str,
    ) -> Result<Self, ClientError> {
        Self::open_reading(bus, agent, session, user, None).await
    }

    /// [`SessionClient::open`], subscribed to the events for `reader` only
    /// (`hermes.out.<agent>.<session>.<reader>`, [`crate::config::publishers::reader_of`]) —
    /// all a NATS user like config/nats/hermes.conf's `alice` or `shop` may read.
    pub async fn open_reading(
        bus: SharedBus,
        agent: &str,
        session: &str,
        user: &str,
        reader: Option<&str>,
    ) -> Result<Self, ClientError> {
        subjects::check_id("user", user)?;
        let inbound = subjects::inbound(agent, session)?;
        let pattern = match reader {
            Some(reader) => subjects::outbound(agent, session, reader)?,
            None => subjects::outbound_any_reader(agent, session)?,
        };
        let events = bus.subscribe_local(&pattern).await?;
        Ok(Self {
            bus,
            agent: agent.into(),
            session: session.into(),
            user: user.into(),
            inbound,
            events,
            pending: VecDeque::new(),
        })
    }

    /// Send `text`; returns once the session has persisted it.
    pub async fn send(&mut self, text: &str, timeout: Duration) -> Result<Accepted, ClientError> {
        let body = UserMessage::text(text);
        self.request(body, timeout).await
    }

    /// Approve (or decline) the high-risk call the session's turn waits on — `call_id`, or
    /// every undecided call when `None`; returns once the decision is persisted.
    pub async fn confirm(
        &mut self,
        approve: bool,
        call_id: Option<&str>,
        timeout: Duration,
    ) -> Result<ConfirmationAccepted, ClientError> {
        self.decide(approve, call_id, None, timeout).await
    }

    /// Answer what the MCP server of the call `call_id` asked (`confirmation.required` with
    /// `questions`): `content` is the form's answer (an object keyed by question for several
    /// questions); returns once the answer is persisted and the call goes on.
    pub async fn answer(
        &mut self,
        call_id: &str,
        content: serde_json::Value,
        timeout: Duration,
    ) -> Result<ConfirmationAccepted, ClientError> {
        self.decide(true, Some(call_id), Some(content), timeout)
            .await
    }

    async fn decide(
        &mut self,
        approve: bool,
        call_id: Option<&str>,
        content: Option<serde_json::Value>,
        timeout: Duration,
    ) -> Result<ConfirmationAccepted, ClientError> {
        let body = Confirmation {
            approve,
            call_id: call_id.map(str::to_string),
            content,
        };
        self.request(body, timeout).await
    }

    /// Cancel the session's turn in progress and the turns it delegated.
    pub async fn cancel(&mut self, timeout: Duration) -> Result<CancelAccepted, ClientError> {
        self.cancel_because("cancelled with hermes send --cancel", timeout)
            .await
    }

    /// [`SessionClient::cancel`], saying why (the turn's `error` event carries it).
    pub async fn cancel_because(
        &mut self,
        reason: &str,
        timeout: Duration,
    ) -> Result<CancelAccepted, ClientError> {
        let body = Cancel {
            reason: Some(reason.to_string()),
        };
        self.request(body, timeout).await
    }

    async fn request<R: Request + Clone>(
        &mut self,
        body: R,
        timeout: Duration,
    ) -> Result<R::Reply, ClientError> {
        let env = Envelope::request(body).for_session(&self.agent, &self.session, Some(&self.user));
        // A session service that is starting (or restarting) is waited for a little while.
        let grace = tokio::time::Instant::now() + timeout.min(SERVICE_GRACE);
        let mut told = false;
        loop {
            match rpc::request(self.bus.as_ref(), env.clone(), timeout).await {
                Ok(reply) => return Ok(reply.body),
                Err(rpc::RpcError::Bus(crate::bus::BusError::NoResponders { .. }))
                    if tokio::time::Instant::now() < grace =>
                {
                    if !told {
                        tracing::info!(subject = %self.inbound, "no session service yet; waiting");
                        told = true;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(rpc::RpcError::Bus(crate::bus::BusError::Timeout { .. })) => {
                    return Err(ClientError::Timeout(timeout))
                }
                Err(rpc::RpcError::Bus(b)) => return Err(ClientError::Bus(b)),
                Err(other) => return Err(ClientError::Refused(other.to_string())),
            }
        }
    }

    /// The next event of this session, if one arrives within `timeout`.
    pub async fn next_event(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<TurnEvent>, ClientError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            let msg = match tokio::time::timeout(timeout, self.events.next()).await {
                Err(_) => return Ok(None),
                Ok(None) => return Err(ClientError::Closed),
                Ok(Some(m)) => m,
            };
            self.pending.extend(events_of(&msg));
        }
    }

    /// Send `text` and collect events until the turn's answer or error (or until it pauses
    /// for a confirmation), calling `on_event` for each as it arrives.
    pub async fn turn(
        &mut self,
        text: &str,
        timeout: Duration,
        on_event: impl FnMut(&TurnEvent),
    ) -> Result<TurnTrace, ClientError> {
        let accepted = self.send(text, timeout).await?;
        self.follow(accepted, None, timeout, on_event).await
    }

    /// Decide on the paused turn's high-risk call(s) and follow the turn from there.
    pub async fn confirm_and_follow(
        &mut self,
        approve: bool,
        call_id: Option<&str>,
        timeout: Duration,
        on_event: impl FnMut(&TurnEvent),
    ) -> Result<TurnTrace, ClientError> {
        let decided = self.decide(approve, call_id, None, timeout).await?;
        self.follow_decided(decided, timeout, on_event).await
    }

    /// [`SessionClient::answer`] and follow the turn from there.
    pub async fn answer_and_follow(
        &mut self,
        call_id: &str,
        content: serde_json::Value,
        timeout: Duration,
        on_event: impl FnMut(&TurnEvent),
    ) -> Result<TurnTrace, ClientError> {
        let decided = self.answer(call_id, content, timeout).await?;
        self.follow_decided(decided, timeout, on_event).await
    }

    async fn follow_decided(
        &mut self,
        decided: ConfirmationAccepted,
        timeout: Duration,
        on_event: impl FnMut(&TurnEvent),
    ) -> Result<TurnTrace, ClientError> {
        let accepted = Accepted {
            message_id: decided.turn_id.clone(),
            session: self.session.clone(),
            seq: 0,
            turn_id: Some(decided.turn_id.clone()),
        };
        self.follow(accepted, Some(decided.turn_id), timeout, on_event)
            .await
    }

    /// Collect the events of one turn: the one `accepted` started (found by its
    /// `turn.started`), or `turn_id` when already known.
    async fn follow(
        &mut self,
        accepted: Accepted,
        mut turn_id: Option<String>,
        timeout: Duration,
        mut on_event: impl FnMut(&TurnEvent),
    ) -> Result<TurnTrace, ClientError> {
        let mut trace = TurnTrace {
            accepted,
            events: Vec::new(),
            answer: None,
            error: None,
            needs_confirmation: None,
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(event) = self.next_event(left).await? else {
                return Err(ClientError::Timeout(timeout));
            };
            if let TurnEvent::TurnStarted {
                turn_id: t,
                message_id,
            } = &event
            {
                if *message_id == trace.accepted.message_id {
                    turn_id = Some(t.clone());
                }
            }
            let ours = turn_id.is_some() && event_turn(&event) == turn_id.as_deref();
            if !ours {
                continue;
            }
            on_event(&event);
            let done = match &event {
                TurnEvent::Answer { text, .. } => {
                    trace.answer = Some(text.clone());
                    true
                }
                TurnEvent::Error { message, .. } => {
                    trace.error = Some(message.clone());
                    true
                }
                TurnEvent::ConfirmationRequired {
                    call_id,
                    name,
                    message,
                    questions,
                    ..
                } => {
                    trace.needs_confirmation = Some(PendingCall {
                        call_id: call_id.clone(),
                        name: name.clone(),
                        message: message.clone(),
                        questions: questions.clone(),
                    });
                    true
                }
                _ => false,
            };
            trace.events.push(event);
            if done {
                return Ok(trace);
            }
        }
    }
}

/// The turn events a message on `hermes.out.<agent>.<session>.<reader>` carries, in order
/// (one, or several that left together); none (and a warning) when it is unreadable.
pub fn events_of(msg: &crate::bus::Message) -> Vec<TurnEvent> {
    if let Some(local) = msg.local.as_ref().map(|v| v.as_any()) {
        if let Some(env) = local.downcast_ref::<Envelope<TurnEvents>>() {
            return env.body.events.clone();
        }
        if let Some(env) = local.downcast_ref::<Envelope<TurnEvent>>() {
            return vec![env.body.clone()];
        }
    }
    match Envelope::decode_events(&msg.payload, usize::MAX) {
        Ok(env) => env.body.events,
        Err(e) => {
            tracing::warn!(error = %e, "unreadable event skipped");
            Vec::new()
        }
    }
}
