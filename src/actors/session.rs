//! The Session actor: one per live session. It owns that session's state — metadata, message
//! log and task state — and runs its turns one at a time (the mailbox is the per-session lock).
//!
//! A message is persisted and flushed before it is acknowledged to the publisher; on start the
//! actor reloads its log (from sled, brought up to date from the replicated session log on
//! NATS) and resumes a turn a crash interrupted.
//!
//! With session partitions ([`crate::bus::cluster`]) each item comes with a [`Settle`]: the
//! actor acks it once the item is handled ([`SessionActor::finished`]). A redelivered user
//! message that is already in the log (its first owner died after accepting it) is not
//! accepted twice. When the replicated log says another process wrote the session since
//! (fenced), or cannot be reached, the actor stops without settling: the item goes back to the
//! session's inbox, and the session's owner — this process again, or a new one — reloads it
//! from the log. Not forever: see [`unservable`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use actix::prelude::*;
use tracing::Instrument;

mod deliver;
mod freshness;
mod job_events;
#[cfg(test)]
mod job_events_tests;
#[cfg(test)]
mod stale_copy_tests;
#[cfg(test)]
mod test_actor;
mod unservable;

use super::router::SessionRouter;
use super::settle::Settle;
use crate::protocol::envelope::error_envelope;
use crate::protocol::refusal::Refusal;
use crate::protocol::{Cancel, CancelAccepted, Confirmation, JobEvent, UserMessage};
use crate::store::sessions::{SessionMeta, StoredMessage};
use crate::store::tasks::TaskState;
use crate::store::tasks::TurnPhase;
use crate::telemetry::{spans, trace_context};
use crate::turn::inbound::{self, Inbound};
use crate::turn::{self, TurnEnv, TurnOutcome};

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
    /// The inbox items being handled, acked when done.
    settling: Vec<Settle>,
    /// Parked turns to look at once after a (re)start: their work may have ended while the
    /// session was not running.
    to_poll: Vec<String>,
    /// The trace context the message that starts the next turn arrived with.
    arrived_trace: Option<String>,
    /// Where the publisher of the message that started the turn waits for its
    /// acknowledgement: told there if the message never reaches the log.
    arrived_reply: Option<String>,
    /// Why the session could not be loaded (its log unreachable or refusing): every item is
    /// handed back, or told, without being served from a cache the log may contradict.
    unservable: Option<String>,
    /// The message in hand, kept while its item is on its last chance: before refusing it,
    /// the session is read again and the message handled once more against what the log says.
    last_try: Option<(Deliver, Option<u64>)>,
    /// The waiting turn whose heard job ends are recorded and not yet taken: it runs once for
    /// every end already in the mailbox ([`job_events`]).
    heard: Option<String>,
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
            settling: Vec::new(),
            to_poll: Vec::new(),
            arrived_trace: None,
            arrived_reply: None,
            unservable: None,
            last_try: None,
            heard: None,
        }
    }

    fn key(&self) -> (String, String) {
        (self.agent.clone(), self.session.clone())
    }

    /// The item in hand is handled: tell the router, settle its inbox items.
    fn finished(&mut self) {
        self.router.done(&self.key());
        self.env.inbox_item.store(0, Ordering::Release);
        self.last_try = None;
        for settle in self.settling.drain(..) {
            settle.ack();
        }
    }

    /// Another process owns this session now, or its log is briefly unreachable: stop at
    /// once, settling nothing.
    fn hand_back(&mut self, ctx: &mut Context<Self>) {
        tracing::warn!(agent = %self.agent, session = %self.session, "session handed back to its inbox (another process owns it, or its log is unreachable); this copy stops");
        // Dropping a Settle naks its item: it comes back, after a short backoff, to whichever
        // process owns the session, which reloads it from the log.
        self.settling.clear();
        self.last_try = None;
        self.router.done(&self.key());
        ctx.stop();
    }

    /// Run the turn in progress; the mailbox waits until it ends. Its awaited jobs are all
    /// asked about: something may have ended unheard.
    fn run(&mut self, ctx: &mut Context<Self>) {
        self.run_knowing(turn::Awaited::AskAll, ctx);
    }

    /// [`Self::run`], telling the turn what this copy heard of its awaited jobs.
    fn run_knowing(&mut self, awaited: turn::Awaited, ctx: &mut Context<Self>) {
        let Some(mut meta) = self.meta.take() else {
            return;
        };
        let env = self.env.clone();
        let span = self.turn_span(&meta);
        let mut task = std::mem::take(&mut self.task);
        let history = self.history.clone();
        let turn_span = span.clone();
        let fut = async move {
            // Boxed where it is made: a turn's future is tens of kilobytes, and this block is
            // moved three times before actix boxes it (each move a copy of all of it).
            let turn = Box::pin(turn::run_turn(&env, &mut meta, &mut task, history, awaited));
            let outcome = turn.await;
            record_outcome(&turn_span, &outcome);
            let handed_back = outcome
                .error
                .as_ref()
                .filter(|e| e.hands_back())
                .map(ToString::to_string);
            let lost = outcome.message_lost;
            (meta, task, outcome.messages, handed_back, lost)
        }
        .instrument(span);
        ctx.wait(
            fut.into_actor(self)
                .map(|(meta, task, added, handed_back, lost), act, ctx| {
                    let reply = act.arrived_reply.take();
                    if let Some(cause) = handed_back {
                        if lost {
                            // Never acknowledged: handed back, or refused, as a message the
                            // session could not accept.
                            return act.hand_back_or_refuse(reply, cause, ctx);
                        }
                        if act.last_chance() {
                            return act.end_turn_unservable(meta, task, cause, ctx);
                        }
                        return act.hand_back(ctx);
                    }
                    act.meta = Some(meta);
                    act.task = task;
                    Arc::make_mut(&mut act.history).extend(added);
                    if let Some(at) = turn::delegation::next_deadline(&act.task) {
                        act.router.wake_at(act.key(), at);
                    }
                    act.after_turn(ctx);
                }),
        );
    }

    /// The `invoke_agent` span of the turn about to run. It continues the trace the turn's
    /// message arrived in, or — for a turn that resumes — the trace of its first run, whose
    /// context the turn record keeps.
    fn turn_span(&mut self, meta: &SessionMeta) -> tracing::Span {
        let arrived = self.arrived_trace.take();
        let Some(record) = self.task.unfinished_turn_mut() else {
            return tracing::Span::none();
        };
        let span = spans::invoke_agent(meta.active_agent(), &meta.session, &record.turn_id);
        if span.is_disabled() || !trace_context::enabled() {
            return span;
        }
        trace_context::follow(&span, record.traceparent.as_deref().or(arrived.as_deref()));
        if record.traceparent.is_none() {
            record.traceparent = trace_context::of_span(&span);
        }
        span
    }

    /// A turn stopped (answered, failed or waiting): a parked turn whose work ended
    /// meanwhile, or one not looked at since the actor started, goes next; else the item in
    /// hand is done.
    fn after_turn(&mut self, ctx: &mut Context<Self>) {
        let ready = self
            .task
            .parked
            .iter()
            .find(|t| t.unfinished_jobs().next().is_none())
            .map(|t| t.turn_id.clone())
            .or_else(|| self.to_poll.pop());
        if let Some(turn_id) = ready {
            if self.task.unpark(&turn_id) {
                tracing::info!(session = %self.session, turn = %turn_id, "a waiting turn goes on");
                return self.run(ctx);
            }
        }
        self.finished();
    }
}

impl SessionActor {
    /// Queue the extraction of an answered turn that a crash cut off before it was queued (for
    /// one that answered while its inbox item was held, only if the inbox still holds it).
    /// `then` goes on: [`Self::after_turn`] with an item in hand (settled there), or what
    /// a start does next.
    fn queue_extraction(
        &mut self,
        ctx: &mut Context<Self>,
        then: fn(&mut Self, &mut Context<Self>),
    ) {
        let Some(mut meta) = self.meta.take() else {
            return then(self, ctx);
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
        ctx.wait(fut.into_actor(self).map(move |(meta, task), act, ctx| {
            act.meta = Some(meta);
            act.task = task;
            then(act, ctx);
        }));
    }

    /// After a start's own work: parked turns look at their work once. With no item in hand
    /// there is nothing to settle, and nothing for the router to count as done.
    fn poll_parked(&mut self, ctx: &mut Context<Self>) {
        if !self.to_poll.is_empty() {
            self.after_turn(ctx);
        }
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let store = self.env.store.clone();
        let (agent, session) = (self.agent.clone(), self.session.clone());
        // Reading the log is blocking I/O (done off the arbiter) or a request to the replicated
        // log. Messages wait until it is loaded.
        let load = async move { store.load_synced(&agent, &session).await };
        ctx.wait(load.into_actor(self).map(|result, act, ctx| match result {
            Ok((meta, messages, task)) => {
                act.meta = meta;
                act.history = Arc::new(messages);
                act.task = task;
                act.to_poll = act.task.parked.iter().map(|t| t.turn_id.clone()).collect();
                if let Some(t) = act.task.resumable_turn() {
                    tracing::info!(session = %act.session, turn = %t.turn_id, phase = ?t.phase, "resuming an interrupted turn");
                    act.run(ctx);
                } else if act.task.extraction_unnoted().is_some() {
                    act.queue_extraction(ctx, Self::poll_parked);
                } else if !act.to_poll.is_empty() {
                    act.after_turn(ctx);
                }
            }
            Err(e) => {
                tracing::error!(session = %act.session, error = %e, "session log could not be loaded; its items are handed back, then refused with the cause");
                act.unservable = Some(e.to_string());
            }
        }));
    }
}

/// A validated user message for this session.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Deliver {
    pub inbound: Inbound<UserMessage>,
    /// Its inbox item, on a partitioned deployment.
    pub settle: Option<Settle>,
    /// Delivered before (to an owner that may have accepted it before it died).
    pub redelivered: bool,
    /// The trace context it arrived with (its turn's span continues that trace).
    pub traceparent: Option<String>,
}

impl Deliver {
    /// The same message, to be handled once more (its item stays in the actor's hand).
    fn again(&self) -> Self {
        Self {
            inbound: self.inbound.clone(),
            settle: None,
            redelivered: self.redelivered,
            traceparent: self.traceparent.clone(),
        }
    }
}

/// Token usage and failure of a turn's run, on its `invoke_agent` span.
fn record_outcome(span: &tracing::Span, outcome: &TurnOutcome) {
    if span.is_disabled() {
        return;
    }
    let (input, output) =
        outcome
            .messages
            .iter()
            .filter_map(|m| m.usage)
            .fold((0u64, 0u64), |(i, o), u| {
                (
                    i + u64::from(u.prompt_tokens),
                    o + u64::from(u.completion_tokens),
                )
            });
    spans::record_usage(span, input, output);
    if let Some(error) = outcome.error.as_ref().filter(|e| !e.hands_back()) {
        spans::record_error(span, error.code());
    }
}

/// The user's decision on the high-risk call(s) the session's turn waits on.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Decide {
    pub inbound: Inbound<Confirmation>,
    pub settle: Option<Settle>,
}

/// The final event of an async job a call of this session submitted.
#[derive(Message)]
#[rtype(result = "()")]
pub struct JobFinished {
    pub event: JobEvent,
    pub settle: Option<Settle>,
}

impl Handler<Retire> for SessionActor {
    type Result = ();
    fn handle(&mut self, _: Retire, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl Handler<Decide> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: Decide, ctx: &mut Self::Context) {
        self.settling.extend(msg.settle);
        if let Some(cause) = self.unservable.clone() {
            return self.hand_back_or_refuse(msg.inbound.reply, cause, ctx);
        }
        self.decide(msg.inbound, false, ctx);
    }
}

impl SessionActor {
    /// [`Decide`]'s work; a decision that finds no question here reads the session again
    /// first (this copy may be behind the log), then `refreshed` is set.
    fn decide(&mut self, msg: Inbound<Confirmation>, refreshed: bool, ctx: &mut Context<Self>) {
        let asks = self
            .task
            .unfinished_turn()
            .is_some_and(|t| t.undecided().next().is_some());
        if !asks && !refreshed {
            return self.refresh_then(ctx, move |act, ctx, _| act.decide(msg, true, ctx));
        }
        let Some(mut meta) = self.meta.take() else {
            let env = self.env.clone();
            let text = format!(
                "session `{}` does not exist, so nothing waits for a confirmation",
                self.session
            );
            let reply_to = msg.reply;
            ctx.wait(
                async move {
                    let err = error_envelope("unknown_session", text);
                    inbound::reply(&env, reply_to.as_deref(), &err).await;
                }
                .into_actor(self)
                .map(|_, act, _| act.finished()),
            );
            return;
        };
        let env = self.env.clone();
        let mut task = std::mem::take(&mut self.task);
        let fut = async move {
            let decided = inbound::decide(&env, &mut meta, &mut task, &msg).await;
            (meta, task, decided)
        };
        ctx.wait(fut.into_actor(self).map(|(meta, task, decided), act, ctx| {
            act.meta = Some(meta);
            act.task = task;
            if decided {
                act.run(ctx);
            } else {
                act.finished();
            }
        }));
    }
}

/// Stop the session's turn in progress and the turns it delegated (`user.cancel`).
#[derive(Message)]
#[rtype(result = "()")]
pub struct CancelTurn {
    pub inbound: Inbound<Cancel>,
    pub settle: Option<Settle>,
}

/// Look at a waiting turn again: a delegated agent's deadline passed, or the job it waits for
/// may have ended unheard (its final event lost with a wiped JetStream store).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Wake;

impl Handler<CancelTurn> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: CancelTurn, ctx: &mut Self::Context) {
        self.settling.extend(msg.settle);
        if let Some(cause) = self.unservable.clone() {
            return self.hand_back_or_refuse(msg.inbound.reply, cause, ctx);
        }
        // Nothing to stop here: this copy may be behind the log (another process ran the
        // session's turn meanwhile), so it reads the session again first.
        if self.task.unfinished_turn().is_none() && self.task.parked.is_empty() {
            let msg = msg.inbound;
            return self.refresh_then(ctx, move |act, ctx, _| act.cancel_turn(msg, ctx));
        }
        self.cancel_turn(msg.inbound, ctx);
    }
}

impl SessionActor {
    /// [`CancelTurn`]'s work.
    fn cancel_turn(&mut self, msg: Inbound<Cancel>, ctx: &mut Context<Self>) {
        let env = self.env.clone();
        let mut meta = self.meta.take();
        let mut task = std::mem::take(&mut self.task);
        let fut = async move {
            let reply = match meta.as_mut() {
                Some(meta) if meta.user != msg.user => Refusal::WrongUser
                    .answer(format!(
                        "session `{}` belongs to another user; only its user can cancel its turn",
                        meta.session
                    ))
                    .encode(),
                Some(meta) => {
                    let reason = msg
                        .envelope
                        .body
                        .reason
                        .clone()
                        .unwrap_or_else(|| "cancelled by the user".into());
                    let accepted = turn::cancel(
                        &env,
                        meta,
                        &mut task,
                        &reason,
                        &msg.envelope.id,
                        msg.envelope.ts,
                    )
                    .await;
                    msg.envelope.reply(accepted).encode()
                }
                None => msg
                    .envelope
                    .reply(CancelAccepted {
                        turn_id: None,
                        children: Vec::new(),
                    })
                    .encode(),
            };
            if let (Some(to), Ok(payload)) = (msg.reply.as_deref(), reply) {
                env.ports.reply(to, payload).await;
            }
            (meta, task)
        };
        ctx.wait(fut.into_actor(self).map(|(meta, task), act, _| {
            act.meta = meta;
            act.task = task;
            act.env.cancel.store(false, Ordering::Release);
            act.finished();
        }));
    }
}

impl Handler<Wake> for SessionActor {
    type Result = ();

    fn handle(&mut self, _: Wake, ctx: &mut Self::Context) {
        // The waiting turn (current or parked) whose delegated agent is due first.
        let due = self
            .task
            .turn
            .iter()
            .chain(&self.task.parked)
            .filter(|t| t.phase == TurnPhase::WaitingAgents)
            .filter_map(|t| {
                let first = t.unfinished_children().map(|(_, c)| c.deadline).min()?;
                Some((first, t.turn_id.clone()))
            })
            .min();
        let waits_for_job = self
            .task
            .turn
            .as_ref()
            .is_some_and(|t| t.phase == TurnPhase::WaitingJob);
        match due {
            Some((_, turn_id)) if self.task.unpark(&turn_id) => self.run(ctx),
            // Its job's state is asked again (the job may have ended unheard).
            _ if waits_for_job => self.run(ctx),
            _ => self.finished(),
        }
    }
}
