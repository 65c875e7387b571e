//! One turn of a session (DESIGN §3) as a durable state machine:
//! `received → planning → awaiting_tools → planning → … → answered | failed`, pausing in
//! `waiting_user` (a `risk = high` call waits for the user's decision) or `waiting_job` (an
//! async tool's job runs) and resumed by the confirmation or the job's completion
//! ([`tool_step`], [`waiting`]).
//!
//! The logic lives here, free of actix: the Session actor calls [`run_turn`] with the session's
//! log (the turn's user message already stored) and its task state. Every message and every
//! phase change is persisted before the turn moves on, so [`run_turn`] can be called again
//! after a crash and continues where the log stops: a tool call whose result is stored is not
//! executed again.

pub mod ack;
mod context;
pub mod delegation;
mod emit;
mod ending;
pub mod first_write;
mod handoff;
pub mod inbound;
mod observe;
mod outbox;
mod port_error;
pub mod ports;
pub mod prefetch;
mod questions;
mod shown_tools;
mod state;
mod tool_calls;
mod tool_step;
pub mod tool_tokens;
mod waiting;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};

pub use emit::Emitter;
pub use ending::{cancel, queue_extraction, tell_unservable, UNSERVABLE};
use ending::{fail, finish};
pub use port_error::PortError;
use state::{turn_start, TurnState};
pub use waiting::{finished_by, job_result, Awaited};

use crate::config::Config;
use crate::context::calibrate;
use crate::context::tokens::TokenCounter;
use crate::llm::{ChatMessage, Role, ToolSpec};
use crate::protocol::subjects;
use crate::protocol::{PlanReply, PlanRequest, RecalledMemory, ToolsCatalog, TurnEvent};
use crate::protocol::{RecallHit, ToolStatus};
use crate::store::sessions::{SessionMeta, SessionStore, StoredMessage};
use crate::store::tasks::{TaskState, TurnPhase, TurnRecord};
use crate::store::StoreError;

/// What a turn needs from its session's environment.
#[derive(Clone)]
pub struct TurnEnv {
    /// Everything beyond the session's own store: planning, memory, tools, events.
    pub ports: Arc<dyn ports::TurnPorts>,
    pub config: Arc<Config>,
    pub store: SessionStore,
    pub tokens: TokenCounter,
    /// Set when the session's turn is to stop (`user.cancel`); checked before every step.
    pub cancel: Arc<AtomicBool>,
    /// The acknowledgement of the session's last message, while it waits for its flush.
    pub ack: ack::AckSlot,
    /// Memories recalled for the session's new turn while its message was being stored.
    pub prefetched: prefetch::Prefetched,
    /// The new turn's message while it waits for the turn's first write to the replicated
    /// log.
    pub first_write: first_write::FirstWrite,
    /// The inbox item (its sequence; 0: none) of the message whose turn runs now, while the
    /// session holds it unacked: it is acked after the turn, so an answer's extraction queued
    /// before that needs no note of its own ([`crate::store::tasks::TurnRecord::inbox_item`]).
    pub inbox_item: Arc<std::sync::atomic::AtomicU64>,
    /// What the tool lists turns show cost in tokens (shared by every session).
    pub tool_tokens: tool_tokens::ToolTokens,
    /// Longest an acknowledgement waits for a flush another commit asks for
    /// ([`ack::ACK_FLUSH_WITHIN`]; a test that needs the sharing to hold on a loaded machine
    /// widens it).
    pub ack_flush_within: std::time::Duration,
}

impl TurnEnv {
    /// This environment for one session actor: with a cancel flag, an acknowledgement slot
    /// and a prefetch slot of its own.
    pub fn for_one_session(&self) -> Self {
        Self {
            cancel: Arc::default(),
            ack: ack::AckSlot::default(),
            prefetched: prefetch::Prefetched::default(),
            first_write: first_write::FirstWrite::default(),
            inbox_item: Arc::default(),
            ..self.clone()
        }
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Acquire)
    }

    /// A commit point of the turn: its writes durable as `engine.durability` says, then the
    /// acknowledgement of its message — which that flush covered — out first, with the events
    /// held for it ([`ack`]).
    async fn commit(&self) -> Result<(), StoreError> {
        let committed = self.store.commit().await;
        self.ack.sent().await;
        committed
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// No plan came back (the planner did not answer, or answered with no model's error).
    #[error("planning failed: {0}")]
    Plan(String),
    /// The model failed; `kind` is the turn's error code.
    #[error("planning failed: {message}")]
    Model {
        kind: crate::llm::ModelErrorKind,
        message: String,
    },
    #[error("the turn used all {0} planning steps without an answer; raise agents.<name>.max_steps or simplify the request")]
    StepLimit(u32),
    #[error("could not persist the session: {0}")]
    Store(#[from] StoreError),
    #[error("agent is not configured: {0}")]
    Agent(String),
    #[error(transparent)]
    Context(#[from] crate::context::budget::OverBudget),
    #[error("nothing to run: the session has no turn in progress")]
    NoTurn,
    #[error("the task's token budget of {0} tokens is spent (agents.<name>.token_budget); answer sooner or raise the budget")]
    Budget(u64),
    #[error("{}", cancelled(.0))]
    Cancelled(String),
}

/// A cancellation's text: its reason, which usually says "cancelled …" itself (else it gets
/// the prefix), so a child cancelled with its parent's reason does not read "cancelled:
/// cancelled: …".
fn cancelled(reason: &str) -> String {
    if reason.starts_with("cancelled") {
        reason.to_owned()
    } else {
        format!("cancelled: {reason}")
    }
}

impl TurnError {
    /// The turn goes back to the session's inbox instead of failing (see
    /// [`crate::store::StoreError::hands_back`]).
    pub fn hands_back(&self) -> bool {
        matches!(self, TurnError::Store(e) if e.hands_back())
    }

    pub fn code(&self) -> &'static str {
        match self {
            TurnError::Plan(_) => "plan_failed",
            TurnError::Model { kind, .. } => kind.code(),
            TurnError::StepLimit(_) => "step_limit",
            TurnError::Store(_) => "store_failed",
            TurnError::Agent(_) => "unknown_agent",
            TurnError::Context(_) => "context_overflow",
            TurnError::NoTurn => "no_turn",
            TurnError::Budget(_) => "token_budget",
            TurnError::Cancelled(_) => "cancelled",
        }
    }
}

/// The messages a turn added and how it ended.
pub struct TurnOutcome {
    pub messages: Vec<StoredMessage>,
    pub error: Option<TurnError>,
    /// The turn's message never reached the replicated log ([`first_write`]): it was not
    /// acknowledged, so it is handed back — or refused — like a message that could not be
    /// accepted.
    pub message_lost: bool,
}

impl TurnOutcome {
    fn empty(error: TurnError) -> Self {
        Self {
            messages: Vec::new(),
            error: Some(error),
            message_lost: false,
        }
    }
}

/// Run (or resume) the session's turn in progress to its answer or error.
pub async fn run_turn(
    env: &TurnEnv,
    meta: &mut SessionMeta,
    task: &mut TaskState,
    log: Arc<Vec<StoredMessage>>,
    awaited: Awaited,
) -> TurnOutcome {
    let Some(record) = task.unfinished_turn().cloned() else {
        return TurnOutcome::empty(TurnError::NoTurn);
    };
    let emitter = Emitter::new(env, meta, &record.trace_id);
    let mut state = TurnState::new(env, meta, task, &log, emitter);
    state.awaited = awaited;
    let result = steps(&mut state, &record).await;
    let mut error = result.err();
    if let Some(e) = error.as_ref().filter(|e| !e.hands_back()) {
        fail(&mut state, &record, e).await;
    }
    // Every way out of a turn saves in full (a turn handed back resumes from its log); this
    // is the net under one that would not.
    if error.is_none() {
        if let Err(e) = state.flush_deferred().await {
            tracing::error!(session = %state.meta.session, error = %e, "the turn's last steps were not stored; it resumes from the step before them");
        }
    }
    // A turn whose message never reached the replicated log is not settled: it goes back to
    // the inbox, and the message is accepted again (here, or by the session's owner).
    let message_lost = state.message_lost().await;
    if message_lost && !error.as_ref().is_some_and(TurnError::hands_back) {
        error = Some(TurnError::Store(first_write::never_written()));
    }
    // The turn answered, paused or failed: what it still holds leaves now.
    state.emitter.flush().await;
    // Reading the turn's messages costs a copy: only when this process records metrics.
    if crate::telemetry::metrics::enabled() {
        if let Some(outcome) = observe::outcome(state.task, &record.turn_id, error.as_ref()) {
            observe::record(state.meta.active_agent(), outcome, &state.current());
        }
    }
    TurnOutcome {
        messages: state.added,
        error,
        message_lost,
    }
}

async fn steps(state: &mut TurnState<'_>, record: &TurnRecord) -> Result<(), TurnError> {
    let env = state.env;
    let agent_name = state.meta.active_agent().to_string();
    let agent = env
        .config
        .agent(&agent_name)
        .map_err(|e| TurnError::Agent(e.to_string()))?
        .clone();
    if matches!(
        record.phase,
        TurnPhase::WaitingJob | TurnPhase::WaitingAgents | TurnPhase::WaitingUser
    ) {
        let answered: Vec<String> = state
            .current()
            .iter()
            .filter_map(|m| m.message.tool_call_id.clone())
            .collect();
        state
            .emitter
            .emit(TurnEvent::TurnResumed {
                turn_id: record.turn_id.clone(),
                reason: resume_reason(record, &answered),
            })
            .await;
    }
    let current = state.current();
    let user_text = current
        .first()
        .map(|m| m.message.content.clone())
        .unwrap_or_default();
    if record.phase == TurnPhase::Received {
        state
            .emitter
            .emit(TurnEvent::TurnStarted {
                turn_id: record.turn_id.clone(),
                message_id: record.message_id.clone(),
            })
            .await;
    }
    let hits = recall(state, &agent, &user_text, &record.turn_id).await;
    if !agent.memory.read.is_empty() {
        state
            .emitter
            .emit(TurnEvent::MemoryRecalled {
                turn_id: record.turn_id.clone(),
                memories: hits
                    .iter()
                    .map(|h| RecalledMemory {
                        key: h.record.key.clone(),
                        content: h.record.content.clone(),
                        score: h.score,
                    })
                    .collect(),
            })
            .await;
    }
    let catalog = match env.ports.catalog().await {
        Ok(catalog) => catalog,
        Err(e) => {
            tracing::warn!(error = %e, "tool catalog unavailable; the turn goes on without tools");
            Arc::new(ToolsCatalog::default())
        }
    };
    let turn_tools = shown_tools::for_turn(&env.config, &agent, &catalog, &user_text);
    let definitions = turn_tools.definitions;
    let tools: Arc<[ToolSpec]> = turn_tools.shown.into();
    let tools_tokens =
        env.tool_tokens
            .count(&env.tokens, &catalog, &env.config, &agent_name, &tools);
    let fixed = context::Fixed::new(env, &agent, &hits, tools_tokens);
    let step = tool_step::Step {
        agent_name: &agent_name,
        agent: &agent,
        tools: &definitions,
    };
    loop {
        if env.cancelled() {
            return Err(TurnError::Cancelled("the user cancelled the turn".into()));
        }
        let current = state.current();
        if let Some(calls) = tool_step::open_calls(&current) {
            if tool_step::run(state, &step, &calls, &record.turn_id).await? == tool_step::Next::Wait
            {
                return Ok(());
            }
            if let Some(stuck) = loop_guard(&state.current()) {
                // Asking the user beats a fourth identical failure.
                state.persist(ChatMessage::assistant(stuck), None).await?;
            }
            continue;
        }
        let Some(last) = current.last() else {
            return Err(TurnError::NoTurn);
        };
        if last.message.role == Role::Assistant {
            let text = last.message.content.clone();
            return finish(state, record, &text).await;
        }
        if state.record().step >= agent.max_steps {
            return Err(TurnError::StepLimit(agent.max_steps));
        }
        if delegation::remaining_budget(&agent, state.record()) == Some(0) {
            return Err(TurnError::Budget(agent.token_budget));
        }
        context::compact(state, &agent).await;
        let (mut reply, counted) = plan(state, &fixed, &current, &tools, record, &agent).await?;
        state.record().step += 1;
        if let Some(usage) = reply.usage.as_mut() {
            // A provider that shows its reasoning but does not count it (Anthropic): our count.
            if usage.reasoning_tokens == 0 && !reply.reasoning.is_empty() {
                usage.reasoning_tokens = env.tokens.count_text(&reply.reasoning);
            }
            if !env.tokens.is_exact() {
                let task = &mut *state.task;
                task.token_scale =
                    calibrate::update(task.token_scale, counted, usage.prompt_tokens);
            }
        }
        if let Some(usage) = reply.usage {
            state.record().tokens_used +=
                u64::from(usage.prompt_tokens) + u64::from(usage.completion_tokens);
        }
        // An answer is stored as `answered` in the same write as its message, with its
        // extraction not yet queued — or, on NATS, carried by that very write (`outbox`);
        // `finish` commits, publishes it and queues the extraction, and a crash before that
        // is completed at start-up (`ending::queue_extraction`).
        if reply.tool_calls.is_empty() {
            state.set_answered();
            // On NATS the answer's append may carry its extraction job (`outbox`).
            state.carry_extraction(&reply.text);
        } else {
            state.set_phase(TurnPhase::AwaitingTools);
        }
        let mut msg = ChatMessage::assistant_calls(reply.text, reply.tool_calls);
        msg.provider_parts = reply.parts;
        state.persist(msg, reply.usage).await?;
    }
}

/// What woke a paused turn, for its `turn.resumed` event: the results that arrived and are
/// not in the conversation yet (`answered`: the call ids that are).
fn resume_reason(record: &TurnRecord, answered: &[String]) -> String {
    let arrived: Vec<String> = record
        .jobs
        .iter()
        .filter(|j| j.result.is_some() && !answered.contains(&j.call_id))
        .map(|j| match &j.child {
            Some(child) => format!("agent `{}` answered", child.agent),
            None => format!("job {} of `{}` ended", j.job_id, j.tool),
        })
        .collect();
    match record.phase {
        TurnPhase::WaitingUser => "the user decided on the confirmation".into(),
        _ if arrived.is_empty() => "resumed after a restart".into(),
        _ => arrived.join("; "),
    }
}

/// Failures of one tool in a row after which the turn asks the user instead of retrying.
const MAX_CONSECUTIVE_FAILURES: usize = 3;

/// The question to ask the user when the same tool has just failed three times in a row.
fn loop_guard(current: &[StoredMessage]) -> Option<String> {
    let results: Vec<&StoredMessage> = current
        .iter()
        .filter(|m| m.message.role == Role::Tool)
        .collect();
    let last = results.last()?;
    let name = last.message.name.clone()?;
    let failed = |m: &&StoredMessage| m.tool_status == Some(ToolStatus::Error);
    let streak = results
        .iter()
        .rev()
        .take_while(|m| m.message.name.as_deref() == Some(name.as_str()) && failed(m))
        .count();
    (streak >= MAX_CONSECUTIVE_FAILURES).then(|| {
        format!(
            "I tried `{name}` {streak} times and it failed each time, so I stopped instead of \
             retrying. Could you check the details (ids, dates, spelling) or tell me how you \
             would like to proceed?"
        )
    })
}

async fn plan(
    state: &mut TurnState<'_>,
    fixed: &context::Fixed,
    current: &[StoredMessage],
    tools: &Arc<[ToolSpec]>,
    record: &TurnRecord,
    agent: &crate::config::AgentConfig,
) -> Result<(PlanReply, usize), TurnError> {
    state.set_phase(TurnPhase::Planning);
    let (messages, counted) = context::assemble(state, fixed, current)?;
    let meta = &state.meta;
    let request = PlanRequest {
        turn_id: record.turn_id.clone(),
        step: state.task.turn.as_ref().map_or(0, |t| t.step),
        messages,
        tools: tools.clone(),
        stream_to: subjects::outbound(&meta.agent, &meta.session, &state.emitter.scope().reader)
            .ok(),
        model: Some(agent.model.clone()).filter(|m| m != "planner"),
    };
    // A planner in this task streams to the turn, which publishes the deltas through its
    // emitter: after the message's acknowledgement, like every event of the turn. (A planner
    // elsewhere publishes them itself.)
    let (sink, mut deltas) = tokio::sync::mpsc::unbounded_channel::<String>();
    let emitter = &state.emitter;
    let delta = |text| TurnEvent::Delta {
        turn_id: record.turn_id.clone(),
        text,
    };
    let call =
        crate::bus::events::with_delta_sink(sink, state.env.ports.plan(emitter.scope(), request));
    tokio::pin!(call);
    let reply = loop {
        tokio::select! {
            biased;
            Some(text) = deltas.recv() => emitter.emit(delta(text)).await,
            reply = &mut call => break reply,
        }
    };
    while let Ok(text) = deltas.try_recv() {
        emitter.emit(delta(text)).await;
    }
    reply.map(|r| (r, counted))
}

/// The memories for the turn: recalled ahead while its message was stored, or now.
async fn recall(
    state: &TurnState<'_>,
    agent: &crate::config::AgentConfig,
    query: &str,
    turn_id: &str,
) -> Vec<RecallHit> {
    if let Some(hits) = state.env.prefetched.take(turn_id).await {
        return hits;
    }
    let scope = state.emitter.scope();
    recall_for(
        state.env,
        scope,
        &state.meta.user,
        &agent.memory.read,
        query,
        turn_id,
    )
    .await
}

/// Recall `user`'s memories for `query` in the `namespaces` an agent reads, for turn
/// `turn_id`; a failure is logged and recalls nothing.
async fn recall_for(
    env: &TurnEnv,
    scope: &crate::bus::events::EventScope,
    user: &str,
    namespaces: &[String],
    query: &str,
    turn_id: &str,
) -> Vec<RecallHit> {
    let limit = env.config.memory.recall_limit;
    if namespaces.is_empty() {
        return Vec::new();
    }
    let recall = ports::Recall {
        user,
        query,
        limit,
        task: turn_id,
        namespaces,
    };
    let hits = match env.ports.recall(scope, recall).await {
        Ok(hits) => hits,
        Err(e) => {
            tracing::warn!(error = %e, "memory recall failed; the turn goes on without memories");
            Vec::new()
        }
    };
    // Every hit goes into the context's memory block (`context::Fixed`).
    crate::telemetry::metrics::memory_recall(!hits.is_empty());
    hits
}

/// Tokens the pinned goal costs in every context (counted once, when it is set).
pub fn goal_tokens(tokens: &TokenCounter, goal: &str) -> u32 {
    tokens.count_message(&context::goal_message(goal))
}

/// A message ready to store, with its token count computed once.
pub fn new_stored(
    tokens: &TokenCounter,
    seq: u64,
    turn_id: &str,
    message: ChatMessage,
    ts: DateTime<Utc>,
) -> StoredMessage {
    StoredMessage {
        seq,
        id: uuid::Uuid::now_v7().to_string(),
        turn_id: turn_id.to_string(),
        ts,
        tokens: tokens.count_message(&message),
        usage: None,
        message: Arc::new(message),
        tool_status: None,
    }
}

#[cfg(test)]
mod ack_tests;
#[cfg(test)]
mod deferral_tests;
#[cfg(test)]
pub(crate) mod delegation_tests;
#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod inbox_note_tests;
#[cfg(test)]
mod outbox_tests;
#[cfg(test)]
mod provider_parts_tests;
#[cfg(test)]
mod replicated_tests;
#[cfg(test)]
mod resume_tests;
#[cfg(test)]
mod talk_tests;
#[cfg(test)]
pub(crate) mod tests;
