//! The session router: receives every inbound message (`hermes.in.>`, queue `session`) —
//! user messages and confirmations — checks it, and hands it to the session's actor,
//! starting (and reloading) it on demand. It also hears async jobs' final events
//! (`hermes.job.*`) and wakes the session whose turn waits on that job.
//!
//! Bad input — malformed or oversized envelopes, invalid ids, unknown agents, empty or
//! too-long texts — is answered with an error (reply and `error` event) and audited on
//! `hermes.audit.bad_input`; it never reaches a session and never stops an actor.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use bytes::Bytes;
use serde_json::json;

use super::adapter::Incoming;
use super::session::{Decide, Deliver, JobFinished, Retire, SessionActor, TurnDone};
use crate::bus::messages::{kinds, Confirmation, JobEvent, TurnEvent, UserMessage};
use crate::bus::{subjects, SharedBus};
use crate::envelope::{error_envelope, Envelope};
use crate::turn::TurnEnv;

/// A live session actor and what the router knows of its work.
struct Live {
    addr: Addr<SessionActor>,
    /// Messages delivered (or a resume started) whose turn has not reported done.
    in_flight: usize,
    last_active: Instant,
}

pub struct SessionRouter {
    env: TurnEnv,
    io: tokio::runtime::Handle,
    sessions: HashMap<(String, String), Live>,
}

impl SessionRouter {
    pub fn new(env: TurnEnv, io: tokio::runtime::Handle) -> Self {
        Self {
            env,
            io,
            sessions: HashMap::new(),
        }
    }

    /// The live actor of a session, started (and reloaded from sled) if needed.
    fn actor(&mut self, key: (String, String), ctx: &mut Context<Self>) -> &mut Live {
        let env = self.env.clone();
        let done = ctx.address().recipient();
        let live = self.sessions.entry(key.clone()).or_insert_with(|| Live {
            addr: SessionActor::new(env, key.0.clone(), key.1.clone(), done).start(),
            in_flight: 0,
            last_active: Instant::now(),
        });
        if !live.addr.connected() {
            live.addr =
                SessionActor::new(self.env.clone(), key.0, key.1, ctx.address().recipient())
                    .start();
            live.in_flight = 0;
        }
        live.last_active = Instant::now();
        live
    }

    /// Stop actors that have been idle longer than `engine.session_idle_secs`.
    fn evict_idle(&mut self) {
        let idle = Duration::from_secs(self.env.config.engine.session_idle_secs);
        self.sessions.retain(|_, live| {
            let keep = live.in_flight > 0 || live.last_active.elapsed() < idle;
            if !keep {
                live.addr.do_send(Retire);
            }
            keep
        });
    }

    fn check(&self, msg: &Incoming) -> Result<Checked, Refusal> {
        let (agent, session) = subjects::parse_inbound(&msg.subject)
            .map_err(|e| Refusal::new("invalid_subject", e.to_string(), None))?;
        let at = Some((agent.clone(), session.clone()));
        let max = self.env.config.engine.max_envelope_bytes;
        let raw = Envelope::decode(&msg.payload, max)
            .map_err(|e| Refusal::new("bad_envelope", e.to_string(), at.clone()))?;
        if raw.kind == kinds::CONFIRMATION {
            let envelope: Envelope<Confirmation> = raw
                .into_typed(kinds::CONFIRMATION)
                .map_err(|e| Refusal::new("bad_envelope", e.to_string(), at.clone()))?;
            let user = self.addressed(&envelope, &agent, &session)?;
            return Ok(Checked {
                key: (agent, session),
                user,
                inbound: Inbound::Confirmation(envelope),
            });
        }
        let envelope: Envelope<UserMessage> = raw
            .into_typed(kinds::USER_MESSAGE)
            .map_err(|e| Refusal::new("bad_envelope", e.to_string(), at.clone()))?;
        let user = self.addressed(&envelope, &agent, &session)?;
        let text = envelope.body.text.trim();
        if text.is_empty() {
            return Err(Refusal::new(
                "empty_message",
                "the message text is empty",
                at,
            ));
        }
        let chars = envelope.body.text.chars().count();
        let limit = self.env.config.engine.max_message_chars;
        if chars > limit {
            return Err(Refusal::new(
                "message_too_long",
                format!("the message has {chars} characters; the limit is {limit} (engine.max_message_chars): split it or send a reference"),
                at,
            ));
        }
        Ok(Checked {
            key: (agent, session),
            user,
            inbound: Inbound::Message(envelope),
        })
    }

    /// The envelope agrees with its subject, names a configured agent and a user (returned).
    fn addressed<B>(
        &self,
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
        self.env
            .config
            .agent(agent)
            .map_err(|e| Refusal::new("unknown_agent", e.to_string(), at.clone()))?;
        envelope.user.clone().ok_or_else(|| {
            Refusal::new(
                "missing_user",
                "the envelope has no `user`; every message must name its user",
                at,
            )
        })
    }

    /// A job's final event wakes the session whose turn waits on it (started if needed).
    fn job_event(&mut self, msg: &Incoming, ctx: &mut Context<Self>) {
        let max = self.env.config.engine.max_envelope_bytes;
        let event = match Envelope::decode(&msg.payload, max).and_then(|raw| {
            let kind = raw.kind.clone();
            raw.into_typed::<JobEvent>(&kind)
        }) {
            Ok(env) => env.body,
            Err(e) => {
                tracing::warn!(subject = %msg.subject, error = %e, "unreadable job event ignored");
                return;
            }
        };
        if !event.status.is_final() || event.turn_id.is_none() {
            return;
        }
        let (Some(agent), Some(session)) = (event.agent.clone(), event.session.clone()) else {
            return;
        };
        if self.env.config.agent(&agent).is_err() {
            return;
        }
        let live = self.actor((agent, session), ctx);
        live.in_flight += 1;
        live.addr.do_send(JobFinished { event });
    }
}

/// An inbound message that passed the checks.
struct Checked {
    key: (String, String),
    user: String,
    inbound: Inbound,
}

enum Inbound {
    Message(Envelope<UserMessage>),
    Confirmation(Envelope<Confirmation>),
}

struct Refusal {
    code: &'static str,
    message: String,
    at: Option<(String, String)>,
}

impl Refusal {
    fn new(code: &'static str, message: impl Into<String>, at: Option<(String, String)>) -> Self {
        Self {
            code,
            message: message.into(),
            at,
        }
    }
}

/// How often idle session actors are looked for.
const EVICT_EVERY: Duration = Duration::from_secs(5);

impl Actor for SessionRouter {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let idle = Duration::from_secs(self.env.config.engine.session_idle_secs);
        let every = EVICT_EVERY.min(idle / 2).max(Duration::from_millis(100));
        ctx.run_interval(every, |act, _| act.evict_idle());
        // Resume turns a crash interrupted: start those sessions' actors now.
        let store = self.env.store.clone();
        let find = tokio::task::spawn_blocking(move || store.unfinished());
        ctx.spawn(find.into_actor(self).map(|found, act, ctx| match found {
            Ok(Ok(keys)) => {
                for key in keys {
                    tracing::info!(agent = %key.0, session = %key.1, "session has an interrupted turn; resuming");
                    act.actor(key, ctx).in_flight += 1;
                }
            }
            Ok(Err(e)) => tracing::error!(error = %e, "cannot look for interrupted turns"),
            Err(e) => tracing::error!(error = %e, "interrupted-turn scan crashed"),
        }));
    }
}

/// How many session actors are in memory now.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct LiveSessions;

impl Handler<LiveSessions> for SessionRouter {
    type Result = usize;
    fn handle(&mut self, _: LiveSessions, _: &mut Self::Context) -> usize {
        self.sessions.len()
    }
}

impl Handler<TurnDone> for SessionRouter {
    type Result = ();
    fn handle(&mut self, msg: TurnDone, _: &mut Self::Context) {
        if let Some(live) = self.sessions.get_mut(&msg.key) {
            live.in_flight = live.in_flight.saturating_sub(1);
            live.last_active = Instant::now();
        }
    }
}

impl Handler<Incoming> for SessionRouter {
    type Result = Option<Bytes>;

    fn handle(&mut self, msg: Incoming, ctx: &mut Self::Context) -> Self::Result {
        if msg.subject.starts_with(subjects::JOB_PREFIX) {
            self.job_event(&msg, ctx);
            return None;
        }
        match self.check(&msg) {
            Ok(checked) => {
                let live = self.actor(checked.key, ctx);
                live.in_flight += 1;
                let (user, reply) = (checked.user, msg.reply);
                match checked.inbound {
                    Inbound::Message(envelope) => live.addr.do_send(Deliver {
                        envelope,
                        user,
                        reply,
                    }),
                    Inbound::Confirmation(envelope) => live.addr.do_send(Decide {
                        envelope,
                        user,
                        reply,
                    }),
                }
            }
            Err(refusal) => {
                tracing::warn!(subject = %msg.subject, code = refusal.code, error = %refusal.message, "inbound message refused");
                self.io.spawn(refuse(self.env.bus.clone(), msg, refusal));
            }
        }
        None
    }
}

async fn refuse(bus: SharedBus, msg: Incoming, refusal: Refusal) {
    let error = error_envelope(refusal.code, refusal.message.clone());
    if let (Some(reply), Ok(bytes)) = (&msg.reply, error.encode()) {
        let _ = bus.publish(reply, bytes).await;
    }
    if let Some((agent, session)) = &refusal.at {
        if let Ok(out) = subjects::outbound(agent, session) {
            let event = Envelope::new(
                kinds::TURN_EVENT,
                TurnEvent::Error {
                    turn_id: None,
                    code: refusal.code.into(),
                    message: refusal.message.clone(),
                },
            )
            .for_session(agent, session, None);
            if let Ok(bytes) = event.encode() {
                let _ = bus.publish(&out, bytes).await;
            }
        }
    }
    let audit = Envelope::new(
        "audit.bad_input",
        json!({"subject": msg.subject, "code": refusal.code, "message": refusal.message, "bytes": msg.payload.len()}),
    );
    if let (Ok(subject), Ok(bytes)) = (subjects::audit("bad_input"), audit.encode()) {
        let _ = bus.publish(&subject, bytes).await;
    }
}
