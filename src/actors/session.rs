//! The Session actor: one per live session. It owns that session's state — its metadata and
//! message log — and runs its turns one at a time (the mailbox is the per-session lock).
//!
//! A message is persisted and flushed before it is acknowledged to the publisher; on start the
//! actor reloads its log from sled, so a restarted process picks up where it was.

use std::sync::Arc;

use actix::prelude::*;
use chrono::Utc;

use crate::bus::messages::{kinds, Accepted, UserMessage};
use crate::envelope::{error_envelope, Envelope};
use crate::llm::ChatMessage;
use crate::store::sessions::{SessionMeta, StoredMessage};
use crate::turn::{self, TurnEnv, TurnInput};

pub struct SessionActor {
    env: TurnEnv,
    agent: String,
    session: String,
    meta: Option<SessionMeta>,
    history: Arc<Vec<StoredMessage>>,
}

impl SessionActor {
    pub fn new(env: TurnEnv, agent: String, session: String) -> Self {
        Self {
            env,
            agent,
            session,
            meta: None,
            history: Arc::new(Vec::new()),
        }
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let store = self.env.store.clone();
        let (agent, session) = (self.agent.clone(), self.session.clone());
        // Reading the log is blocking I/O: off the arbiter. Messages wait until it is loaded.
        let load = tokio::task::spawn_blocking(move || {
            Ok::<_, crate::store::StoreError>((
                store.meta(&agent, &session)?,
                store.messages(&agent, &session)?,
            ))
        });
        ctx.wait(load.into_actor(self).map(|result, act, ctx| match result {
            Ok(Ok((meta, messages))) => {
                act.meta = meta;
                act.history = Arc::new(messages);
            }
            Ok(Err(e)) => {
                tracing::error!(session = %act.session, error = %e, "session log could not be loaded; stopping");
                ctx.stop();
            }
            Err(e) => {
                tracing::error!(session = %act.session, error = %e, "session loader crashed; stopping");
                ctx.stop();
            }
        }));
    }
}

/// A validated user message for this session.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Deliver {
    pub envelope: Envelope<UserMessage>,
    pub user: String,
    pub reply: Option<String>,
}

impl Handler<Deliver> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: Deliver, ctx: &mut Self::Context) {
        let env = self.env.clone();
        let history = self.history.clone();
        let mut meta = self.meta.take().unwrap_or_else(|| SessionMeta {
            agent: self.agent.clone(),
            session: self.session.clone(),
            user: msg.user.clone(),
            created_at: Utc::now(),
            updated_at: Utc::now(),
            next_seq: 0,
        });
        let fut = async move {
            if meta.user != msg.user {
                let text = format!(
                    "session `{}` belongs to another user; start a new session id",
                    meta.session
                );
                reply(
                    &env,
                    msg.reply.as_deref(),
                    &error_envelope("wrong_user", text),
                )
                .await;
                return (meta, Vec::new());
            }
            let turn_id = uuid::Uuid::now_v7().to_string();
            let mut stored = turn::new_stored(
                &env.tokens,
                meta.next_seq,
                &turn_id,
                ChatMessage::user(msg.envelope.body.text.clone()),
                msg.envelope.ts,
            );
            stored.id = msg.envelope.id.clone();
            if let Err(e) = env
                .store
                .append(&mut meta, std::slice::from_ref(&stored))
                .await
            {
                tracing::error!(session = %meta.session, error = %e, "message not persisted; refused");
                let err = error_envelope("store_failed", format!("message not stored: {e}"));
                reply(&env, msg.reply.as_deref(), &err).await;
                return (meta, Vec::new());
            }
            let accepted = Envelope::new(
                kinds::ACCEPTED,
                Accepted {
                    message_id: stored.id.clone(),
                    session: meta.session.clone(),
                    seq: stored.seq,
                },
            )
            .in_trace(&msg.envelope.trace_id);
            reply(&env, msg.reply.as_deref(), &accepted).await;
            let input = TurnInput {
                turn_id,
                trace_id: msg.envelope.trace_id.clone(),
                message: stored.clone(),
            };
            let outcome = turn::run_turn(&env, &mut meta, history, input).await;
            let mut added = vec![stored];
            added.extend(outcome.messages);
            (meta, added)
        };
        // `wait`: the next message of this session starts only after this turn ends.
        ctx.wait(fut.into_actor(self).map(|(meta, added), act, _| {
            act.meta = Some(meta);
            Arc::make_mut(&mut act.history).extend(added);
        }));
    }
}

async fn reply<B: serde::Serialize>(env: &TurnEnv, to: Option<&str>, envelope: &Envelope<B>) {
    let Some(to) = to else { return };
    if let Err(e) = crate::bus::rpc::publish(env.bus.as_ref(), to, envelope).await {
        tracing::warn!(error = %e, "reply to publisher failed");
    }
}
