//! Sessions on the wire: inbound user messages and confirmations with their acknowledgements,
//! planning and summarising requests, session search, and every turn event published on
//! `hermes.out.<agent>.<session>.<reader>`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chat::{ChatMessage, Role, ToolCall, ToolSpec, Usage};
use super::memory::MemoryChange;
use super::tool::ToolCallResult;

/// A user message (or an external event phrased as one) for `hermes.in.<agent>.<session>`.
/// The user is the envelope's `user`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UserMessage {
    pub text: String,
    /// Set when another agent's turn delegated this task: the child session's turn reports
    /// its answer to that turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation: Option<Box<Delegation>>,
    /// A subject on which the turn's answer is published as well (a trigger's `reply_subject`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_to: Option<String>,
    /// The trigger that turned an event into this message (its id is the event's, so a
    /// repeated event is recognised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// The sender may send this message again with the same envelope id (an A2A client
    /// retrying `SendMessage` uses its `messageId`): an id already in the session's log is
    /// acknowledged again, not accepted twice.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resendable: bool,
}

impl UserMessage {
    /// A plain message from a user.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            delegation: None,
            answer_to: None,
            trigger: None,
            resendable: false,
        }
    }
}

/// The parent turn a delegated task belongs to: where the child's answer goes, how deep the
/// delegation chain is, and what the child may spend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Delegation {
    pub parent_agent: String,
    pub parent_session: String,
    pub parent_turn: String,
    /// The parent's `agent__<name>` call.
    pub call_id: String,
    /// The id the parent waits on (`hermes.job.<id>` carries the child's answer).
    pub job_id: String,
    /// Agents from the first turn down to the parent, in order (cycles are refused).
    pub chain: Vec<String>,
    /// Tokens the child may still spend of the parent task's budget; none: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// When the parent stops waiting.
    pub deadline: chrono::DateTime<chrono::Utc>,
}

/// Stop a session's turn in progress (and the turns it delegated to), sent like a message to
/// `hermes.in.<agent>.<session>` with kind `user.cancel`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cancel {
    /// Why, shown in the turn's error event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The reply to a `user.cancel`: the turns that were stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CancelAccepted {
    /// The session's turn that was cancelled; none when nothing was running.
    pub turn_id: Option<String>,
    /// Delegated sessions told to cancel as well.
    pub children: Vec<String>,
}

/// The reply to a request on `hermes.in…`: the message is persisted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Accepted {
    pub message_id: String,
    pub session: String,
    /// Position of the message in the session's log.
    pub seq: u64,
    /// The turn the message started (or, sent again, started the first time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

/// The user's answer to `confirmation.required`, sent like a message to
/// `hermes.in.<agent>.<session>` with kind `user.confirmation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Confirmation {
    /// `true` runs the call, `false` declines it (the model is told the user said no).
    pub approve: bool,
    /// The call to decide; absent decides every call the turn waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// For a call whose MCP server asked a question (`confirmation.required` with
    /// `questions`): the answer to send with the approval — the form's content for one
    /// question, an object keyed by question for several. Absent: each form's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
}

/// The reply to a `user.confirmation`: the decision is persisted and the turn resumes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfirmationAccepted {
    pub turn_id: String,
    pub call_ids: Vec<String>,
    pub approve: bool,
}

/// One planning step.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanRequest {
    pub turn_id: String,
    pub step: u32,
    /// The context for this step, oldest first.
    // Shared with the session's own copy of its history rather than copied; plain messages on
    // the wire.
    pub messages: Vec<Arc<ChatMessage>>,
    // Shared by every step of a turn: a tool's JSON Schema is not copied per step.
    pub tools: Arc<[ToolSpec]>,
    /// Where to publish `delta` events while the model streams (the session's out subject).
    #[serde(default)]
    pub stream_to: Option<String>,
    /// The `[models.<name>]` entry to plan with (the agent's `model`); none: the planner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanReply {
    pub text: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub usage: Option<Usage>,
    pub model: String,
    /// What the provider needs back with this reply on its next request (kept beside the
    /// stored message).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<crate::chat::ProviderPart>,
    /// The reasoning text the provider showed, when it reported no reasoning tokens.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
}

/// A recalled memory as shown in the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecalledMemory {
    pub key: String,
    pub content: String,
    pub score: f64,
}

/// Everything published on `hermes.out.<agent>.<session>.<reader>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TurnEvent {
    #[serde(rename = "turn.started")]
    TurnStarted { turn_id: String, message_id: String },
    #[serde(rename = "memory.recalled")]
    MemoryRecalled {
        turn_id: String,
        memories: Vec<RecalledMemory>,
    },
    #[serde(rename = "delta")]
    Delta { turn_id: String, text: String },
    #[serde(rename = "tool.call")]
    ToolCall {
        turn_id: String,
        call_id: String,
        name: String,
        arguments: Value,
    },
    #[serde(rename = "tool.result")]
    ToolResult {
        turn_id: String,
        result: ToolCallResult,
    },
    /// A `risk = high` call waits for the user: answer with a `user.confirmation`
    /// (`hermes send --confirm` / `--deny`). The turn is in `waiting_user` until then.
    #[serde(rename = "confirmation.required")]
    ConfirmationRequired {
        turn_id: String,
        call_id: String,
        name: String,
        arguments: Value,
        /// What will happen, for the person who decides.
        message: String,
        /// Set when the call's MCP server asks the user something before it goes on: answer
        /// with a `user.confirmation` that approves with the `content`, or declines.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        questions: Vec<super::mcp::McpQuestion>,
    },
    /// An async tool's job runs; the turn is in `waiting_job` and continues by itself when
    /// the job's completion arrives on `hermes.job.<id>`.
    #[serde(rename = "job.waiting")]
    JobWaiting {
        turn_id: String,
        call_id: String,
        name: String,
        job_id: String,
    },
    /// Another agent works on a task of this turn in its own session; its answer comes back
    /// as the call's `tool.result`, and the turn is in `waiting_agents` until then.
    #[serde(rename = "agent.delegated")]
    AgentDelegated {
        turn_id: String,
        call_id: String,
        agent: String,
        session: String,
        task: String,
    },
    /// A paused turn goes on: its job or delegated agent finished, or its wait timed out.
    #[serde(rename = "turn.resumed")]
    TurnResumed { turn_id: String, reason: String },
    /// The conversation now goes to another agent (`handoff`).
    #[serde(rename = "agent.handoff")]
    Handoff {
        turn_id: String,
        from: String,
        to: String,
        reason: String,
    },
    #[serde(rename = "answer")]
    Answer { turn_id: String, text: String },
    #[serde(rename = "memory.written")]
    MemoryWritten {
        turn_id: String,
        changes: Vec<MemoryChange>,
    },
    #[serde(rename = "error")]
    Error {
        #[serde(default)]
        turn_id: Option<String>,
        code: String,
        message: String,
    },
}

impl TurnEvent {
    /// The event's type name as it appears in the JSON (`turn.started`, `answer`, …).
    pub fn type_name(&self) -> &'static str {
        match self {
            TurnEvent::TurnStarted { .. } => "turn.started",
            TurnEvent::MemoryRecalled { .. } => "memory.recalled",
            TurnEvent::Delta { .. } => "delta",
            TurnEvent::ToolCall { .. } => "tool.call",
            TurnEvent::ToolResult { .. } => "tool.result",
            TurnEvent::ConfirmationRequired { .. } => "confirmation.required",
            TurnEvent::JobWaiting { .. } => "job.waiting",
            TurnEvent::AgentDelegated { .. } => "agent.delegated",
            TurnEvent::TurnResumed { .. } => "turn.resumed",
            TurnEvent::Handoff { .. } => "agent.handoff",
            TurnEvent::Answer { .. } => "answer",
            TurnEvent::MemoryWritten { .. } => "memory.written",
            TurnEvent::Error { .. } => "error",
        }
    }

    /// The turn the event belongs to (an `error` may come before any turn started).
    pub fn turn_id(&self) -> Option<&str> {
        match self {
            TurnEvent::TurnStarted { turn_id, .. }
            | TurnEvent::MemoryRecalled { turn_id, .. }
            | TurnEvent::Delta { turn_id, .. }
            | TurnEvent::ToolCall { turn_id, .. }
            | TurnEvent::ToolResult { turn_id, .. }
            | TurnEvent::ConfirmationRequired { turn_id, .. }
            | TurnEvent::JobWaiting { turn_id, .. }
            | TurnEvent::AgentDelegated { turn_id, .. }
            | TurnEvent::TurnResumed { turn_id, .. }
            | TurnEvent::Handoff { turn_id, .. }
            | TurnEvent::Answer { turn_id, .. }
            | TurnEvent::MemoryWritten { turn_id, .. } => Some(turn_id),
            TurnEvent::Error { turn_id, .. } => turn_id.as_deref(),
        }
    }
}

/// Several events of one turn that left together — a step's, or those held for the turn's
/// `accepted` — as the body of one `turn.events` envelope on
/// `hermes.out.<agent>.<session>.<reader>`: one message instead of one per event. A subscriber
/// reads them in order, as if each had come in a `turn.event` envelope of its own
/// ([`crate::envelope::Envelope::decode_events`] reads either kind).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnEvents {
    pub events: Vec<TurnEvent>,
}

/// Fold older turns into the running summary, on `hermes.summarise`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SummariseRequest {
    /// The summary so far (empty at first).
    pub previous: String,
    /// The turns to fold in, oldest first.
    // Shared with the session's history, as `PlanRequest::messages` is.
    pub messages: Vec<Arc<ChatMessage>>,
    /// The pinned goal, so the summary keeps what matters for it.
    #[serde(default)]
    pub goal: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SummariseReply {
    pub summary: String,
}

/// Search a user's past messages, on `hermes.sessions.search`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionSearchRequest {
    pub user: String,
    pub query: String,
    #[serde(default = "default_search_limit")]
    pub limit: usize,
}

fn default_search_limit() -> usize {
    5
}

/// One message found by a session search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionHit {
    pub agent: String,
    pub session: String,
    pub seq: u64,
    pub role: Role,
    pub ts: chrono::DateTime<chrono::Utc>,
    pub text: String,
    pub score: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionSearchReply {
    pub hits: Vec<SessionHit>,
}
