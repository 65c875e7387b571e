//! A session as seen from outside: send a message (or a decision, or a cancel) to
//! `hermes.in.<agent>.<session>[.<publisher>]` and follow the turn's events on
//! `hermes.out.<agent>.<session>.<reader>`, as a typed stream or collected into a
//! [`TurnTrace`].

use std::collections::VecDeque;
use std::time::Duration;

use futures::{Stream, StreamExt};
use hermes_protocol::envelope::Envelope;
use hermes_protocol::request::Request;
use hermes_protocol::subjects;
use hermes_protocol::{
    Accepted, Cancel, CancelAccepted, Confirmation, ConfirmationAccepted, TurnEvent, UserMessage,
};

use crate::transport::{Inbox, TransportError};
use crate::{ClientError, Hermes};

/// How long a request waits for a session service to appear on the bus.
const SERVICE_GRACE: Duration = Duration::from_secs(15);

/// Largest event accepted.
const MAX_EVENT_BYTES: usize = 64 * 1024 * 1024;

/// One conversation: an agent's session, as one user.
pub struct SessionClient {
    hermes: Hermes,
    agent: String,
    session: String,
    user: String,
    events: Inbox,
    /// Events that arrived together with the one last returned, not yet read.
    pending: VecDeque<TurnEvent>,
}

/// How a followed turn ended — with an answer, an error, or paused for a confirmation.
#[derive(Debug, Clone)]
pub struct TurnTrace {
    /// The message that started the turn (a confirmation resumes a turn: then it is the
    /// turn's id with `seq` 0).
    pub accepted: Accepted,
    pub events: Vec<TurnEvent>,
    pub answer: Option<String>,
    pub error: Option<String>,
    /// The turn waits for the user to confirm this call (`confirmation.required`); decide
    /// with [`SessionClient::confirm`].
    pub needs_confirmation: Option<PendingCall>,
}

/// A high-risk call a paused turn waits on.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    pub call_id: String,
    pub name: String,
    pub message: String,
    /// What the call's MCP server asks the user (empty for a high-risk call's confirmation):
    /// answer with [`SessionClient::answer`].
    pub questions: Vec<hermes_protocol::McpQuestion>,
}

impl Hermes {
    /// A conversation with `agent` in `session` as `user`, already subscribed to its events
    /// (before anything is sent, so none is missed).
    pub async fn session(
        &self,
        agent: &str,
        session: &str,
        user: &str,
    ) -> Result<SessionClient, ClientError> {
        subjects::check_id("user", user)?;
        let pattern = match &self.reader {
            Some(reader) => subjects::outbound(agent, session, reader)?,
            None => subjects::outbound_any_reader(agent, session)?,
        };
        let events = self.transport.subscribe(&pattern, None).await?;
        // The subscription must reach the server before the message that starts the turn.
        self.transport.flush().await?;
        Ok(SessionClient {
            hermes: self.clone(),
            agent: agent.into(),
            session: session.into(),
            user: user.into(),
            events,
            pending: VecDeque::new(),
        })
    }
}

impl SessionClient {
    /// Send `text`; returns once the session has persisted it.
    pub async fn send(&mut self, text: &str, timeout: Duration) -> Result<Accepted, ClientError> {
        self.request(UserMessage::text(text), timeout).await
    }

    /// Approve (or decline) the high-risk call the session's turn waits on — `call_id`, or
    /// every undecided call when `None`; returns once the decision is persisted.
    pub async fn confirm(
        &mut self,
        approve: bool,
        call_id: Option<&str>,
        timeout: Duration,
    ) -> Result<ConfirmationAccepted, ClientError> {
        let body = Confirmation {
            approve,
            call_id: call_id.map(str::to_string),
            content: None,
        };
        self.request(body, timeout).await
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
        let body = Confirmation {
            approve: true,
            call_id: Some(call_id.to_string()),
            content: Some(content),
        };
        self.request(body, timeout).await
    }

    /// Cancel the session's turn in progress and the turns it delegated; `reason` is what
    /// the turn's `error` event says.
    pub async fn cancel(
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
            match self.hermes.request(env.clone(), timeout).await {
                Ok(reply) => return Ok(reply.body),
                Err(ClientError::Transport(TransportError::NoResponders { subject }))
                    if tokio::time::Instant::now() < grace =>
                {
                    if !told {
                        tracing::info!(%subject, "no session service yet; waiting");
                        told = true;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(ClientError::Transport(TransportError::Timeout { .. })) => {
                    return Err(ClientError::Timeout(timeout))
                }
                Err(other) => return Err(other),
            }
        }
    }

    /// The next event of this session (any turn), if one arrives within `timeout`.
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
            // One event, or several of a turn that left together (`turn.events`).
            match Envelope::decode_events(&msg.payload, MAX_EVENT_BYTES) {
                Ok(env) => self.pending.extend(env.body.events),
                Err(e) => {
                    tracing::warn!(error = %e, subject = %msg.subject, "unreadable event skipped")
                }
            }
        }
    }

    /// The events of the turn `accepted` started (found by its `turn.started`), or of
    /// `turn_id` when already known, as they arrive; the stream ends after the turn's
    /// `answer`, its `error`, or a `confirmation.required` it pauses on. An item is an error
    /// when nothing arrives before `timeout` (counted from the call) or the bus closes.
    pub fn follow(
        &mut self,
        accepted: &Accepted,
        turn_id: Option<String>,
        timeout: Duration,
    ) -> impl Stream<Item = Result<TurnEvent, ClientError>> + '_ {
        let message_id = accepted.message_id.clone();
        let deadline = tokio::time::Instant::now() + timeout;
        let state = (self, turn_id, false);
        futures::stream::unfold(state, move |(client, mut turn_id, done)| {
            let message_id = message_id.clone();
            async move {
                if done {
                    return None;
                }
                loop {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    let event = match client.next_event(left).await {
                        Ok(Some(event)) => event,
                        Ok(None) => {
                            return Some((
                                Err(ClientError::Timeout(timeout)),
                                (client, turn_id, true),
                            ))
                        }
                        Err(e) => return Some((Err(e), (client, turn_id, true))),
                    };
                    if let TurnEvent::TurnStarted {
                        turn_id: started,
                        message_id: of,
                    } = &event
                    {
                        if *of == message_id {
                            turn_id = Some(started.clone());
                        }
                    }
                    if turn_id.is_none() || event_turn(&event) != turn_id.as_deref() {
                        continue;
                    }
                    let last = matches!(
                        event,
                        TurnEvent::Answer { .. }
                            | TurnEvent::Error { .. }
                            | TurnEvent::ConfirmationRequired { .. }
                    );
                    return Some((Ok(event), (client, turn_id, last)));
                }
            }
        })
    }

    /// Send `text` and collect the turn's events until its answer or error (or until it
    /// pauses for a confirmation), calling `on_event` for each as it arrives.
    pub async fn turn(
        &mut self,
        text: &str,
        timeout: Duration,
        on_event: impl FnMut(&TurnEvent),
    ) -> Result<TurnTrace, ClientError> {
        let accepted = self.send(text, timeout).await?;
        self.collect(accepted, None, timeout, on_event).await
    }

    /// Decide on the paused turn's high-risk call(s) and follow the turn from there.
    pub async fn confirm_and_follow(
        &mut self,
        approve: bool,
        call_id: Option<&str>,
        timeout: Duration,
        on_event: impl FnMut(&TurnEvent),
    ) -> Result<TurnTrace, ClientError> {
        let decided = self.confirm(approve, call_id, timeout).await?;
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
        self.collect(accepted, Some(decided.turn_id), timeout, on_event)
            .await
    }

    async fn collect(
        &mut self,
        accepted: Accepted,
        turn_id: Option<String>,
        timeout: Duration,
        mut on_event: impl FnMut(&TurnEvent),
    ) -> Result<TurnTrace, ClientError> {
        let mut trace = TurnTrace {
            accepted: accepted.clone(),
            events: Vec::new(),
            answer: None,
            error: None,
            needs_confirmation: None,
        };
        let events = self.follow(&accepted, turn_id, timeout);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            let event = event?;
            on_event(&event);
            match &event {
                TurnEvent::Answer { text, .. } => trace.answer = Some(text.clone()),
                TurnEvent::Error { message, .. } => trace.error = Some(message.clone()),
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
                    })
                }
                _ => {}
            }
            trace.events.push(event);
        }
        Ok(trace)
    }
}

/// The turn an event belongs to ([`TurnEvent::turn_id`]).
pub fn event_turn(event: &TurnEvent) -> Option<&str> {
    event.turn_id()
}
