//! The router's checks of what arrives on `hermes.in.<agent>.<session>`: the subject, the
//! envelope, its kind (a user message, a confirmation or a cancel), its address, its user and
//! its text. A refusal is answered with an `error` (reply and event) and audited on
//! `hermes.audit.bad_input`; it never reaches a session.

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::SessionKey;
use crate::bus::events::{self, EventScope};
use crate::bus::{Message as BusMessage, SharedBus};
use crate::config::Config;
use crate::protocol::envelope::{error_envelope, Envelope};
use crate::protocol::subjects;
use crate::protocol::{kinds, Cancel, Confirmation, TurnEvent, UserMessage};

/// Check a message on `hermes.in.<agent>.<session>[.<publisher>]`, its user against its
/// publisher's included ([`super::binding`]).
pub(super) fn check(config: &Config, msg: &BusMessage) -> Result<Checked, Refusal> {
    let subjects::InboundAddress {
        agent,
        session,
        publisher,
    } = subjects::parse_inbound_address(&msg.subject)
        .map_err(|e| Refusal::new("invalid_subject", e.to_string(), None))?;
    let raw = Envelope::decode(&msg.payload, config.engine.max_envelope_bytes).map_err(|e| {
        Refusal::new(
            "bad_envelope",
            e.to_string(),
            Some((agent.clone(), session.clone())),
        )
    })?;
    let checked = check_envelope(config, agent, session, raw)?;
    super::binding::check(&config.bus, &msg.subject, publisher.as_deref(), &checked)?;
    Ok(checked)
}

/// [`check`] for an envelope already decoded, addressed to `agent`/`session`.
pub(super) fn check_envelope(
    config: &Config,
    agent: String,
    session: String,
    raw: Envelope<serde_json::Value>,
) -> Result<Checked, Refusal> {
    let at = Some((agent.clone(), session.clone()));
    let arrival = match raw.kind.as_str() {
        kinds::CANCEL => Arrival::Cancel(typed(raw, kinds::CANCEL, &at)?),
        kinds::CONFIRMATION => Arrival::Confirmation(typed(raw, kinds::CONFIRMATION, &at)?),
        _ => Arrival::Message(typed(raw, kinds::USER_MESSAGE, &at)?),
    };
    let user = match &arrival {
        Arrival::Message(e) => addressed(config, e, &agent, &session)?,
        Arrival::Confirmation(e) => addressed(config, e, &agent, &session)?,
        Arrival::Cancel(e) => addressed(config, e, &agent, &session)?,
    };
    if let Arrival::Message(e) = &arrival {
        check_text(config, &e.body.text, &at)?;
    }
    Ok(Checked {
        key: (agent, session),
        user,
        arrival,
    })
}

fn typed<B: DeserializeOwned>(
    raw: Envelope<serde_json::Value>,
    kind: &str,
    at: &Option<SessionKey>,
) -> Result<Envelope<B>, Refusal> {
    raw.into_typed(kind)
        .map_err(|e| Refusal::new("bad_envelope", e.to_string(), at.clone()))
}

/// A message's text is neither empty nor over `engine.max_message_chars`.
fn check_text(config: &Config, text: &str, at: &Option<SessionKey>) -> Result<(), Refusal> {
    if text.trim().is_empty() {
        return Err(Refusal::new(
            "empty_message",
            "the message text is empty",
            at.clone(),
        ));
    }
    let chars = text.chars().count();
    let limit = config.engine.max_message_chars;
    if chars > limit {
        return Err(Refusal::new(
            "message_too_long",
            format!("the message has {chars} characters; the limit is {limit} (engine.max_message_chars): split it or send a reference"),
            at.clone(),
        ));
    }
    Ok(())
}

/// The envelope agrees with its subject, names a configured agent and a user (returned).
fn addressed<B>(
    config: &Config,
    envelope: &Envelope<B>,
    agent: &str,
    session: &str,
) -> Result<String, Refusal> {
    let at = Some((agent.to_string(), session.to_string()));
    if envelope.agent.as_deref().is_some_and(|a| a != agent)
        || envelope.session.as_deref().is_some_and(|s| s != session)
    {
        return Err(Refusal::new(
            "address_mismatch",
            "the envelope's agent/session differ from the subject's; send to hermes.in.<agent>.<session> of the envelope",
            at,
        ));
    }
    let configured = config
        .agent(agent)
        .map_err(|e| Refusal::new("unknown_agent", e.to_string(), at.clone()))?;
    if configured.is_remote() {
        return Err(Refusal::new(
            "remote_agent",
            format!(
                "agent `{agent}` lives elsewhere and is reached over A2A (agents.{agent}.a2a.\
                 card_url); talk to it there, or delegate to it from a local agent"
            ),
            at,
        ));
    }
    envelope.user.clone().ok_or_else(|| {
        Refusal::new(
            "missing_user",
            "the envelope has no `user`; every message must name its user",
            at,
        )
    })
}

/// An inbound message that passed the checks.
pub(super) struct Checked {
    pub key: SessionKey,
    pub user: String,
    pub arrival: Arrival,
}

pub(super) enum Arrival {
    Message(Envelope<UserMessage>),
    Confirmation(Envelope<Confirmation>),
    Cancel(Envelope<Cancel>),
}

impl Checked {
    pub(super) fn envelope_id(&self) -> &str {
        match &self.arrival {
            Arrival::Message(e) => &e.id,
            Arrival::Confirmation(e) => &e.id,
            Arrival::Cancel(e) => &e.id,
        }
    }
}

pub(super) struct Refusal {
    pub code: &'static str,
    pub message: String,
    pub at: Option<SessionKey>,
    /// The `<kind>` of the `hermes.audit.<kind>` record: `bad_input` unless said otherwise.
    pub audit: &'static str,
    /// Who sent it and as whom, when the refusal is about that (the audit record says so).
    pub sender: Option<Box<Sender>>,
}

/// The publisher a refused message came from and the user it claimed.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Sender {
    pub publisher: Option<String>,
    pub user: String,
}

impl Refusal {
    pub(super) fn new(
        code: &'static str,
        message: impl Into<String>,
        at: Option<SessionKey>,
    ) -> Self {
        Self {
            code,
            message: message.into(),
            at,
            audit: subjects::audit_kinds::BAD_INPUT,
            sender: None,
        }
    }
}

/// Publish the refusal as an `error` event of the session and an audit event; the error
/// envelope returned is the reply.
pub(super) async fn refuse(bus: &SharedBus, msg: &BusMessage, refusal: &Refusal) -> Option<Bytes> {
    if let Some((agent, session)) = &refusal.at {
        let scope = EventScope {
            agent: agent.clone(),
            session: session.clone(),
            user: None,
            trace_id: uuid::Uuid::now_v7().to_string(),
            // The sender the subject names may read why it was refused; nobody else.
            reader: subjects::parse_inbound_address(&msg.subject)
                .ok()
                .and_then(|a| a.publisher)
                .unwrap_or_else(|| subjects::NO_READER.to_string()),
        };
        let event = TurnEvent::Error {
            turn_id: None,
            code: refusal.code.into(),
            message: refusal.message.clone(),
        };
        events::publish(bus.as_ref(), &scope, event).await;
    }
    let mut record = json!({"subject": msg.subject, "code": refusal.code, "message": refusal.message, "bytes": msg.payload.len()});
    if let Some(sender) = &refusal.sender {
        record["publisher"] = json!(sender.publisher);
        record["user"] = json!(sender.user);
    }
    let audit = Envelope::new(format!("audit.{}", refusal.audit), record);
    if let (Ok(subject), Ok(bytes)) = (subjects::audit(refusal.audit), audit.encode()) {
        let _ = bus.publish(&subject, bytes).await;
    }
    error_envelope(refusal.code, refusal.message.clone())
        .encode()
        .ok()
}
