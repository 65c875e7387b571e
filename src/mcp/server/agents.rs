//! Hermes agents as MCP tools (`[mcp.server] expose_agents`): one tool per agent, named as
//! the agent, taking `{task, session?}`. A call sends the task as the caller's user's message
//! to the agent's session (the one named, else a new one) over the bus — wherever the session
//! runs — and either waits for the turn's answer (an ordinary, long call result) or, for a
//! client that negotiated the tasks extension, answers at once with a task ([`super::agent_tasks`]).
//!
//! A turn is read back as the A2A side reads it ([`crate::a2a::tasks`]): one mapping of turn
//! phases to task states for both protocols.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::auth::Principal;
use super::ServerDeps;
use crate::a2a::ids;
use crate::a2a::server::follow::{ends_stream, Follow};
use crate::a2a::sessions::{SessionsError, Snapshot};
use crate::a2a::tasks::{self, TurnTask};
use crate::a2a::wire::TaskState;
use crate::bus::Subscription;
use crate::protocol::subjects::check_id;

/// The arguments of an agent's tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentArgs {
    /// The task for the agent, in words (as a user would write it in a chat).
    pub task: String,
    /// A session of yours to continue (the `session` of an earlier answer); leave it out for a
    /// new conversation.
    #[serde(default)]
    pub session: Option<String>,
}

/// Why a call to an agent could not start or be followed.
#[derive(Debug, thiserror::Error)]
pub enum AgentCallError {
    #[error("the arguments of agent tool `{agent}` are not valid: {reason}; give {{\"task\": \"<what to do>\"}} and optionally \"session\"")]
    Arguments { agent: String, reason: String },
    #[error(
        "`{session}` cannot be a session id: {reason}; leave `session` out to start a new one"
    )]
    BadSession { session: String, reason: String },
    #[error("session `{session}` of agent `{agent}` belongs to another user; leave `session` out to start a new one")]
    NotYours { agent: String, session: String },
    #[error("agent `{agent}` could not take the task: {source}")]
    Sessions {
        agent: String,
        #[source]
        source: SessionsError,
    },
    #[error("the session service accepted the task without naming its turn; it runs an older Hermes: upgrade it")]
    NoTurn,
}

/// A turn an agent tool call started.
pub(super) struct Started {
    pub agent: String,
    pub session: String,
    pub turn_id: String,
    /// The session's events, subscribed before the message was sent.
    pub events: Subscription,
}

impl Started {
    /// The id of its MCP task.
    pub fn task_id(&self) -> String {
        task_id(&self.agent, &self.session, &self.turn_id)
    }
}

/// The MCP task id of turn `turn` of `agent`'s session `session`: `<agent>.<session>.<turn>`
/// (a dot never occurs in a Hermes id, so any process finds the turn from the id alone).
pub fn task_id(agent: &str, session: &str, turn: &str) -> String {
    format!("{agent}.{}", ids::task_id(session, turn))
}

/// The agent, session and turn an MCP task id names.
pub fn parse_task_id(id: &str) -> Option<(&str, &str, &str)> {
    let (agent, rest) = id.split_once('.')?;
    check_id("agent", agent).ok()?;
    let (session, turn) = ids::parse_task_id(rest)?;
    Some((agent, session, turn))
}

/// Whether `name` is an exposed agent.
pub(super) fn offered(deps: &ServerDeps, name: &str) -> bool {
    deps.expose_agents.iter().any(|(agent, _)| agent == name)
}

/// One tool per exposed agent.
pub(super) fn tools(deps: &ServerDeps) -> Vec<Tool> {
    let schema = rmcp::handler::server::common::schema_for_type::<AgentArgs>();
    deps.expose_agents
        .iter()
        .map(|(agent, description)| {
            let about = if description.is_empty() {
                format!("Hermes agent `{agent}`")
            } else {
                description.clone()
            };
            Tool::new(
                agent.clone(),
                format!(
                    "{about}. Give it a task in words; it works on it as a turn of a Hermes \
                     session (pass `session` to continue one) and answers in text. May take \
                     minutes: a client with the tasks extension gets a task to follow."
                ),
                Arc::clone(&schema),
            )
        })
        .collect()
}

/// The arguments of a call to `agent`'s tool.
pub(super) fn parse(agent: &str, arguments: Value) -> Result<AgentArgs, AgentCallError> {
    let args: AgentArgs =
        serde_json::from_value(arguments).map_err(|e| AgentCallError::Arguments {
            agent: agent.to_owned(),
            reason: e.to_string(),
        })?;
    if args.task.trim().is_empty() {
        return Err(AgentCallError::Arguments {
            agent: agent.to_owned(),
            reason: "`task` is empty".into(),
        });
    }
    Ok(args)
}

/// Send the task to `agent` as `who`'s message: a turn in the named session (one of
/// `who`'s) or a new one.
pub(super) async fn start(
    deps: &ServerDeps,
    who: &Principal,
    agent: &str,
    args: AgentArgs,
) -> Result<Started, AgentCallError> {
    let sessions_error = |source| AgentCallError::Sessions {
        agent: agent.to_owned(),
        source,
    };
    let session = match args.session.filter(|s| !s.is_empty()) {
        Some(session) => {
            check_id("session", &session).map_err(|e| AgentCallError::BadSession {
                session: session.clone(),
                reason: e.to_string(),
            })?;
            let existing = deps
                .sessions
                .load(agent, &session)
                .await
                .map_err(sessions_error)?;
            if existing.is_some_and(|s| s.detail.summary.user != who.user) {
                return Err(AgentCallError::NotYours {
                    agent: agent.to_owned(),
                    session,
                });
            }
            session
        }
        None => ids::new_context_id(),
    };
    let events = deps
        .sessions
        .events(agent, &session)
        .await
        .map_err(sessions_error)?;
    let envelope = uuid::Uuid::now_v7().to_string();
    let accepted = deps
        .sessions
        .send(agent, &session, &who.user, &envelope, &args.task)
        .await
        .map_err(sessions_error)?;
    let turn_id = accepted.turn_id.ok_or(AgentCallError::NoTurn)?;
    Ok(Started {
        agent: agent.to_owned(),
        session,
        turn_id,
        events,
    })
}

/// `who`'s session `session` of `agent`; none when it does not exist or is another user's.
pub(super) async fn owned(
    deps: &ServerDeps,
    who: &Principal,
    agent: &str,
    session: &str,
) -> Result<Option<Snapshot>, SessionsError> {
    let snapshot = deps.sessions.load(agent, session).await?;
    Ok(snapshot.filter(|s| s.detail.summary.user == who.user))
}

/// The turn as it is stored now; `None` before the session stored anything of it.
pub(super) async fn read_turn(
    deps: &ServerDeps,
    who: &Principal,
    agent: &str,
    session: &str,
    turn: &str,
) -> Result<Option<TurnTask>, SessionsError> {
    let snapshot = owned(deps, who, agent, session).await?;
    Ok(snapshot.and_then(|snapshot| tasks::turn(&snapshot, turn)))
}

/// The stored turn once it shows `state` (its events can run ahead of what is stored), or as
/// it is after a short grace.
pub(super) async fn settled_turn(
    deps: &ServerDeps,
    who: &Principal,
    started: (&str, &str, &str),
    state: Option<&TaskState>,
) -> Result<TurnTask, SessionsError> {
    let (agent, session, turn) = started;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let task = read_turn(deps, who, agent, session, turn).await?;
        let done = match (&task, state) {
            (Some(task), Some(state)) => task.state == *state,
            (Some(task), None) => ends_stream(&task.state),
            (None, _) => false,
        };
        if done || tokio::time::Instant::now() >= deadline {
            return Ok(
                task.unwrap_or_else(|| TurnTask::starting(session, turn, TaskState::Submitted))
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait (up to the configured time) for the turn to end or ask for input, and answer the
/// call with it: the answer, or an error result that says what happened and what to do.
pub(super) async fn answer(
    deps: &ServerDeps,
    who: &Principal,
    started: Started,
) -> Result<CallToolResult, AgentCallError> {
    let Started {
        agent,
        session,
        turn_id,
        events,
    } = started;
    let deadline = tokio::time::Instant::now() + deps.agent_call_timeout;
    let follow = Follow {
        sessions: &deps.sessions,
        agent: &agent,
        session: &session,
        turn_id: &turn_id,
        events,
    };
    follow.run(None, deadline).await;
    let task = settled_turn(deps, who, (&agent, &session, &turn_id), None)
        .await
        .map_err(|source| AgentCallError::Sessions {
            agent: agent.clone(),
            source,
        })?;
    Ok(call_result(&agent, &task))
}

/// A turn as a `tools/call` result: the answer, with `{agent, session, answer}` as
/// structured content, or an error result saying why there is none.
pub(super) fn call_result(agent: &str, task: &TurnTask) -> CallToolResult {
    let session = &task.session;
    match (&task.state, &task.answer) {
        (TaskState::Completed, Some((_, answer))) => {
            let mut result = CallToolResult::success(vec![ContentBlock::text(answer.clone())]);
            result.structured_content = Some(serde_json::json!({
                "agent": agent,
                "session": session,
                "answer": answer,
            }));
            result
        }
        (TaskState::InputRequired, _) => CallToolResult::error(vec![ContentBlock::text(format!(
            "agent `{agent}` waits for a confirmation in session `{session}`: {} A client \
             with the tasks extension can answer it (tasks/update); this call cannot.",
            task.status_text.clone().unwrap_or_default()
        ))]),
        (TaskState::Canceled, _) => CallToolResult::error(vec![ContentBlock::text(format!(
            "agent `{agent}` did not finish: the turn was cancelled ({})",
            task.status_text
                .clone()
                .unwrap_or_else(|| "no reason given".into())
        ))]),
        (TaskState::Failed | TaskState::Rejected, _) => {
            CallToolResult::error(vec![ContentBlock::text(format!(
                "agent `{agent}` failed: {}",
                task.status_text
                    .clone()
                    .unwrap_or_else(|| "the turn ended without an answer".into())
            ))])
        }
        _ => CallToolResult::error(vec![ContentBlock::text(format!(
            "agent `{agent}` is still working on it in session `{session}` after the wait \
             ([mcp.server] agent_call_timeout_secs); call it again with that session later, \
             or use a client with the tasks extension to follow it"
        ))]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_id_names_agent_session_and_turn() {
        let id = task_id("triage", "s-1", "t-1");
        assert_eq!(parse_task_id(&id), Some(("triage", "s-1", "t-1")));
        assert_eq!(parse_task_id("s-1.t-1"), None);
        assert_eq!(parse_task_id("nodots"), None);
    }

    #[test]
    fn arguments_need_a_task_and_nothing_unknown() {
        assert!(parse("a", serde_json::json!({"task": "do it"})).is_ok());
        assert!(parse("a", serde_json::json!({"task": " "})).is_err());
        assert!(parse("a", serde_json::json!({"task": "x", "other": 1})).is_err());
        let error = parse("a", serde_json::json!({})).unwrap_err().to_string();
        assert!(error.contains("task"), "{error}");
    }
}
