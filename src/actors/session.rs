//! The Session actor: one per live session. It owns that session's state — metadata, message
//! log and task state — and runs its turns one at a time (the mailbox is the per-session lock).
//!
//! A message is persisted and flushed before it is acknowledged to the publisher; on start the
//! actor reloads its log from sled and resumes a turn a crash interrupted.

use std::sync::Arc;

use actix::prelude::*;
use chrono::Utc;

use crate::bus::messages::{kinds, Accepted, UserMessage};
use crate::envelope::{error_envelope, Envelope};
use crate::llm::ChatMessage;
use crate::store::sessions::{SessionMeta, StoredMessage};
use crate::store::tasks::{TaskState, TurnPhase, TurnRecord};
use crate::turn::{self, TurnEnv};

/// Sent to the router after every turn (and after a resume), so it knows the actor is idle.
#[derive(Message)]
#[rtype(result = "()")]
pub struct TurnDone {
    pub key: (String, String),
}

/// Tells an idle actor to stop (the router no longer routes to it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Retire;

pub struct SessionActor {
    env: TurnEnv,
    agent: String,
    session: String,
    meta: Option<SessionMeta>,
    task: TaskState,
    history: Arc<Vec<StoredMessage>>,
    done: Recipient<TurnDone>,
}

impl SessionActor {
    pub fn new(env: TurnEnv, agent: String, session: String, done: Recipient<TurnDone>) -> Self {
        Self {
            env,
            agent,
            session,
            meta: None,
            task: TaskState::default(),
            history: Arc::new(Vec::new()),
            done,
        }
    }

    fn key(&self) -> (String, String) {
        (self.agent.clone(), self.session.clone())
    }

    /// Run the turn in progress; the mailbox waits until it ends.
    fn run(&mut self, ctx: &mut Context<Self>) {
        let Some(mut meta) = self.meta.take() else {
            return;
        };
        let env = self.env.clone();
        let mut task = std::mem::take(&mut self.task);
        let history = self.history.clone();
        let fut = async move {
            let outcome = turn::run_turn(&env, &mut meta, &mut task, history).await;
            (meta, task, outcome.messages)
        };
        ctx.wait(fut.into_actor(self).map(|(meta, task, added), act, _| {
            act.meta = Some(meta);
            act.task = task;
            Arc::make_mut(&mut act.history).extend(added);
            act.done.do_send(TurnDone { key: act.key() });
        }));
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let store = self.env.store.clone();
        let (agent, session) = (self.agent.clone(), self.session.clone());
        // Reading the log is blocking I/O: off the arbiter. Messages wait until it is loaded.
        let load = tokio::task::spawn_blocking(move || store.load(&agent, &session));
        ctx.wait(load.into_actor(self).map(|result, act, ctx| match result {
            Ok(Ok((meta, messages, task))) => {
                act.meta = meta;
                act.history = Arc::new(messages);
                act.task = task;
                if let Some(t) = act.task.unfinished_turn() {
                    tracing::info!(session = %act.session, turn = %t.turn_id, phase = ?t.phase, "resuming an interrupted turn");
                    act.run(ctx);
                }
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

impl Handler<Retire> for SessionActor {
    type Result = ();
    fn handle(&mut self, _: Retire, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl Handler<Deliver> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: Deliver, ctx: &mut Self::Context) {
        let env = self.env.clone();
        let mut meta = self.meta.take().unwrap_or_else(|| SessionMeta {
            agent: self.agent.clone(),
            session: self.session.clone(),
            user: msg.user.clone(),
            created_at: Utc::now(),
            updated_at: Utc::now(),
            next_seq: 0,
        });
        let mut task = std::mem::take(&mut self.task);
        let fut = async move {
            let accepted = accept(&env, &mut meta, &mut task, &msg).await;
            (meta, task, accepted)
        };
        // `wait`: the next message of this session starts only after this one is handled.
        ctx.wait(
            fut.into_actor(self)
                .map(|(meta, task, accepted), act, ctx| {
                    act.meta = Some(meta);
                    act.task = task;
                    match accepted {
                        Some(stored) => {
                            Arc::make_mut(&mut act.history).push(stored);
                            act.run(ctx);
                        }
                        None => act.done.do_send(TurnDone { key: act.key() }),
                    }
                }),
        );
    }
}

/// Persist the user message with a new turn in state `received`, then acknowledge it.
async fn accept(
    env: &TurnEnv,
    meta: &mut SessionMeta,
    task: &mut TaskState,
    msg: &Deliver,
) -> Option<StoredMessage> {
    if meta.user != msg.user {
        let text = format!(
            "session `{}` belongs to another user; start a new session id",
            meta.session
        );
        reply(
            env,
            msg.reply.as_deref(),
            &error_envelope("wrong_user", text),
        )
        .await;
        return None;
    }
    if let Some(t) = task.unfinished_turn() {
        // Cannot happen while the mailbox serialises turns; refuse rather than interleave.
        let text = format!("turn {} is still in progress ({:?})", t.turn_id, t.phase);
        reply(env, msg.reply.as_deref(), &error_envelope("busy", text)).await;
        return None;
    }
    let text = msg.envelope.body.text.clone();
    let turn_id = uuid::Uuid::now_v7().to_string();
    let mut stored = turn::new_stored(
        &env.tokens,
        meta.next_seq,
        &turn_id,
        ChatMessage::user(text.clone()),
        msg.envelope.ts,
    );
    stored.id = msg.envelope.id.clone();
    let explicit_goal = text.strip_prefix("/goal ").map(str::trim);
    if explicit_goal.is_some() || task.goal.is_none() {
        let goal = explicit_goal.unwrap_or(&text).to_string();
        task.goal_tokens = turn::goal_tokens(&env.tokens, &goal);
        task.goal = Some(goal);
    }
    task.turn = Some(TurnRecord {
        turn_id,
        message_id: stored.id.clone(),
        trace_id: msg.envelope.trace_id.clone(),
        phase: TurnPhase::Received,
        step: 0,
        updated_at: Utc::now(),
        error: None,
    });
    if let Err(e) = env
        .store
        .save(meta, std::slice::from_ref(&stored), task)
        .await
    {
        tracing::error!(session = %meta.session, error = %e, "message not persisted; refused");
        task.turn = None;
        let err = error_envelope("store_failed", format!("message not stored: {e}"));
        reply(env, msg.reply.as_deref(), &err).await;
        return None;
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
    reply(env, msg.reply.as_deref(), &accepted).await;
    Some(stored)
}

async fn reply<B: serde::Serialize>(env: &TurnEnv, to: Option<&str>, envelope: &Envelope<B>) {
    let Some(to) = to else { return };
    if let Err(e) = crate::bus::rpc::publish(env.bus.as_ref(), to, envelope).await {
        tracing::warn!(error = %e, "reply to publisher failed");
    }
}
