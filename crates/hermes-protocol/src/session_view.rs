//! Stored sessions as a reader sees them, on the wire: `hermes.sessions.list` (a page of
//! [`SessionSummary`], newest first) and `hermes.sessions.show` (one session's
//! [`SessionDetail`] and a page of its messages). Read-only; `hermes sessions ls|show` prints
//! these whether it asked a running deployment or read a stopped data directory, so both
//! paths print the same.
//!
//! Long answers come in pages that fit under the bus' payload limit: a list page ends with
//! `next_offset`, a message page with `next_seq`; ask again from there.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::chat::{ChatMessage, Usage};

/// Sessions a list page holds when the request names no `limit`.
pub const DEFAULT_LIST_PAGE: usize = 100;

/// List stored sessions, newest first, on `hermes.sessions.list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionListRequest {
    /// Only this user's sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Only this agent's sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Sessions to skip (newest first): the previous page's `next_offset`.
    #[serde(default)]
    pub offset: usize,
    /// Most sessions in this page (0: [`DEFAULT_LIST_PAGE`]); fewer come back when they would
    /// not fit in one reply.
    #[serde(default)]
    pub limit: usize,
}

/// A page of sessions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionListReply {
    pub sessions: Vec<SessionSummary>,
    /// Sessions that match the request's filters, on every page.
    pub total: usize,
    /// Where the next page starts; none when this page is the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

/// One stored session in a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionSummary {
    pub agent: String,
    pub session: String,
    pub user: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Messages stored.
    pub messages: u64,
    /// The agent that answers the session's messages now (another one after a handoff).
    pub active_agent: String,
    /// The state of its current (or last) turn — none before the first turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<TurnPhase>,
}

/// One session with a page of its messages, on `hermes.sessions.show`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionShowRequest {
    pub agent: String,
    pub session: String,
    /// The first message of the page (a previous page's `next_seq`).
    #[serde(default)]
    pub from_seq: u64,
    /// Most messages in this page (0: as many as fit in one reply).
    #[serde(default)]
    pub limit: usize,
}

/// A session and a page of its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionShowReply {
    pub session: SessionDetail,
    /// Messages from the request's `from_seq`, in order.
    pub messages: Vec<SessionMessage>,
    /// Where the next page starts; none when this page holds the last message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_seq: Option<u64>,
}

/// Everything about a session that is not a message: the conversation's owner and handoffs,
/// and the task layer — pinned goal, history summary, key facts, the turn in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionDetail {
    #[serde(flatten)]
    pub summary: SessionSummary,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handoffs: Vec<HandoffView>,
    /// The pinned task goal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    /// Older turns folded into a summary (empty when none were).
    #[serde(default)]
    pub history_summary: String,
    /// Messages with a `seq` below this are covered by `history_summary`.
    #[serde(default)]
    pub summary_upto: u64,
    /// Identifiers pulled from tool results (`order_id=…`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_facts: Vec<String>,
    /// The current (or last) turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnView>,
    /// Earlier turns still waiting for jobs or agents while a newer one talks with the user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parked: Vec<TurnView>,
    /// Messages a session process kept aside when its cache diverged from the replicated log
    /// (the log won), and where they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<SetAsideView>,
}

/// Local messages kept aside because the replicated log disagreed with them and won.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetAsideView {
    pub at: DateTime<Utc>,
    pub messages: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    pub kept_in: String,
}

/// The conversation handed from one agent to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HandoffView {
    pub from: String,
    pub to: String,
    pub reason: String,
    pub turn_id: String,
    pub at: DateTime<Utc>,
}

/// A turn's durable state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnView {
    pub turn_id: String,
    pub message_id: String,
    pub phase: TurnPhase,
    /// Planning steps used.
    pub step: u32,
    pub updated_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A failed turn was cancelled rather than failing on an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// Tokens the task used, its delegated agents' included.
    #[serde(default)]
    pub tokens_used: u64,
    /// The turn of another agent this one works for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentView>,
    /// Async jobs and delegated tasks of the current step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<JobView>,
    /// High-risk calls and the user's decision on each (none: undecided).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confirmations: Vec<ConfirmationView>,
}

/// The parent turn of a delegated turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ParentView {
    pub agent: String,
    pub session: String,
    pub turn_id: String,
    /// Agents from the first turn down to the parent.
    pub chain: Vec<String>,
}

/// An async job (or a delegated task) a turn waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobView {
    pub call_id: String,
    pub tool: String,
    pub job_id: String,
    /// Its final result arrived.
    pub done: bool,
    /// Set when the job is another agent's turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<ChildView>,
}

/// A task delegated to another agent, in a session of its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChildView {
    pub agent: String,
    pub session: String,
    pub deadline: DateTime<Utc>,
}

/// A high-risk call, or a call whose MCP server asked the user something, and the user's
/// decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfirmationView {
    pub call_id: String,
    pub tool: String,
    /// `approved`, `denied`, or none while the user has not decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// What the call's MCP server asks (empty for a high-risk call's confirmation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<super::mcp::McpQuestion>,
}

/// One stored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionMessage {
    pub seq: u64,
    pub id: String,
    pub turn_id: String,
    pub ts: DateTime<Utc>,
    /// Tokens by the session model's tokenizer.
    pub tokens: u32,
    /// What the provider reported for the model call that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    pub message: ChatMessage,
}

/// Where a turn is. Persisted at every step; a restarted process resumes any turn that is not
/// in a final state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnPhase {
    /// The user message is stored and acknowledged; nothing else happened yet.
    Received,
    /// A model call is (or was, at the crash) in progress.
    Planning,
    /// The model asked for tools; results are being collected.
    AwaitingTools,
    /// Waiting for an async job's completion event.
    WaitingJob,
    /// Waiting for the user to confirm a high-risk call.
    WaitingUser,
    /// Waiting for the agents it delegated tasks to.
    WaitingAgents,
    Answered,
    Failed,
}

impl TurnPhase {
    /// The phase as it is stored and shown (`waiting_job`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            TurnPhase::Received => "received",
            TurnPhase::Planning => "planning",
            TurnPhase::AwaitingTools => "awaiting_tools",
            TurnPhase::WaitingJob => "waiting_job",
            TurnPhase::WaitingUser => "waiting_user",
            TurnPhase::WaitingAgents => "waiting_agents",
            TurnPhase::Answered => "answered",
            TurnPhase::Failed => "failed",
        }
    }

    /// Is the turn over (nothing to resume)?
    pub fn is_final(self) -> bool {
        matches!(self, TurnPhase::Answered | TurnPhase::Failed)
    }
}

impl std::fmt::Display for TurnPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
