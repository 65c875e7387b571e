//! A turn as an A2A task. The turn's durable state is the truth (read back over the bus from
//! [`Snapshot`]); its state machine maps onto A2A task states:
//!
//! | Hermes turn | A2A task |
//! |---|---|
//! | `received` | `SUBMITTED` |
//! | `planning`, `awaiting_tools`, `waiting_job`, `waiting_agents` | `WORKING` |
//! | `waiting_user` (a high-risk call to confirm) | `INPUT_REQUIRED` |
//! | `answered` | `COMPLETED` (the answer is the `answer` artifact) |
//! | `failed` | `FAILED`, or `CANCELED` when the user cancelled it |
//!
//! Only a session's current turn and the turns parked behind it keep their record; an older
//! turn is `COMPLETED` when its answer is stored and `FAILED` otherwise.

use chrono::{DateTime, Utc};

use super::ids;
use super::sessions::Snapshot;
use super::wire::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};
use crate::protocol::session_view::{SessionMessage, TurnPhase, TurnView};
use crate::protocol::Role as ChatRole;

/// The artifact that holds a completed task's answer.
pub const ANSWER_ARTIFACT: &str = "answer";

/// What a task shows of its history and artifacts.
#[derive(Debug, Clone, Copy, Default)]
pub struct View {
    /// Most history messages (the latest); none: all, 0: no history.
    pub history_length: Option<i32>,
    /// Leave the artifacts out (`ListTasks` without `includeArtifacts`).
    pub without_artifacts: bool,
}

/// One turn of a session, as a task.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnTask {
    pub session: String,
    pub turn_id: String,
    pub state: TaskState,
    /// The user message that started it: (message id, text).
    pub request: Option<(String, String)>,
    /// The answer of a completed turn: (message id, text).
    pub answer: Option<(String, String)>,
    /// What the agent says with the status: the confirmation it asks for, or why it failed.
    pub status_text: Option<String>,
    /// The high-risk calls an `INPUT_REQUIRED` task waits on: (call id, tool).
    pub pending: Vec<(String, String)>,
    /// What the MCP servers of pending calls ask the user: (call id, question).
    pub questions: Vec<(String, crate::protocol::McpQuestion)>,
    pub updated_at: DateTime<Utc>,
}

impl TurnTask {
    /// Turn `turn` of `session` as it starts, before anything about it is stored.
    pub fn starting(session: &str, turn: &str, state: TaskState) -> Self {
        Self {
            session: session.to_owned(),
            turn_id: turn.to_owned(),
            state,
            request: None,
            answer: None,
            status_text: None,
            pending: Vec::new(),
            questions: Vec::new(),
            updated_at: Utc::now(),
        }
    }

    pub fn id(&self) -> String {
        ids::task_id(&self.session, &self.turn_id)
    }

    /// The A2A task.
    pub fn to_task(&self, view: View) -> Task {
        let context = &self.session;
        let id = self.id();
        let message = |message_id: &str, role: Role, text: &str| Message {
            message_id: message_id.to_owned(),
            context_id: Some(context.clone()),
            task_id: Some(id.clone()),
            role,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: None,
            reference_task_ids: None,
        };
        let mut history = Vec::new();
        if let Some((mid, text)) = &self.request {
            history.push(message(mid, Role::User, text));
        }
        if let Some((mid, text)) = &self.answer {
            history.push(message(mid, Role::Agent, text));
        }
        let history = match view.history_length {
            Some(n) if n <= 0 => None,
            Some(n) => {
                let skip = history.len().saturating_sub(n as usize);
                Some(history.split_off(skip))
            }
            None => Some(history),
        };
        let status_message = self.status_text.as_ref().map(|text| {
            let mut m = message(&format!("{}-status", self.turn_id), Role::Agent, text);
            if !self.pending.is_empty() {
                let calls: Vec<serde_json::Value> = self
                    .pending
                    .iter()
                    .map(|(call, tool)| serde_json::json!({"callId": call, "tool": tool}))
                    .collect();
                m.parts.push(Part::data(
                    serde_json::json!({"confirmationRequired": calls}),
                ));
            }
            m
        });
        let artifacts = (!view.without_artifacts).then(|| {
            self.answer
                .iter()
                .map(|(_, text)| answer_artifact(text))
                .collect::<Vec<_>>()
        });
        Task {
            id,
            context_id: context.clone(),
            status: TaskStatus {
                state: self.state.clone(),
                message: status_message,
                timestamp: Some(self.updated_at),
            },
            artifacts,
            history,
            metadata: None,
        }
    }
}

/// The artifact holding an answer.
pub fn answer_artifact(text: &str) -> Artifact {
    Artifact {
        artifact_id: ANSWER_ARTIFACT.into(),
        name: Some(ANSWER_ARTIFACT.into()),
        description: None,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: None,
    }
}

/// Every turn of the session, oldest first.
pub fn turns(snapshot: &Snapshot) -> Vec<TurnTask> {
    let mut order: Vec<&str> = Vec::new();
    for m in &snapshot.messages {
        if !order.contains(&m.turn_id.as_str()) {
            order.push(&m.turn_id);
        }
    }
    let detail = &snapshot.detail;
    let records = detail.turn.iter().chain(detail.parked.iter());
    for r in records.clone() {
        if !order.contains(&r.turn_id.as_str()) {
            order.push(&r.turn_id);
        }
    }
    order
        .into_iter()
        .map(|turn| {
            let record = records.clone().find(|r| r.turn_id == turn);
            turn_task(snapshot, turn, record)
        })
        .collect()
}

/// The turn `turn_id` of the session, when it has one.
pub fn turn(snapshot: &Snapshot, turn_id: &str) -> Option<TurnTask> {
    turns(snapshot).into_iter().find(|t| t.turn_id == turn_id)
}

fn turn_task(snapshot: &Snapshot, turn: &str, record: Option<&TurnView>) -> TurnTask {
    let own: Vec<&SessionMessage> = snapshot
        .messages
        .iter()
        .filter(|m| m.turn_id == turn)
        .collect();
    let request = record
        .and_then(|r| own.iter().find(|m| m.id == r.message_id))
        .or_else(|| own.iter().find(|m| m.message.role == ChatRole::User))
        .map(|m| (m.id.clone(), m.message.content.clone()));
    let last_word = own
        .iter()
        .rev()
        .find(|m| m.message.role == ChatRole::Assistant && m.message.tool_calls.is_empty());
    let answer = last_word
        .filter(|m| !m.message.content.is_empty())
        .map(|m| (m.id.clone(), m.message.content.clone()));
    let last_ts = own.last().map(|m| m.ts);
    let mut task = TurnTask {
        session: snapshot.detail.summary.session.clone(),
        turn_id: turn.to_owned(),
        state: TaskState::Failed,
        request,
        answer: None,
        status_text: None,
        pending: Vec::new(),
        questions: Vec::new(),
        updated_at: record
            .map(|r| r.updated_at)
            .or(last_ts)
            .unwrap_or(snapshot.detail.summary.updated_at),
    };
    let Some(record) = record else {
        // An older turn: only its messages remain.
        match answer {
            Some(a) => {
                task.state = TaskState::Completed;
                task.answer = Some(a);
            }
            None => task.status_text = Some("the turn ended without an answer".into()),
        }
        return task;
    };
    task.state = match record.phase {
        TurnPhase::Received => TaskState::Submitted,
        TurnPhase::WaitingUser => TaskState::InputRequired,
        // The embedded store writes a save's task state before its messages: a read between
        // the two sees the turn answered and not yet its answer, which the next read has.
        TurnPhase::Answered if last_word.is_none() => TaskState::Working,
        TurnPhase::Answered => TaskState::Completed,
        TurnPhase::Failed if record.cancelled => TaskState::Canceled,
        TurnPhase::Failed => TaskState::Failed,
        TurnPhase::Planning
        | TurnPhase::AwaitingTools
        | TurnPhase::WaitingJob
        | TurnPhase::WaitingAgents => TaskState::Working,
    };
    match task.state {
        TaskState::Completed => task.answer = answer,
        TaskState::Failed | TaskState::Canceled => task.status_text = record.error.clone(),
        TaskState::InputRequired => {
            task.pending = record
                .confirmations
                .iter()
                .filter(|c| c.decision.is_none())
                .map(|c| (c.call_id.clone(), c.tool.clone()))
                .collect();
            task.questions = record
                .confirmations
                .iter()
                .filter(|c| c.decision.is_none())
                .flat_map(|c| c.questions.iter().map(|q| (c.call_id.clone(), q.clone())))
                .collect();
            let asked: Vec<String> = record
                .confirmations
                .iter()
                .filter(|c| c.decision.is_none())
                .flat_map(|c| c.questions.iter().map(move |q| (c, q)))
                .map(|(c, q)| format!("`{}` (call {}) asks: {}", c.tool, c.call_id, q.message))
                .collect();
            if task.pending.is_empty() {
                // Decided, and about to go on.
                task.state = TaskState::Working;
            } else if !asked.is_empty() {
                task.status_text = Some(format!(
                    "{}. Reply in this task with a data part {{\"answer\": {{…the form's \
                     fields…}}}}, \"yes\" to send the form's defaults, or \"no\" to decline.",
                    asked.join("; ")
                ));
            } else {
                task.status_text = Some(confirmation_question(&task.pending));
            }
        }
        _ => {}
    }
    task
}

/// What an `INPUT_REQUIRED` task asks the client.
pub fn confirmation_question(pending: &[(String, String)]) -> String {
    let calls: Vec<String> = pending
        .iter()
        .map(|(call, tool)| format!("`{tool}` (call {call})"))
        .collect();
    format!(
        "The agent needs your confirmation to run {}. Reply in this task with \"yes\" to run \
         it or \"no\" to decline.",
        calls.join(", ")
    )
}

/// The answer to an MCP server's question in a reply to an `INPUT_REQUIRED` task: a data
/// part's `answer` (it approves the call).
pub fn answer_of(message: &Message) -> Option<serde_json::Value> {
    message.parts.iter().find_map(|part| match &part.content {
        super::wire::PartContent::Data(data) => data.get("answer").cloned(),
        _ => None,
    })
}

/// The user's decision in a reply to an `INPUT_REQUIRED` task: a data part `{"approve":
/// bool}` (or `{"answer": …}`, which approves), or a text part that says yes or no; none when
/// it says neither.
pub fn decision_of(message: &Message) -> Option<bool> {
    if answer_of(message).is_some() {
        return Some(true);
    }
    for part in &message.parts {
        if let super::wire::PartContent::Data(data) = &part.content {
            if let Some(b) = data.get("approve").and_then(|v| v.as_bool()) {
                return Some(b);
            }
        }
        if let Some(text) = part.as_text() {
            let word = text
                .trim()
                .trim_end_matches(['.', '!'])
                .to_ascii_lowercase();
            match word.as_str() {
                "yes" | "y" | "ok" | "approve" | "approved" | "confirm" | "confirmed" => {
                    return Some(true)
                }
                "no" | "n" | "deny" | "denied" | "decline" | "declined" | "reject" => {
                    return Some(false)
                }
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
#[path = "tasks_tests.rs"]
mod tests;
