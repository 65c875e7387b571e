//! One turn of a session (DESIGN §3): recall → plan → tools → … → answer → extraction job.
//!
//! The logic lives here, free of actix: the Session actor calls [`run_turn`] with the turn's
//! inputs and its history, and appends what comes back. Every message is persisted before the
//! turn moves on; every step is published on the session's out subject.

mod emit;
mod tool_calls;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use emit::Emitter;

use crate::bus::messages::{
    kinds, ExtractJob, PlanReply, PlanRequest, RecallReply, RecallRequest, RecalledMemory,
    ToolsCatalog, TurnEvent,
};
use crate::bus::{rpc, subjects, SharedBus};
use crate::config::{AgentConfig, Config};
use crate::context::budget::{self, ContextParts};
use crate::context::tokens::TokenCounter;
use crate::envelope::Envelope;
use crate::llm::{ChatMessage, ToolSpec};
use crate::memory::RecallHit;
use crate::store::sessions::{SessionMeta, SessionStore, StoredMessage};
use crate::store::StoreError;

/// What a turn needs from its session's environment.
#[derive(Clone)]
pub struct TurnEnv {
    pub bus: SharedBus,
    pub config: Arc<Config>,
    pub store: SessionStore,
    pub tokens: TokenCounter,
}

/// The accepted user message that starts a turn.
#[derive(Debug, Clone)]
pub struct TurnInput {
    pub turn_id: String,
    pub trace_id: String,
    pub message: StoredMessage,
}

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("planning failed: {0}")]
    Plan(String),
    #[error("the turn used all {0} planning steps without an answer; raise agents.<name>.max_steps or simplify the request")]
    StepLimit(u32),
    #[error("could not persist the session: {0}")]
    Store(#[from] StoreError),
    #[error("agent is not configured: {0}")]
    Agent(String),
}

impl TurnError {
    pub fn code(&self) -> &'static str {
        match self {
            TurnError::Plan(_) => "plan_failed",
            TurnError::StepLimit(_) => "step_limit",
            TurnError::Store(_) => "store_failed",
            TurnError::Agent(_) => "unknown_agent",
        }
    }
}

/// The messages a turn added (after the user message) and how it ended.
pub struct TurnOutcome {
    pub messages: Vec<StoredMessage>,
    pub error: Option<TurnError>,
}

/// Run one turn to its answer (or error). `history` is the session before this turn.
pub async fn run_turn(
    env: &TurnEnv,
    meta: &mut SessionMeta,
    history: Arc<Vec<StoredMessage>>,
    input: TurnInput,
) -> TurnOutcome {
    let emitter = Emitter::new(env.bus.clone(), meta, &input.trace_id);
    let mut added = Vec::new();
    let result = turn_steps(env, meta, &history, &input, &emitter, &mut added).await;
    let error = result.err();
    if let Some(e) = &error {
        tracing::warn!(session = %meta.session, turn = %input.turn_id, error = %e, "turn failed");
        emitter
            .emit(TurnEvent::Error {
                turn_id: Some(input.turn_id.clone()),
                code: e.code().into(),
                message: e.to_string(),
            })
            .await;
    }
    TurnOutcome {
        messages: added,
        error,
    }
}

async fn turn_steps(
    env: &TurnEnv,
    meta: &mut SessionMeta,
    history: &[StoredMessage],
    input: &TurnInput,
    emitter: &Emitter,
    added: &mut Vec<StoredMessage>,
) -> Result<(), TurnError> {
    let agent = env
        .config
        .agent(&meta.agent)
        .map_err(|e| TurnError::Agent(e.to_string()))?;
    emitter
        .emit(TurnEvent::TurnStarted {
            turn_id: input.turn_id.clone(),
            message_id: input.message.id.clone(),
        })
        .await;
    let hits = recall(
        env,
        &meta.user,
        &input.message.message.content,
        &input.trace_id,
    )
    .await;
    emitter
        .emit(TurnEvent::MemoryRecalled {
            turn_id: input.turn_id.clone(),
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
    let tools = tool_catalog(env).await;
    let fixed = FixedContext::new(env, agent, &hits, &tools);
    let mut current = vec![input.message.clone()];
    for step in 0..agent.max_steps {
        let reply = plan(env, meta, input, &fixed, history, &current, &tools, step).await?;
        if reply.tool_calls.is_empty() {
            let answer = ChatMessage::assistant(reply.text.clone());
            let stored = persist(env, meta, &input.turn_id, answer, added).await?;
            current.push(stored);
            emitter
                .emit(TurnEvent::Answer {
                    turn_id: input.turn_id.clone(),
                    text: reply.text.clone(),
                })
                .await;
            enqueue_extraction(env, meta, input, &reply.text).await;
            return Ok(());
        }
        let call_msg = ChatMessage::assistant_calls(reply.text.clone(), reply.tool_calls.clone());
        current.push(persist(env, meta, &input.turn_id, call_msg, added).await?);
        for call in &reply.tool_calls {
            let result =
                tool_calls::execute(env, emitter, &tools, meta, &input.turn_id, call).await;
            let content = tool_calls::content_for_model(&result);
            let msg = ChatMessage::tool(call.id.clone(), call.name.clone(), content);
            current.push(persist(env, meta, &input.turn_id, msg, added).await?);
        }
    }
    Err(TurnError::StepLimit(agent.max_steps))
}

/// The parts of the context that stay the same for every step of a turn.
struct FixedContext {
    system: ChatMessage,
    system_tokens: u32,
    tools_tokens: u32,
    memory: Option<ChatMessage>,
    memory_tokens: u32,
    budget: usize,
}

impl FixedContext {
    fn new(env: &TurnEnv, agent: &AgentConfig, hits: &[RecallHit], tools: &[ToolSpec]) -> Self {
        let system = ChatMessage::system(agent.system_prompt.clone());
        let memory = memory_block(hits);
        let tools_json = serde_json::to_string(tools).unwrap_or_default();
        Self {
            system_tokens: env.tokens.count_message(&system),
            tools_tokens: env.tokens.count_text(&tools_json),
            memory_tokens: memory.as_ref().map_or(0, |m| env.tokens.count_message(m)),
            system,
            memory,
            budget: budget::budget(agent.context_window, agent.reply_reserve),
        }
    }
}

/// The recalled memories as background the model may ignore (the seeds' warning: five
/// "relevant" memories can pull the model off course).
fn memory_block(hits: &[RecallHit]) -> Option<ChatMessage> {
    if hits.is_empty() {
        return None;
    }
    let mut text = String::from(
        "Background memory about this user, from earlier conversations. It may be outdated or \
         unrelated to the current request: use only what clearly applies, ignore the rest.\n",
    );
    for h in hits {
        text.push_str(&format!(
            "- [{}] {} (recorded {})\n",
            h.record.key,
            h.record.content,
            h.record.updated_at.format("%Y-%m-%d")
        ));
    }
    Some(ChatMessage::system(text))
}

#[allow(clippy::too_many_arguments)]
async fn plan(
    env: &TurnEnv,
    meta: &SessionMeta,
    input: &TurnInput,
    fixed: &FixedContext,
    history: &[StoredMessage],
    current: &[StoredMessage],
    tools: &[ToolSpec],
    step: u32,
) -> Result<PlanReply, TurnError> {
    let parts = ContextParts {
        system: &fixed.system,
        system_tokens: fixed.system_tokens,
        tools_tokens: fixed.tools_tokens,
        memory: fixed.memory.as_ref(),
        memory_tokens: fixed.memory_tokens,
        history,
        current,
    };
    let assembled = budget::assemble(&parts, fixed.budget);
    let request = Envelope::new(
        kinds::PLAN_REQUEST,
        PlanRequest {
            turn_id: input.turn_id.clone(),
            step,
            messages: assembled.messages,
            tools: tools.to_vec(),
            stream_to: subjects::outbound(&meta.agent, &meta.session).ok(),
        },
    )
    .for_session(&meta.agent, &meta.session, Some(&meta.user))
    .in_trace(&input.trace_id);
    let timeout = Duration::from_secs(env.config.engine.plan_timeout_secs);
    let reply: Envelope<PlanReply> = rpc::call(
        env.bus.as_ref(),
        subjects::PLAN,
        &request,
        kinds::PLAN_REPLY,
        timeout,
    )
    .await
    .map_err(|e| TurnError::Plan(e.to_string()))?;
    Ok(reply.body)
}

async fn recall(env: &TurnEnv, user: &str, query: &str, trace: &str) -> Vec<RecallHit> {
    let request = Envelope::new(
        kinds::RECALL_REQUEST,
        RecallRequest {
            user: user.to_string(),
            query: query.to_string(),
            limit: env.config.memory.recall_limit,
            ..RecallRequest::default()
        },
    )
    .in_trace(trace);
    let timeout = Duration::from_secs(env.config.engine.request_timeout_secs);
    match rpc::call::<_, RecallReply>(
        env.bus.as_ref(),
        subjects::MEMORY_RECALL,
        &request,
        kinds::RECALL_REPLY,
        timeout,
    )
    .await
    {
        Ok(r) => r.body.hits,
        Err(e) => {
            tracing::warn!(error = %e, "memory recall failed; the turn goes on without memories");
            Vec::new()
        }
    }
}

async fn tool_catalog(env: &TurnEnv) -> Vec<ToolSpec> {
    let request = Envelope::new(kinds::TOOLS_LIST, serde_json::Value::Null);
    let timeout = Duration::from_secs(env.config.engine.request_timeout_secs);
    match rpc::call::<_, ToolsCatalog>(
        env.bus.as_ref(),
        subjects::TOOLS_LIST,
        &request,
        kinds::TOOLS_CATALOG,
        timeout,
    )
    .await
    {
        Ok(r) => r.body.tools,
        Err(e) => {
            tracing::warn!(error = %e, "tool catalog unavailable; the turn goes on without tools");
            Vec::new()
        }
    }
}

/// Store one message of the current turn (flushed) and remember it in `added`.
async fn persist(
    env: &TurnEnv,
    meta: &mut SessionMeta,
    turn_id: &str,
    message: ChatMessage,
    added: &mut Vec<StoredMessage>,
) -> Result<StoredMessage, TurnError> {
    let stored = new_stored(&env.tokens, meta.next_seq, turn_id, message, Utc::now());
    env.store
        .append(meta, std::slice::from_ref(&stored))
        .await?;
    added.push(stored.clone());
    Ok(stored)
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
        message,
    }
}

async fn enqueue_extraction(env: &TurnEnv, meta: &SessionMeta, input: &TurnInput, answer: &str) {
    let job = Envelope::new(
        kinds::EXTRACT_JOB,
        ExtractJob {
            agent: meta.agent.clone(),
            session: meta.session.clone(),
            user: meta.user.clone(),
            turn_id: input.turn_id.clone(),
            message_id: input.message.id.clone(),
            source_time: input.message.ts,
            transcript: vec![
                input.message.message.clone(),
                ChatMessage::assistant(answer.to_string()),
            ],
        },
    )
    .for_session(&meta.agent, &meta.session, Some(&meta.user))
    .in_trace(&input.trace_id);
    let payload = match job.encode() {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, "extraction job not encoded");
            return;
        }
    };
    if let Err(e) = env
        .bus
        .durable_publish(subjects::MEMORY_EXTRACT, payload)
        .await
    {
        tracing::error!(session = %meta.session, error = %e, "extraction job not queued; this turn's memories are not written");
    }
}
