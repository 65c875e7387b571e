//! The task layer of a session (DESIGN §4): the pinned goal, the history summary, and the
//! durable state of the turn in progress.
//!
//! Tree `tasks` (opened by [`super::sessions::SessionStore`]):
//! `<agent>\0<session>` → JSON [`TaskState`]. Written in the same flush as the messages of the
//! step that changed it, so after a crash the state and the log agree.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Where a turn is. Persisted at every step; a restarted process resumes any turn that is not
/// in a final state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    Answered,
    Failed,
}

impl TurnPhase {
    /// Is the turn over (nothing to resume)?
    pub fn is_final(self) -> bool {
        matches!(self, TurnPhase::Answered | TurnPhase::Failed)
    }
}

/// The turn in progress (or the last one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub turn_id: String,
    /// The user message that started it.
    pub message_id: String,
    pub trace_id: String,
    pub phase: TurnPhase,
    /// Planning steps used so far.
    pub step: u32,
    pub updated_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Everything about a session's task that is not a message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskState {
    /// The task goal, pinned into every context and never cut: the session's first user
    /// message unless a message sets one explicitly.
    #[serde(default)]
    pub goal: Option<String>,
    /// Older turns folded into a summary by the summariser model.
    #[serde(default)]
    pub summary: String,
    /// Messages with `seq` below this are covered by `summary`.
    #[serde(default)]
    pub summary_upto: u64,
    #[serde(default)]
    pub summary_tokens: u32,
    #[serde(default)]
    pub goal_tokens: u32,
    #[serde(default)]
    pub turn: Option<TurnRecord>,
    /// Identifiers pulled from tool results (`order_id=…`), shown to the model as key facts.
    #[serde(default)]
    pub key_facts: Vec<String>,
}

impl TaskState {
    /// A turn that a restart must pick up.
    pub fn unfinished_turn(&self) -> Option<&TurnRecord> {
        self.turn.as_ref().filter(|t| !t.phase.is_final())
    }
}
