//! The Session actor: one per live session. It owns that session's state — metadata, message
//! log and task state — and runs its turns one at a time (the mailbox is the per-session lock).
//!
//! A message is persisted and flushed before it is acknowledged to the publisher; on start the
//! actor reloads its log from sled and resumes a turn a crash interrupted.

use std::sync::Arc;

use actix::prelude::*;
use chrono::Utc;

use super::router::SessionRouter;
use crate::protocol::envelope::error_envelope;
use crate::protocol::{Confirmation, JobEvent, UserMessage};
use crate::store::sessions::{SessionMeta, StoredMessage};
use crate::store::tasks::TaskState;
use crate::turn::inbound::{self, Inbound};
use crate::turn::{self, TurnEnv};

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
    router: SessionRouter,
}

impl SessionActor {
    pub fn new(env: TurnEnv, agent: String, session: String, router: SessionRouter) -> Self {
        Self {
            env,
            agent,
            session,
            meta: None,
            task: TaskState::default(),
            history: Arc::new(Vec::new()),
            router,
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
            act.router.done(&act.key());
        }));
    }
}

impl SessionActor {
    /// Queue the extraction of an answered turn that a crash cut off before it was queued.
    fn queue_extraction(&mut self, ctx: &mut Context<Self>) {
        let Some(mut meta) = self.meta.take() else {
            return;
        };
        let env = self.env.clone();
        let mut task = std::mem::take(&mut self.task);
        let history = self.history.clone();
        let fut = async move {
            if let Err(e) = turn::queue_extraction(&env, &mut meta, &mut task, &history).await {
                tracing::error!(session = %meta.session, error = %e, "interrupted extraction not queued");
            }
            (meta, task)
        };
        ctx.wait(fut.into_actor(self).map(|(meta, task), act, _| {
            act.meta = Some(meta);
            act.task = task;
            act.router.done(&act.key());
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
                if let Some(t) = act.task.resumable_turn() {
                    tracing::info!(session = %act.session, turn = %t.turn_id, phase = ?t.phase, "resuming an interrupted turn");
                    act.run(ctx);
                } else if act.task.pending_extraction().is_some() {
                    act.queue_extraction(ctx);
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
pub struct Deliver(pub Inbound<UserMessage>);

/// The user's decision on the high-risk call(s) the session's turn waits on.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Decide(pub Inbound<Confirmation>);

/// The final event of an async job a call of this session submitted.
#[derive(Message)]
#[rtype(result = "()")]
pub struct JobFinished {
    pub event: JobEvent,
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
            user: msg.0.user.clone(),
            created_at: Utc::now(),
            updated_at: Utc::now(),
            next_seq: 0,
        });
        let mut task = std::mem::take(&mut self.task);
        let fut = async move {
            let accepted = inbound::accept(&env, &mut meta, &mut task, &msg.0).await;
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
                        None => act.router.done(&act.key()),
                    }
                }),
        );
    }
}

impl Handler<Decide> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: Decide, ctx: &mut Self::Context) {
        let Some(mut meta) = self.meta.take() else {
            let env = self.env.clone();
            let text = format!(
                "session `{}` does not exist, so nothing waits for a confirmation",
                self.session
            );
            let reply_to = msg.0.reply;
            let router = self.router.clone();
            let key = self.key();
            ctx.wait(
                async move {
                    let err = error_envelope("unknown_session", text);
                    inbound::reply(&env, reply_to.as_deref(), &err).await;
                    router.done(&key);
                }
                .into_actor(self),
            );
            return;
        };
        let env = self.env.clone();
        let mut task = std::mem::take(&mut self.task);
        let fut = async move {
            let decided = inbound::decide(&env, &mut meta, &mut task, &msg.0).await;
            (meta, task, decided)
        };
        ctx.wait(fut.into_actor(self).map(|(meta, task, decided), act, ctx| {
            act.meta = Some(meta);
            act.task = task;
            if decided {
                act.run(ctx);
            } else {
                act.router.done(&act.key());
            }
        }));
    }
}

impl Handler<JobFinished> for SessionActor {
    type Result = ();

    /// Record the job's result in the waiting turn and let the turn go on. The result is
    /// stored with the turn's next write; a crash before that is covered by the turn asking
    /// the executor for the job's state when it resumes.
    fn handle(&mut self, msg: JobFinished, ctx: &mut Self::Context) {
        let awaited = self.task.unfinished_turn_mut().and_then(|t| {
            t.jobs
                .iter_mut()
                .find(|j| j.result.is_none() && j.job_id == msg.event.job_id)
        });
        let Some(job) = awaited else {
            self.router.done(&self.key());
            return;
        };
        match turn::finished_by(job, &msg.event) {
            Some(result) => {
                tracing::info!(session = %self.session, job = %job.job_id, "job finished; the waiting turn goes on");
                job.result = Some((&result).into());
                self.run(ctx);
            }
            None => self.router.done(&self.key()),
        }
    }
}
