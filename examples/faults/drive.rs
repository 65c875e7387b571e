//! The load: sessions talking to the deployment from outside over NATS, as a publishing
//! system would. Each turn is sent as a request on `hermes.in.<agent>.<session>` (resent with
//! the same envelope id while no reply comes, so a resend is never a second message), then
//! waited for until an `answer` or an `error` names it; a turn that asks for a confirmation is
//! approved, as a user would.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes::bus::SharedBus;
use hermes::protocol::envelope::Envelope;
use hermes::protocol::{Confirmation, UserMessage};
use serde_json::Value;

use crate::observe::Observer;

pub const AGENT: &str = "assistant";
/// One try of a request on `hermes.in…`.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Tries before the driver stops resending and only waits.
const SEND_TRIES: usize = 8;
/// How long a refused turn is still watched (an earlier copy may have got in).
const AFTER_REFUSAL: Duration = Duration::from_secs(10);

/// What a turn asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `add`: a sync read tool.
    Read,
    /// `ledger__record`: an MCP write tool, deduplicated by its idempotency key.
    Write,
    /// `generate_report`: an async job that runs `seconds` and wakes the turn.
    Job { seconds: u64 },
    /// `ledger__transfer`: a high-risk MCP write the user must confirm.
    Confirm,
}

impl Kind {
    /// The load's rotation.
    pub fn of_turn(t: u32) -> Kind {
        match t % 4 {
            0 => Kind::Read,
            1 => Kind::Write,
            2 => Kind::Job { seconds: 1 },
            _ => Kind::Confirm,
        }
    }
}

/// One turn to drive.
#[derive(Debug, Clone)]
pub struct Turn {
    pub session: String,
    pub user: String,
    pub tag: String,
    pub kind: Kind,
    /// The envelope id: the stored message's id.
    pub message_id: String,
    payload: bytes::Bytes,
}

impl Turn {
    pub fn new(session: &str, t: u32, kind: Kind) -> anyhow::Result<Self> {
        let tag = format!("{session}-t{t}");
        let call = match kind {
            Kind::Read => format!("add {{\"a\": {t}, \"b\": 1000}}"),
            Kind::Write => format!("ledger__record {{\"entry\": \"{tag}\"}}"),
            Kind::Job { seconds } => {
                format!("generate_report {{\"topic\": \"{tag}\", \"seconds\": {seconds}}}")
            }
            Kind::Confirm => format!("ledger__transfer {{\"entry\": \"{tag}\"}}"),
        };
        let user = format!("u-{session}");
        let envelope = Envelope::request(UserMessage::text(format!("turn {tag}: call {call}")))
            .for_session(AGENT, session, Some(&user));
        Ok(Self {
            session: session.to_string(),
            user,
            tag,
            kind,
            message_id: envelope.id.clone(),
            payload: envelope.encode()?,
        })
    }

    /// The ledger entry a write turn records.
    pub fn entry(&self) -> Option<&str> {
        matches!(self.kind, Kind::Write | Kind::Confirm).then_some(self.tag.as_str())
    }
}

/// How a turn went, from the driver's side.
#[derive(Debug, Clone, Default)]
pub struct Driven {
    /// An `accepted` reply came.
    pub accepted: bool,
    /// An error reply came instead (its code), and no `accepted`.
    pub refused: Option<String>,
    /// The turn's id, once a `turn.started` named the message.
    pub turn_id: Option<String>,
    /// An answer or an error ended it while the driver watched.
    pub ended: bool,
    /// Confirmations sent.
    pub confirmations: usize,
    pub elapsed: Duration,
}

/// Drive one turn until it ends or `deadline`. A `Confirm` turn is approved once it asks,
/// unless `hold_confirm` is set (a cell approves it itself after its fault).
pub async fn drive(
    bus: &SharedBus,
    observer: &Observer,
    turn: &Turn,
    deadline: Instant,
    hold_confirm: Option<Arc<AtomicBool>>,
) -> Driven {
    let started = Instant::now();
    let mut driven = send(bus, turn).await;
    let mut confirmer = Confirmer::new(turn);
    let give_up = |driven: &Driven| match &driven.refused {
        Some(_) if !driven.accepted => Instant::now() >= started + AFTER_REFUSAL,
        _ => false,
    };
    while Instant::now() < deadline && !give_up(&driven) {
        let (ended, asked) = status(observer, turn, &mut driven);
        if ended {
            driven.ended = true;
            break;
        }
        let held = hold_confirm
            .as_ref()
            .is_some_and(|h| h.load(Ordering::Acquire));
        if turn.kind == Kind::Confirm && !held && confirmer.due(asked) {
            confirmer.send(bus).await;
            driven.confirmations += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    driven.elapsed = started.elapsed();
    driven
}

/// Send until a reply comes (accepted or refused) or the tries run out.
async fn send(bus: &SharedBus, turn: &Turn) -> Driven {
    let subject = format!("hermes.in.{AGENT}.{}", turn.session);
    let mut driven = Driven::default();
    for _ in 0..SEND_TRIES {
        match bus
            .request(&subject, turn.payload.clone(), SEND_TIMEOUT)
            .await
        {
            Ok(reply) => {
                let kind = serde_json::from_slice::<Value>(&reply).ok().and_then(|v| {
                    let code = v["body"]["code"].as_str().map(str::to_string);
                    Some((v["kind"].as_str()?.to_string(), code))
                });
                match kind {
                    Some((kind, _)) if kind == "accepted" => driven.accepted = true,
                    Some((_, code)) => driven.refused = code.or(Some("unreadable".into())),
                    None => driven.refused = Some("unreadable".into()),
                }
                return driven;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
    driven
}

/// (ended, asked for a confirmation) as far as the events tell.
fn status(observer: &Observer, turn: &Turn, driven: &mut Driven) -> (bool, bool) {
    let seen = observer.seen();
    if driven.turn_id.is_none() {
        driven.turn_id = seen
            .message_of
            .iter()
            .find(|(_, message)| **message == turn.message_id)
            .map(|(turn_id, _)| turn_id.clone());
    }
    let by_tag = seen.answers_by_tag.contains_key(&turn.tag);
    match &driven.turn_id {
        Some(id) => {
            let ended = seen.answers.get(id).is_some_and(|a| !a.is_empty())
                || seen.errors.get(id).is_some_and(|e| !e.is_empty())
                || by_tag;
            (ended, seen.confirmations.contains(id))
        }
        None => (by_tag, false),
    }
}

/// Sends the approval of a `Confirm` turn: when it asked, and again every few seconds while
/// it has not ended (the request may have been lost, or the turn may still wait for a
/// decision the user cannot see yet — a user would look and confirm again).
struct Confirmer {
    subject: String,
    payload: Option<bytes::Bytes>,
    first_due: Instant,
    last: Option<Instant>,
}

const CONFIRM_EVERY: Duration = Duration::from_secs(5);
/// A confirmation request the driver never saw is answered after this long anyway.
const CONFIRM_UNASKED_AFTER: Duration = Duration::from_secs(15);

impl Confirmer {
    fn new(turn: &Turn) -> Self {
        let envelope = Envelope::request(Confirmation {
            approve: true,
            call_id: None,
            content: None,
        })
        .for_session(AGENT, &turn.session, Some(&turn.user));
        Self {
            subject: format!("hermes.in.{AGENT}.{}", turn.session),
            payload: envelope.encode().ok(),
            first_due: Instant::now() + CONFIRM_UNASKED_AFTER,
            last: None,
        }
    }

    fn due(&self, asked: bool) -> bool {
        let now = Instant::now();
        match self.last {
            Some(last) => now >= last + CONFIRM_EVERY,
            None => asked || now >= self.first_due,
        }
    }

    async fn send(&mut self, bus: &SharedBus) {
        self.last = Some(Instant::now());
        if let Some(payload) = &self.payload {
            // The reply (accepted, or "nothing waits") matters less than the turn's end.
            let _ = bus
                .request(&self.subject, payload.clone(), SEND_TIMEOUT)
                .await;
        }
    }
}
