//! The task layer of a session (DESIGN §4): the pinned goal, the history summary, and the
//! durable state of the turn in progress.
//!
//! Stored in the session's record (tree `sessions`, see [`super::sessions`]) beside its
//! metadata, written after the messages of the step that changed it and in the same flush, so
//! after a crash the state and the log agree. Earlier versions kept it in a tree of its own,
//! `tasks`, read until each session's record takes it in.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::tool_result::StoredToolResult;

pub use crate::protocol::session_view::TurnPhase;

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
    #[serde(with = "crate::protocol::timestamp")]
    pub updated_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The turn failed because it was cancelled (`TurnError::Cancelled`), not by an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// High-risk calls of the current step and the user's decision on each (`waiting_user`
    /// while one is undecided).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confirmations: Vec<PendingConfirmation>,
    /// Async jobs the current step submitted, with their final result once it arrived
    /// (`waiting_job` while one has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<AwaitedJob>,
    /// The answered turn's transcript is on the extraction queue (the last step of a turn;
    /// an answered turn without it is finished at start-up).
    #[serde(default = "already_queued")]
    pub extraction_queued: bool,
    /// The session inbox item (its sequence) that brought the turn's message, when the turn
    /// answered while that item was still unacked. The item is acked only after the answer
    /// left and the extraction was queued (or carried by the answer's own append, with
    /// `extraction_queued` set in the same record), so no note follows the answer: an
    /// answered turn with this set is finished unless the inbox still holds the item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbox_item: Option<u64>,
    /// Tokens this task used: its own model calls and its delegated agents' turns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tokens_used: u64,
    /// The turn this one works for, when another agent delegated it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
    /// A subject the answer is published on as well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_to: Option<String>,
    /// The W3C trace context of the turn's first `invoke_agent` span, when traces are
    /// exported: a resumed turn (a job ended, the user confirmed, a restart) continues it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The parent turn of a delegated turn (the sled form of the wire `Delegation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParentLink {
    pub agent: String,
    pub session: String,
    pub turn_id: String,
    pub call_id: String,
    pub job_id: String,
    /// Agents from the first turn down to the parent.
    pub chain: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    pub deadline: DateTime<Utc>,
}

/// Records written before this flag existed were queued when they were answered.
fn already_queued() -> bool {
    true
}

impl TurnRecord {
    /// A new turn, just received.
    pub fn received(turn_id: String, message_id: String, trace_id: String) -> Self {
        Self {
            turn_id,
            message_id,
            trace_id,
            phase: TurnPhase::Received,
            step: 0,
            updated_at: Utc::now(),
            error: None,
            cancelled: false,
            confirmations: Vec::new(),
            jobs: Vec::new(),
            extraction_queued: false,
            inbox_item: None,
            tokens_used: 0,
            parent: None,
            answer_to: None,
            traceparent: None,
        }
    }

    /// The confirmation entry of a call, if the call needed one.
    pub fn confirmation(&self, call_id: &str) -> Option<&PendingConfirmation> {
        self.confirmations.iter().find(|c| c.call_id == call_id)
    }

    /// Calls still waiting for the user's decision.
    pub fn undecided(&self) -> impl Iterator<Item = &PendingConfirmation> {
        self.confirmations.iter().filter(|c| c.decision.is_none())
    }

    /// The awaited job of a call, if the call submitted one.
    pub fn job_of(&self, call_id: &str) -> Option<&AwaitedJob> {
        self.jobs.iter().find(|j| j.call_id == call_id)
    }

    pub fn job_of_mut(&mut self, call_id: &str) -> Option<&mut AwaitedJob> {
        self.jobs.iter_mut().find(|j| j.call_id == call_id)
    }

    /// Jobs and delegated tasks whose completion has not arrived yet.
    pub fn unfinished_jobs(&self) -> impl Iterator<Item = &AwaitedJob> {
        self.jobs.iter().filter(|j| j.result.is_none())
    }

    /// Delegated tasks whose answer has not arrived yet.
    pub fn unfinished_children(&self) -> impl Iterator<Item = (&AwaitedJob, &ChildTask)> {
        self.unfinished_jobs()
            .filter_map(|j| j.child.as_ref().map(|c| (j, c)))
    }
}

/// The user's answer to a confirmation request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approved,
    Denied,
}

/// A `risk = high` call that runs only once the user approves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingConfirmation {
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    pub asked_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// The id of the `user.confirmation` envelope that decided it: the same envelope sent
    /// again is acknowledged again, not refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// Set when the call's MCP server asked the user something (`input_required`): the
    /// decision answers it (approved: with `content`), and the call runs again with that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<PendingInput>,
    /// The approving user's answer to `input` (none: each form's defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
}

/// What a call's MCP server asked the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingInput {
    pub asked: crate::protocol::McpInputRequired,
    /// The rounds of questions this call has had, this one included.
    pub round: u32,
    /// The envelopes that answered earlier rounds: one sent again is acknowledged again, not
    /// taken for this round's answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answered_by: Vec<String>,
    /// The job that followed the MCP task which asks (a task's question, not a call's): its
    /// task waits on the server, and is cancelled with the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_job: Option<String>,
}

/// An async job a call submitted; the turn continues when every such job has a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AwaitedJob {
    pub call_id: String,
    pub tool: String,
    pub job_id: String,
    pub submitted_at: DateTime<Utc>,
    /// The final result (`done` or `failed`), as it enters the conversation. Once it is in
    /// the conversation only a stub stays ([`StoredToolResult::taken`]): every later save of
    /// the task would otherwise write it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<StoredToolResult>,
    /// Set when the "job" is another agent's turn (an `agent__<name>` call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<ChildTask>,
}

/// A task delegated to another agent: its own session, whose first message is the task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildTask {
    pub agent: String,
    pub session: String,
    /// The task as sent (sent again if the child never received it).
    pub task: String,
    /// When the parent stops waiting and cancels the child.
    pub deadline: DateTime<Utc>,
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
    /// Earlier turns that wait for their jobs or delegated agents while a newer turn talks
    /// with the user; each goes on when its work ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parked: Vec<TurnRecord>,
    /// A turn was ever parked: the log may hold turns whose messages interleave.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interleaved: bool,
    /// Identifiers pulled from tool results (`order_id=…`), shown to the model as key facts.
    #[serde(default)]
    pub key_facts: Vec<String>,
    /// The last `user.cancel` handled and what it stopped: the same envelope sent again gets
    /// the same answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cancel: Option<CancelRecord>,
    /// For a model whose tokenizer Hermes does not know: the prompt tokens the provider
    /// reported per token Hermes counted, learnt from this session's usage
    /// ([`crate::context::calibrate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_scale: Option<f64>,
}

/// A handled `user.cancel`: its envelope id, the turn it stopped and the child sessions told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CancelRecord {
    pub envelope_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<String>,
}

impl TaskState {
    /// A turn that a restart must pick up.
    pub fn unfinished_turn(&self) -> Option<&TurnRecord> {
        self.turn.as_ref().filter(|t| !t.phase.is_final())
    }

    /// An unfinished turn that can make progress by itself: every turn except one that waits
    /// for the user to decide on a high-risk call.
    pub fn resumable_turn(&self) -> Option<&TurnRecord> {
        self.unfinished_turn()
            .filter(|t| !(t.phase == TurnPhase::WaitingUser && t.undecided().next().is_some()))
    }

    /// An answered turn whose transcript still has to go onto the extraction queue.
    pub fn pending_extraction(&self) -> Option<&TurnRecord> {
        self.extraction_unnoted()
            .filter(|t| t.inbox_item.is_none() && !t.extraction_queued)
    }

    /// An answered turn not noted as finished: its extraction is pending
    /// ([`Self::pending_extraction`]), or it answered while its inbox item was held, and only
    /// the inbox can tell whether the item was acked after the answer left (and the extraction
    /// was queued, when the answer's append did not carry it): [`TurnRecord::inbox_item`].
    pub fn extraction_unnoted(&self) -> Option<&TurnRecord> {
        self.turn.as_ref().filter(|t| {
            t.phase == TurnPhase::Answered && (!t.extraction_queued || t.inbox_item.is_some())
        })
    }

    /// The unfinished turn, to change its waiting state.
    pub fn unfinished_turn_mut(&mut self) -> Option<&mut TurnRecord> {
        self.turn.as_mut().filter(|t| !t.phase.is_final())
    }

    /// Move the turn in progress aside when it only waits for jobs or delegated agents, so a
    /// new message can start a turn of its own; false when it is doing something else.
    pub fn park_waiting(&mut self) -> bool {
        let parkable = self
            .turn
            .as_ref()
            .is_some_and(|t| matches!(t.phase, TurnPhase::WaitingJob | TurnPhase::WaitingAgents));
        if parkable {
            self.parked.extend(self.turn.take());
            self.interleaved = true;
        }
        parkable
    }

    /// The turn (current or parked) that awaits `job_id`.
    pub fn turn_awaiting(&self, job_id: &str) -> Option<&TurnRecord> {
        self.turn
            .iter()
            .chain(&self.parked)
            .filter(|t| !t.phase.is_final())
            .find(|t| t.unfinished_jobs().any(|j| j.job_id == job_id))
    }

    /// Make parked turn `turn_id` the current one (parking the current if it waits for work);
    /// false when the current turn cannot step aside (it runs, waits for the user, or still
    /// has to queue its extraction).
    pub fn unpark(&mut self, turn_id: &str) -> bool {
        let Some(at) = self.parked.iter().position(|t| t.turn_id == turn_id) else {
            return self.turn.as_ref().is_some_and(|t| t.turn_id == turn_id);
        };
        let current_free = match &self.turn {
            None => true,
            Some(t) if t.phase.is_final() => self.pending_extraction().is_none(),
            Some(_) => false,
        };
        if !current_free && !self.park_waiting() {
            return false;
        }
        self.turn = Some(self.parked.remove(at));
        true
    }

    /// Ids of turns that are not over (current and parked): their messages are not history
    /// yet.
    pub fn open_turn_ids(&self) -> Vec<&str> {
        self.turn
            .iter()
            .chain(&self.parked)
            .filter(|t| !t.phase.is_final())
            .map(|t| t.turn_id.as_str())
            .collect()
    }
}
