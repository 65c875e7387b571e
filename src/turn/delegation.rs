//! Delegation: a model calls another agent like a tool (`agent__<name>` with a `task` and an
//! optional `context`). The child runs as its own session — possibly in another process —
//! whose first message is the task; the parent turn pauses durably in `waiting_agents`
//! (its actor stays free), and the child's answer, published on `hermes.job.<id>` like an
//! async job's completion, wakes it as the call's result.
//!
//! Every child is recorded in the parent's turn (an [`AwaitedJob`] with a [`ChildTask`])
//! before its message is sent, so a crash loses none: a resumed parent reads each child's
//! session ([`poll`]) and sends the task again only if the child never stored it (the task's
//! message id is the job id, so a repeat is recognised). Depth and cycles are refused before
//! anything is sent; each child has a deadline after which the parent cancels it and goes
//! on with a timeout result; the child's tokens count in the parent task's budget.
//!
//! A child agent that lives elsewhere (`a2a = { card_url = … }`) gets its task over A2A
//! instead ([`crate::a2a::delegate`]): recorded there before it is sent, its end published on
//! the same `hermes.job.<id>`, read back by the same poll.

use chrono::{Duration as ChronoDuration, Utc};
use serde_json::{json, Value};

use super::{Emitter, PortError, TurnEnv};
use crate::a2a::delegate::{ParentTurn, RemotePoll, RemoteTask};
use crate::config::agents::{delegated_agent, AgentConfig};
use crate::config::Config;
use crate::llm::{ToolCall, ToolSpec};
use crate::protocol::envelope::Envelope;
use crate::protocol::{
    Cancel, Delegation, JobEvent, JobStatus, ToolCallResult, ToolStatus, TurnEvent, UserMessage,
};
use crate::store::sessions::{SessionMeta, StoredMessage};
use crate::store::tasks::{AwaitedJob, ChildTask, ParentLink, TaskState, TurnPhase, TurnRecord};
use crate::tools::{ToolError, ToolErrorCode};

/// The tools through which `agent` delegates: one `agent__<name>` per `delegates_to`.
pub(super) fn tool_specs(config: &Config, agent: &AgentConfig) -> Vec<ToolSpec> {
    agent
        .delegates_to
        .iter()
        .map(|name| {
            let about = config
                .agents
                .get(name)
                .map(|a| a.description.clone())
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| format!("the `{name}` agent"));
            ToolSpec {
                name: AgentConfig::delegation_tool(name),
                description: format!(
                    "Delegate a task to another agent: {about}. It works in parallel with any \
                     other delegation of the same step and answers in its own words; give it \
                     everything it needs in `task` and `context`."
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "task": {"type": "string", "description": "What the agent should do, as one self-contained request"},
                        "context": {"type": "string", "description": "Facts it needs (ids, names, constraints)"}
                    },
                    "required": ["task"],
                    "additionalProperties": false
                }),
            }
        })
        .collect()
}

/// Is this call a delegation to another agent?
pub(super) fn is_delegation(call: &ToolCall) -> bool {
    delegated_agent(&call.name).is_some()
}

/// Check a delegation call and make its child record, or say why it is refused (the call's
/// error result: [`refused`]).
pub(super) fn prepare(
    config: &Config,
    agent_name: &str,
    agent: &AgentConfig,
    record: &TurnRecord,
    call: &ToolCall,
) -> Result<AwaitedJob, ToolError> {
    let fail =
        |code, message: String, hint: &str| Err(ToolError::new(code, message).with_hint(hint));
    let target = delegated_agent(&call.name).unwrap_or_default();
    if !agent.delegates_to.iter().any(|a| a == target) {
        return fail(
            ToolErrorCode::UnknownTool,
            format!(
                "agent `{agent_name}` may not delegate to `{target}`; it may delegate to: {}",
                if agent.delegates_to.is_empty() {
                    "no one".to_string()
                } else {
                    agent.delegates_to.join(", ")
                }
            ),
            "use one of the agent__ tools you were given, or do the task yourself",
        );
    }
    let task = call.arguments["task"].as_str().unwrap_or("").trim();
    if task.is_empty() {
        return fail(
            ToolErrorCode::InvalidArguments,
            "`task` is missing or empty".into(),
            "call again with `task`: a self-contained request for the other agent",
        );
    }
    let mut chain: Vec<String> = record
        .parent
        .as_ref()
        .map(|p| p.chain.clone())
        .unwrap_or_default();
    chain.push(agent_name.to_string());
    if chain.iter().any(|a| a == target) {
        return fail(
            ToolErrorCode::ExecutionFailed,
            format!(
                "delegating to `{target}` would make a cycle ({} → {target}); refused",
                chain.join(" → ")
            ),
            "answer with what you have, or ask the user",
        );
    }
    let max_depth = config.engine.max_delegation_depth;
    if chain.len() > max_depth {
        return fail(
            ToolErrorCode::ExecutionFailed,
            format!(
                "delegation depth limit reached ({} → {target} is deeper than \
                 engine.max_delegation_depth = {max_depth}); refused",
                chain.join(" → ")
            ),
            "do the task yourself or answer with what you have",
        );
    }
    if remaining_budget(agent, record) == Some(0) {
        return fail(
            ToolErrorCode::ExecutionFailed,
            "this task's token budget is spent; no tokens are left for another agent".into(),
            "answer with what you have",
        );
    }
    let context = call.arguments["context"].as_str().unwrap_or("").trim();
    let task = if context.is_empty() {
        task.to_string()
    } else {
        format!("{task}\n\nContext: {context}")
    };
    let job_id = uuid::Uuid::now_v7();
    let mut deadline = Utc::now() + seconds(agent.delegation_timeout_secs);
    if let Some(parent) = &record.parent {
        deadline = deadline.min(parent.deadline);
    }
    Ok(AwaitedJob {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        job_id: job_id.to_string(),
        submitted_at: Utc::now(),
        result: None,
        child: Some(ChildTask {
            agent: target.to_string(),
            session: format!("dlg-{}", job_id.simple()),
            task,
            deadline,
        }),
    })
}

fn seconds(secs: u64) -> ChronoDuration {
    ChronoDuration::seconds(i64::try_from(secs).unwrap_or(i64::MAX / 2_000))
}

/// Tokens this turn may still spend: the least of its agent's budget and what its parent
/// gave it; `None` when neither limits it.
pub(super) fn remaining_budget(agent: &AgentConfig, record: &TurnRecord) -> Option<u64> {
    let own = (agent.token_budget > 0).then_some(agent.token_budget);
    let given = record.parent.as_ref().and_then(|p| p.token_budget);
    let limit = match (own, given) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }?;
    Some(limit.saturating_sub(record.tokens_used))
}

/// A delegation call that was refused before anything was sent.
pub(super) fn refused(call: &ToolCall, error: ToolError) -> ToolCallResult {
    let mut result = super::ports::failed(call.id.clone(), call.name.clone(), error);
    result.via = "delegation".into();
    result
}

/// Send the child its task; false when its session refused it for good (the reason is logged
/// and the call ends in an error result at the next poll).
pub(super) async fn send(
    env: &TurnEnv,
    emitter: &Emitter,
    meta: &SessionMeta,
    agent: &AgentConfig,
    record: &TurnRecord,
    job: &AwaitedJob,
) -> Result<(), PortError> {
    let Some(child) = &job.child else {
        return Ok(());
    };
    if is_remote(env, &child.agent) {
        return send_remote(env, meta, record, job, child).await;
    }
    let mut chain: Vec<String> = record
        .parent
        .as_ref()
        .map(|p| p.chain.clone())
        .unwrap_or_default();
    chain.push(meta.active_agent().to_string());
    let body = UserMessage {
        text: child.task.clone(),
        delegation: Some(Box::new(Delegation {
            parent_agent: meta.agent.clone(),
            parent_session: meta.session.clone(),
            parent_turn: record.turn_id.clone(),
            call_id: job.call_id.clone(),
            job_id: job.job_id.clone(),
            chain,
            token_budget: remaining_budget(agent, record),
            deadline: child.deadline,
        })),
        answer_to: None,
        trigger: None,
        resendable: false,
    };
    let mut envelope = Envelope::request(body)
        .for_session(&child.agent, &child.session, Some(&meta.user))
        .in_trace(&record.trace_id);
    envelope.id = job.job_id.clone();
    env.ports.send_message(emitter.scope(), envelope).await
}

/// Whether `agent` lives elsewhere and is reached over A2A.
fn is_remote(env: &TurnEnv, agent: &str) -> bool {
    env.config
        .agents
        .get(agent)
        .is_some_and(AgentConfig::is_remote)
}

/// Record the child's task for its remote agent, which sends and follows it.
async fn send_remote(
    env: &TurnEnv,
    meta: &SessionMeta,
    record: &TurnRecord,
    job: &AwaitedJob,
    child: &ChildTask,
) -> Result<(), PortError> {
    let task = RemoteTask {
        job_id: job.job_id.clone(),
        agent: child.agent.clone(),
        context_id: child.session.clone(),
        text: child.task.clone(),
        parent: ParentTurn {
            agent: meta.agent.clone(),
            session: meta.session.clone(),
            turn_id: record.turn_id.clone(),
            call_id: job.call_id.clone(),
            user: meta.user.clone(),
            trace_id: record.trace_id.clone(),
        },
        remote_task: None,
        cancel: None,
        outcome: None,
        submitted_at: job.submitted_at,
    };
    env.ports.remote_start(task).await
}

/// What a child's session says about its task now.
pub(super) enum ChildState {
    /// Still working (or its task is on its way).
    Working,
    /// It never stored the task: send it again.
    Missing,
    /// It ended: the call's result.
    Ended(Box<ToolCallResult>),
}

/// Read the child's session (from the replicated log on a cluster) for its task's outcome.
pub(super) async fn poll(env: &TurnEnv, job: &AwaitedJob) -> ChildState {
    let Some(child) = &job.child else {
        return ChildState::Working;
    };
    if is_remote(env, &child.agent) {
        return match env.ports.remote_poll(&job.job_id).await {
            RemotePoll::Missing => ChildState::Missing,
            RemotePoll::Working => ChildState::Working,
            RemotePoll::Ended(o) => ChildState::Ended(Box::new(super::waiting::job_result(
                job,
                o.status,
                Some(o.output),
                o.error,
            ))),
        };
    }
    let loaded = env.store.load_synced(&child.agent, &child.session).await;
    let (messages, task) = match loaded {
        Ok((_, messages, task)) => (messages, task),
        Err(e) => {
            tracing::warn!(agent = %child.agent, session = %child.session, error = %e, "delegated session not readable now; waiting for its answer");
            return ChildState::Working;
        }
    };
    let Some(first) = messages.iter().find(|m| m.id == job.job_id) else {
        return ChildState::Missing;
    };
    match task.turn.as_ref().filter(|t| t.turn_id == first.turn_id) {
        Some(turn) if turn.phase.is_final() => {
            ChildState::Ended(Box::new(child_result(job, child, turn, &messages)))
        }
        _ => ChildState::Working,
    }
}

/// The result a child's finished turn enters the parent's conversation with.
fn child_result(
    job: &AwaitedJob,
    child: &ChildTask,
    turn: &TurnRecord,
    messages: &[StoredMessage],
) -> ToolCallResult {
    let answer = (turn.phase == TurnPhase::Answered)
        .then(|| messages.last().map(|m| m.message.content.clone()))
        .flatten();
    let outcome = Outcome {
        agent: child.agent.clone(),
        session: child.session.clone(),
        answer,
        error: turn.error.clone(),
        tokens: turn.tokens_used,
    };
    let (status, output, error) = outcome.parts();
    super::waiting::job_result(job, status, output, error)
}

/// A delegated turn's end, as its parent receives it.
pub(super) struct Outcome {
    pub agent: String,
    pub session: String,
    pub answer: Option<String>,
    pub error: Option<String>,
    pub tokens: u64,
}

impl Outcome {
    fn parts(&self) -> (JobStatus, Option<Value>, Option<ToolError>) {
        let output = json!({
            "agent": self.agent,
            "session": self.session,
            "answer": self.answer,
            "tokens": self.tokens,
        });
        match &self.answer {
            Some(_) => (JobStatus::Done, Some(output), None),
            None => {
                let reason = self
                    .error
                    .clone()
                    .unwrap_or_else(|| "no reason given".into());
                let error = ToolError::new(
                    ToolErrorCode::ExecutionFailed,
                    format!("agent `{}` could not finish the task: {reason}", self.agent),
                )
                .with_hint("answer with what you have, or try another way once");
                (JobStatus::Failed, Some(output), Some(error))
            }
        }
    }
}

/// Tell the parent turn this delegated turn ended (on `hermes.job.<id>`, which wakes it).
/// A lost report is covered by the parent reading this session when it resumes or its
/// deadline passes.
pub(super) async fn report(
    env: &TurnEnv,
    meta: &SessionMeta,
    parent: &ParentLink,
    record: &TurnRecord,
    answer: Option<&str>,
) {
    let outcome = Outcome {
        agent: meta.active_agent().to_string(),
        session: meta.session.clone(),
        answer: answer.map(str::to_string),
        error: record.error.clone(),
        tokens: record.tokens_used,
    };
    let (status, result, error) = outcome.parts();
    let event = JobEvent {
        job_id: parent.job_id.clone(),
        tool: AgentConfig::delegation_tool(meta.active_agent()),
        call_id: parent.call_id.clone(),
        agent: Some(parent.agent.clone()),
        session: Some(parent.session.clone()),
        user: Some(meta.user.clone()),
        turn_id: Some(parent.turn_id.clone()),
        status,
        progress: None,
        result,
        error,
    };
    let scope = crate::bus::events::EventScope {
        agent: parent.agent.clone(),
        session: parent.session.clone(),
        user: Some(meta.user.clone()),
        trace_id: record.trace_id.clone(),
        reader: crate::config::publishers::reader_of(&env.config.bus.publishers, Some(&meta.user)),
    };
    env.ports.publish_job_event(&scope, event).await;
}

/// The error result of a child that missed its deadline.
pub(super) fn timed_out(job: &AwaitedJob, child: &ChildTask) -> ToolCallResult {
    let waited = (Utc::now() - job.submitted_at).num_seconds().max(0);
    let error = ToolError::new(
        ToolErrorCode::Timeout,
        format!(
            "agent `{}` did not answer within {waited} s (agents.<name>.delegation_timeout_secs); \
             its task was cancelled",
            child.agent
        ),
    )
    .with_hint("answer with what you have and say what is missing");
    let mut result = super::waiting::job_result(job, JobStatus::Failed, None, Some(error));
    result.status = ToolStatus::Error;
    result
}

/// Ask every unfinished child of `record` to cancel its turn; the sessions told.
pub(super) async fn cancel_children(
    env: &TurnEnv,
    meta: &SessionMeta,
    record: &TurnRecord,
    reason: &str,
) -> Vec<String> {
    let mut told = Vec::new();
    for (job, child) in record.unfinished_children() {
        cancel_child(env, meta, record, job, reason).await;
        told.push(format!("{}.{}", child.agent, child.session));
    }
    // Tool jobs nobody waits for any more: work a backend runs for them (an MCP task) stops.
    for job in record.unfinished_jobs().filter(|j| j.child.is_none()) {
        env.ports.cancel_job(&job.job_id, reason).await;
    }
    // A job that ended with its MCP task's question: the task waits on its server for an
    // answer that will not come now.
    let asking_tasks = record
        .undecided()
        .filter_map(|c| c.input.as_ref()?.task_job.as_deref());
    for job_id in asking_tasks {
        env.ports.cancel_job(job_id, reason).await;
    }
    told
}

/// Ask one child session to cancel its turn (and, through it, its own children); a remote
/// agent, its task.
pub(super) async fn cancel_child(
    env: &TurnEnv,
    meta: &SessionMeta,
    record: &TurnRecord,
    job: &AwaitedJob,
    reason: &str,
) {
    let Some(child) = &job.child else {
        return;
    };
    if is_remote(env, &child.agent) {
        env.ports.remote_cancel(&job.job_id, reason).await;
        return;
    }
    let envelope = Envelope::request(Cancel {
        reason: Some(reason.to_string()),
    })
    .for_session(&child.agent, &child.session, Some(&meta.user))
    .in_trace(&record.trace_id);
    if let Err(e) = env.ports.send_cancel(envelope).await {
        tracing::warn!(agent = %child.agent, session = %child.session, error = %e, "delegated session not cancelled");
    }
}

/// The parent link a delegated message gives its turn.
pub fn parent_link(delegation: &Delegation) -> ParentLink {
    ParentLink {
        agent: delegation.parent_agent.clone(),
        session: delegation.parent_session.clone(),
        turn_id: delegation.parent_turn.clone(),
        call_id: delegation.call_id.clone(),
        job_id: delegation.job_id.clone(),
        chain: delegation.chain.clone(),
        token_budget: delegation.token_budget,
        deadline: delegation.deadline,
    }
}

/// The earliest deadline among the turn's unfinished children: when to look at them again
/// even if no answer arrives.
pub fn next_deadline(task: &TaskState) -> Option<chrono::DateTime<Utc>> {
    task.unfinished_turn()
        .into_iter()
        .chain(&task.parked)
        .flat_map(|t| t.unfinished_children().map(|(_, c)| c.deadline))
        .min()
}

/// The `agent.delegated` event of a child that was sent its task.
pub(super) fn delegated_event(turn_id: &str, job: &AwaitedJob) -> Option<TurnEvent> {
    let child = job.child.as_ref()?;
    Some(TurnEvent::AgentDelegated {
        turn_id: turn_id.to_string(),
        call_id: job.call_id.clone(),
        agent: child.agent.clone(),
        session: child.session.clone(),
        task: child.task.clone(),
    })
}
