//! The Session actor: one per live session. It owns that session's state — metadata, message
//! log and task state — and runs its turns one at a time (the mailbox is the per-session lock).
//!
//! A message is persisted and flushed before it is acknowledged to the publisher; on start the
//! actor reloads its log from sled and resumes a turn a crash interrupted.

use std::sync::Arc;

use actix::prelude::*;
use chrono::Utc;

use super::router::SessionRouter;
use crate::llm::ChatMessage;
use crate::protocol::envelope::{error_envelope, Envelope};
use crate::protocol::{kinds, Accepted, Confirmation, ConfirmationAccepted, JobEvent, UserMessage};
use crate::store::sessions::{SessionMeta, StoredMessage};
use crate::store::tasks::{Decision, TaskState, TurnPhase, TurnRecord};
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
pub struct Deliver {
    pub envelope: Envelope<UserMessage>,
    pub user: String,
    pub reply: Option<String>,
}

/// The user's decision on the high-risk call(s) the session's turn waits on.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Decide {
    pub envelope: Envelope<Confirmation>,
    pub user: String,
    pub reply: Option<String>,
}

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
            let reply_to = msg.reply;
            let router = self.router.clone();
            let key = self.key();
            ctx.wait(
                async move {
                    let err = error_envelope("unknown_session", text);
                    reply(&env, reply_to.as_deref(), &err).await;
                    router.done(&key);
                }
                .into_actor(self),
            );
            return;
        };
        let env = self.env.clone();
        let mut task = std::mem::take(&mut self.task);
        let fut = async move {
            let decided = decide(&env, &mut meta, &mut task, &msg).await;
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

/// Record the user's decision on the turn's undecided high-risk calls, flushed before it is
/// acknowledged. Returns whether the turn can go on.
async fn decide(env: &TurnEnv, meta: &mut SessionMeta, task: &mut TaskState, msg: &Decide) -> bool {
    let to = msg.reply.as_deref();
    if meta.user != msg.user {
        let text = format!(
            "session `{}` belongs to another user; only its user can confirm its calls",
            meta.session
        );
        reply(env, to, &error_envelope("wrong_user", text)).await;
        return false;
    }
    let wanted = msg.envelope.body.call_id.as_deref();
    let Some(turn) = task.unfinished_turn_mut() else {
        let text = format!(
            "session `{}` has no turn waiting for a confirmation",
            meta.session
        );
        reply(env, to, &error_envelope("nothing_to_confirm", text)).await;
        return false;
    };
    let undecided: Vec<String> = turn.undecided().map(|c| c.call_id.clone()).collect();
    let chosen: Vec<String> = undecided
        .iter()
        .filter(|id| wanted.is_none_or(|w| w == id.as_str()))
        .cloned()
        .collect();
    if chosen.is_empty() {
        let text = match wanted {
            Some(w) if !undecided.is_empty() => format!(
                "no call `{w}` waits for a confirmation; waiting: {}",
                undecided.join(", ")
            ),
            _ => format!(
                "session `{}` has no call waiting for a confirmation",
                meta.session
            ),
        };
        reply(env, to, &error_envelope("nothing_to_confirm", text)).await;
        return false;
    }
    let approve = msg.envelope.body.approve;
    let decision = if approve {
        Decision::Approved
    } else {
        Decision::Denied
    };
    for c in turn.confirmations.iter_mut() {
        if chosen.contains(&c.call_id) {
            c.decision = Some(decision);
        }
    }
    turn.updated_at = Utc::now();
    let turn_id = turn.turn_id.clone();
    let saved = match env.store.save(meta, &[], task).await {
        Ok(()) => env.store.commit().await,
        Err(e) => Err(e),
    };
    if let Err(e) = saved {
        tracing::error!(session = %meta.session, error = %e, "decision not persisted; refused");
        if let Some(turn) = task.unfinished_turn_mut() {
            for c in turn.confirmations.iter_mut() {
                if chosen.contains(&c.call_id) {
                    c.decision = None;
                }
            }
        }
        let err = error_envelope(
            "store_failed",
            format!("decision not stored: {e}; send it again"),
        );
        reply(env, to, &err).await;
        return false;
    }
    let accepted = Envelope::new(
        kinds::CONFIRMATION_ACCEPTED,
        ConfirmationAccepted {
            turn_id,
            call_ids: chosen,
            approve,
        },
    )
    .in_trace(&msg.envelope.trace_id);
    reply(env, to, &accepted).await;
    true
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
        // One turn at a time: a new message never interleaves with a paused turn.
        let (code, text) = busy(t);
        reply(env, msg.reply.as_deref(), &error_envelope(code, text)).await;
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
    task.turn = Some(TurnRecord::received(
        turn_id,
        stored.id.clone(),
        msg.envelope.trace_id.clone(),
    ));
    let saved = match env
        .store
        .save(meta, std::slice::from_ref(&stored), task)
        .await
    {
        Ok(()) => env.store.commit().await,
        Err(e) => Err(e),
    };
    if let Err(e) = saved {
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

/// Why a new message cannot start a turn now, and what to do.
fn busy(t: &TurnRecord) -> (&'static str, String) {
    match t.phase {
        TurnPhase::WaitingUser => {
            let calls: Vec<String> = t
                .undecided()
                .map(|c| format!("`{}` (call {})", c.tool, c.call_id))
                .collect();
            (
                "awaiting_confirmation",
                format!(
                    "turn {} waits for your decision on {}; answer with `hermes send --confirm` \
                     or `--deny` (a `user.confirmation` message) before sending a new one",
                    t.turn_id,
                    calls.join(", ")
                ),
            )
        }
        TurnPhase::WaitingJob => {
            let jobs: Vec<String> = t
                .unfinished_jobs()
                .map(|j| format!("`{}` (job {})", j.tool, j.job_id))
                .collect();
            (
                "awaiting_job",
                format!(
                    "turn {} waits for {}; it goes on by itself when the job finishes — send \
                     the new message after its answer",
                    t.turn_id,
                    jobs.join(", ")
                ),
            )
        }
        phase => (
            "busy",
            format!("turn {} is still in progress ({phase:?})", t.turn_id),
        ),
    }
}

async fn reply<B: serde::Serialize>(env: &TurnEnv, to: Option<&str>, envelope: &Envelope<B>) {
    let Some(to) = to else { return };
    if let Err(e) = crate::bus::rpc::publish(env.bus.as_ref(), to, envelope).await {
        tracing::warn!(error = %e, "reply to publisher failed");
    }
}
