//! Following a task as it runs: the turn's events on `hermes.out.<agent>.<session>.<reader>` become
//! A2A status and artifact updates, until the task ends (`COMPLETED`, `FAILED`, `CANCELED`) or
//! waits for the client (`INPUT_REQUIRED`).
//!
//! Events are not durable (a process may restart mid-turn, a NATS subscriber may miss one), so
//! while no event comes the durable turn is read back every [`POLL_EVERY`]: a task that ended
//! unseen still ends its stream.

use std::time::Duration;

use chrono::Utc;
use tokio::sync::mpsc;

use crate::a2a::sessions::Sessions;
use crate::a2a::tasks::{self, TurnTask};
use crate::a2a::wire::{
    Message, Part, Role, StreamResponse, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use crate::bus::Subscription;
use crate::client::{event_turn, events_of};
use crate::protocol::TurnEvent;

/// How often a followed turn is read back while no event arrives.
pub const POLL_EVERY: Duration = Duration::from_secs(2);

/// Whether a task state ends a stream: terminal, or waiting for the client.
pub fn ends_stream(state: &TaskState) -> bool {
    state.is_terminal() || matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

/// How following ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// The task ended or waits for input: its last state.
    Settled(TaskState),
    /// The deadline passed first.
    TimedOut,
    /// Whoever read the updates went away.
    Gone,
}

/// A task being followed.
pub struct Follow<'a> {
    pub sessions: &'a Sessions,
    pub agent: &'a str,
    pub session: &'a str,
    pub turn_id: &'a str,
    pub events: Subscription,
}

/// The task a [`Follow`] follows.
struct Target<'a> {
    sessions: &'a Sessions,
    agent: &'a str,
    session: &'a str,
    turn_id: &'a str,
}

impl Follow<'_> {
    /// Send the task's updates to `out` (when given) until it settles or `deadline` passes.
    pub async fn run(
        self,
        out: Option<&mpsc::Sender<StreamResponse>>,
        deadline: tokio::time::Instant,
    ) -> Ended {
        let Follow {
            sessions,
            agent,
            session,
            turn_id,
            mut events,
        } = self;
        let target = Target {
            sessions,
            agent,
            session,
            turn_id,
        };
        target.run(&mut events, out, deadline).await
    }
}

impl Target<'_> {
    async fn run(
        &self,
        events: &mut Subscription,
        out: Option<&mpsc::Sender<StreamResponse>>,
        deadline: tokio::time::Instant,
    ) -> Ended {
        let mut last = TaskState::Submitted;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ended::TimedOut;
            }
            let waited = tokio::time::timeout(left.min(POLL_EVERY), events.next()).await;
            let updates = match waited {
                Ok(Some(msg)) => {
                    let updates: Vec<StreamResponse> = events_of(&msg)
                        .iter()
                        .filter(|event| event_turn(event) == Some(self.turn_id))
                        .flat_map(|event| self.updates(event))
                        .collect();
                    if updates.is_empty() {
                        continue;
                    }
                    updates
                }
                // The subscription ended (the bus closed): read the turn back instead.
                Ok(None) => {
                    tokio::time::sleep(left.min(POLL_EVERY)).await;
                    self.read_back(&last).await
                }
                Err(_) => self.read_back(&last).await,
            };
            for update in updates {
                if let StreamResponse::StatusUpdate(s) = &update {
                    last = s.status.state.clone();
                }
                if let Some(out) = out {
                    if out.send(update).await.is_err() {
                        return Ended::Gone;
                    }
                }
            }
            if ends_stream(&last) {
                return Ended::Settled(last);
            }
        }
    }

    /// The updates the durable turn shows when it settled without an event reaching us.
    async fn read_back(&self, last: &TaskState) -> Vec<StreamResponse> {
        let snapshot = match self.sessions.load(self.agent, self.session).await {
            Ok(Some(snapshot)) => snapshot,
            Ok(None) => return Vec::new(),
            Err(error) => {
                tracing::debug!(%error, "a followed A2A task could not be read back; retrying");
                return Vec::new();
            }
        };
        match tasks::turn(&snapshot, self.turn_id) {
            Some(task) if ends_stream(&task.state) || task.state != *last => settled_updates(&task),
            _ => Vec::new(),
        }
    }

    /// The updates one event of the turn makes.
    fn updates(&self, event: &TurnEvent) -> Vec<StreamResponse> {
        let working = |text: String| vec![self.status(TaskState::Working, Some(text))];
        match event {
            TurnEvent::TurnStarted { .. } => vec![self.status(TaskState::Working, None)],
            TurnEvent::ToolCall { name, .. } => working(format!("calling `{name}`")),
            TurnEvent::JobWaiting { name, job_id, .. } => {
                working(format!("waiting for `{name}` (job {job_id})"))
            }
            TurnEvent::AgentDelegated { agent, .. } => {
                working(format!("delegated a task to agent `{agent}`"))
            }
            TurnEvent::TurnResumed { reason, .. } => working(format!("resumed: {reason}")),
            TurnEvent::ConfirmationRequired { call_id, name, .. } => {
                let pending = vec![(call_id.clone(), name.clone())];
                let text = tasks::confirmation_question(&pending);
                let mut status = self.status(TaskState::InputRequired, Some(text));
                if let StreamResponse::StatusUpdate(s) = &mut status {
                    if let Some(m) = s.status.message.as_mut() {
                        m.parts.push(Part::data(serde_json::json!({
                            "confirmationRequired": [{"callId": call_id, "tool": name}]
                        })));
                    }
                }
                vec![status]
            }
            TurnEvent::Answer { text, .. } => {
                vec![self.artifact(text), self.status(TaskState::Completed, None)]
            }
            TurnEvent::Error { code, message, .. } => {
                let state = if code == "cancelled" {
                    TaskState::Canceled
                } else {
                    TaskState::Failed
                };
                vec![self.status(state, Some(message.clone()))]
            }
            _ => Vec::new(),
        }
    }

    fn status(&self, state: TaskState, text: Option<String>) -> StreamResponse {
        status_update(self.session, self.turn_id, state, text)
    }

    fn artifact(&self, text: &str) -> StreamResponse {
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: crate::a2a::ids::task_id(self.session, self.turn_id),
            context_id: self.session.to_owned(),
            artifact: tasks::answer_artifact(text),
            append: Some(false),
            last_chunk: Some(true),
            metadata: None,
        })
    }
}

/// The updates that report `task` as it is now (its answer first when it has one).
pub fn settled_updates(task: &TurnTask) -> Vec<StreamResponse> {
    let mut updates = Vec::new();
    if let Some((_, text)) = &task.answer {
        updates.push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: task.id(),
            context_id: task.session.clone(),
            artifact: tasks::answer_artifact(text),
            append: Some(false),
            last_chunk: Some(true),
            metadata: None,
        }));
    }
    let view = task.to_task(tasks::View::default());
    updates.push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: view.id,
        context_id: view.context_id,
        status: view.status,
        metadata: None,
    }));
    updates
}

/// A status update of task `turn` of `session`, with the agent's `text`.
pub fn status_update(
    session: &str,
    turn: &str,
    state: TaskState,
    text: Option<String>,
) -> StreamResponse {
    let task_id = crate::a2a::ids::task_id(session, turn);
    let message = text.map(|text| Message {
        message_id: uuid::Uuid::now_v7().to_string(),
        context_id: Some(session.to_owned()),
        task_id: Some(task_id.clone()),
        role: Role::Agent,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: None,
        reference_task_ids: None,
    });
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id,
        context_id: session.to_owned(),
        status: TaskStatus {
            state,
            message,
            timestamp: Some(Utc::now()),
        },
        metadata: None,
    })
}
