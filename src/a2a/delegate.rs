//! Remote A2A agents as delegates. An agent declared with `a2a = { card_url = … }` lives
//! elsewhere; a local agent delegates to it like to a local one (`agent__<name>`), and the
//! parent turn waits durably in `waiting_agents` (see [`crate::turn::delegation`]).
//!
//! The remote task of a delegation is recorded here (keyed by the delegation's job id, in the
//! deployment's KV: [`super::kv`]) before anything is sent: its A2A `messageId` is the job id
//! and its `contextId` the child session id the parent already stored, so nothing about it is
//! chosen twice. Once sent, the remote task id is stored too. A follower polls the remote task
//! (between polls it listens to the task's stream when the agent's card offers streaming)
//! until it ends or asks for input, stores the outcome and publishes it on
//! `hermes.job.<id>`, which wakes the parent. After a crash the parent's own poll
//! ([`RemoteDelegates::poll`]) restarts the follower: with a stored task id it goes on
//! following; without one it first looks for a task its `messageId` already started
//! (`ListTasks` of its context) and sends only if there is none — so a crash neither loses
//! nor repeats the remote task. Cancelling the parent cancels the remote task.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::client::{A2aClientError, RemoteAgent};
use super::wire::{Message, Part, PartContent, Role, SendMessageResponse, Task, TaskState};
use crate::bus::kv::SharedKv;
use crate::bus::SharedBus;
use crate::config::Config;
use crate::protocol::envelope::Envelope;
use crate::protocol::{JobEvent, JobStatus, ToolError, ToolErrorCode};
use crate::store::durability::Durable;

/// Why a remote delegation could not be recorded, read or followed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DelegateError {
    #[error("the remote task could not be encoded: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("the remote task could not be recorded (is the bus up?): {0}")]
    Record(#[source] crate::bus::BusError),
    #[error("the remote task's record could not be read (is the bus up?): {0}")]
    Read(#[source] crate::bus::BusError),
    #[error("a remote task record is unreadable (written by another version?): {0}")]
    Unreadable(#[source] serde_json::Error),
    #[error(transparent)]
    Agent(#[from] A2aClientError),
    #[error(transparent)]
    Subject(#[from] crate::protocol::subjects::IdError),
    #[error(transparent)]
    Envelope(#[from] crate::protocol::envelope::EnvelopeError),
}

/// The bucket (or sled tree) of remote tasks.
pub const BUCKET: &str = "a2a_remote";

/// The first wait between two polls of a remote task; it doubles up to [`MAX_POLL`]. Short,
/// because the task is sent with `returnImmediately`: a quick remote agent (a local one, a
/// cached answer) has answered a moment after it said "working", and a first poll 20 ms out
/// was most of such a delegation's time. A long task costs three more looks before the
/// stream takes over.
const FIRST_POLL: Duration = Duration::from_millis(2);
const MAX_POLL: Duration = Duration::from_secs(5);
/// Once the wait between polls reaches this (about a second after the task was sent), the
/// follower listens to the task's stream instead, where the agent offers one.
const LISTEN_FROM: Duration = Duration::from_secs(1);
/// The longest one subscription to a remote task's stream is held before the task is polled
/// again (a stream that ends early, or an update it missed, costs one poll).
const STREAM_FOR: Duration = Duration::from_secs(60);

/// A delegated task on a remote agent, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteTask {
    /// The delegation's job id: also the A2A `messageId`.
    pub job_id: String,
    /// The remote agent's name in this deployment's config.
    pub agent: String,
    /// The A2A `contextId` (the child session id the parent stored).
    pub context_id: String,
    pub text: String,
    pub parent: ParentTurn,
    /// The remote task id, once the remote agent named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_task: Option<String>,
    /// Set when the parent asked to stop it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<String>,
    /// How it ended, once it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    pub submitted_at: DateTime<Utc>,
}

/// The turn that delegated the task, where its outcome goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParentTurn {
    pub agent: String,
    pub session: String,
    pub turn_id: String,
    pub call_id: String,
    pub user: String,
    pub trace_id: String,
}

/// How a remote task ended, as the parent's call result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub status: JobStatus,
    pub output: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
}

/// What the parent learns when it looks at a remote task.
#[derive(Debug, Clone, PartialEq)]
pub enum RemotePoll {
    /// Nothing was recorded: start it (again).
    Missing,
    Working,
    Ended(Outcome),
}

/// The remote tasks of this process' delegations.
pub struct RemoteDelegates {
    kv: Arc<dyn SharedKv>,
    bus: SharedBus,
    config: Arc<Config>,
    io: tokio::runtime::Handle,
    /// Jobs followed by this process now.
    following: Mutex<HashSet<String>>,
    /// Agents whose card was read.
    agents: Mutex<HashMap<String, RemoteAgent>>,
}

impl std::fmt::Debug for RemoteDelegates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteDelegates").finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl RemoteDelegates {
    /// The delegates of a session process; followers run on `io`.
    pub fn open(
        bus: SharedBus,
        db: Option<&Durable>,
        config: Arc<Config>,
        io: tokio::runtime::Handle,
    ) -> Result<Arc<Self>, crate::bus::BusError> {
        Ok(Arc::new(Self {
            kv: super::kv::bucket(&bus, db, BUCKET)?,
            bus,
            config,
            io,
            following: Mutex::default(),
            agents: Mutex::default(),
        }))
    }

    /// Record `task` (unless it already is) and follow it: returns once it is stored.
    pub async fn start(self: &Arc<Self>, task: RemoteTask) -> Result<(), DelegateError> {
        let bytes = serde_json::to_vec(&task).map_err(DelegateError::Encode)?;
        self.kv
            .create(&task.job_id, Bytes::from(bytes))
            .await
            .map_err(DelegateError::Record)?;
        self.follow(&task.job_id);
        Ok(())
    }

    /// The remote task of `job_id` now; one not followed here is followed from now on.
    pub async fn poll(self: &Arc<Self>, job_id: &str) -> RemotePoll {
        match self.load(job_id).await {
            Ok(None) => RemotePoll::Missing,
            Ok(Some(task)) => match task.outcome {
                Some(outcome) => RemotePoll::Ended(outcome),
                None => {
                    self.follow(job_id);
                    RemotePoll::Working
                }
            },
            Err(e) => {
                tracing::warn!(job = job_id, error = %e, "remote task record unreadable; waiting");
                RemotePoll::Working
            }
        }
    }

    /// Ask the remote agent to cancel the task of `job_id`.
    pub async fn cancel(self: &Arc<Self>, job_id: &str, reason: &str) {
        let Ok(Some(mut task)) = self.load(job_id).await else {
            return;
        };
        if task.outcome.is_some() {
            return;
        }
        task.cancel = Some(reason.to_owned());
        if let Err(e) = self.save(&task).await {
            tracing::warn!(job = job_id, error = %e, "the cancel of a remote task was not recorded");
        }
        if let Some(remote) = task.remote_task.clone() {
            let this = self.clone();
            let agent = task.agent.clone();
            self.io.spawn(async move {
                match this.agent(&agent).await {
                    Ok(a) => {
                        if let Err(e) = a.cancel_task(&remote).await {
                            tracing::info!(task = %remote, error = %e, "remote task not cancelled (it may have ended)");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "remote agent unreachable; its task was not cancelled"),
                }
            });
        }
        self.follow(job_id);
    }

    fn follow(self: &Arc<Self>, job_id: &str) {
        if !lock(&self.following).insert(job_id.to_owned()) {
            return;
        }
        let this = self.clone();
        let job_id = job_id.to_owned();
        self.io.spawn(async move {
            this.run(&job_id).await;
            lock(&this.following).remove(&job_id);
        });
    }

    /// Follow one remote task to its end.
    async fn run(&self, job_id: &str) {
        let mut wait = FIRST_POLL;
        loop {
            match self.step(job_id).await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => {
                    if self.give_up_if_cancelled(job_id, &e.to_string()).await {
                        return;
                    }
                    tracing::warn!(job = job_id, error = %e, "remote task not reached; retrying")
                }
            }
            if !self.wait_for_change(job_id, wait).await {
                tokio::time::sleep(wait).await;
            }
            wait = (wait * 2).min(MAX_POLL);
        }
    }

    /// Wait on the remote task's stream (`SubscribeToTask`) once the first polls found it
    /// still working; false when the agent does not stream (then the follower sleeps until
    /// its next poll).
    async fn wait_for_change(&self, job_id: &str, poll: Duration) -> bool {
        if poll < LISTEN_FROM {
            // Quick tasks are caught by the first polls.
            return false;
        }
        let Ok(Some(task)) = self.load(job_id).await else {
            return false;
        };
        let Some(remote) = task.remote_task else {
            return false;
        };
        let Ok(agent) = self.agent(&task.agent).await else {
            return false;
        };
        if !agent.streams() {
            return false;
        }
        match agent.wait_for_change(&remote, STREAM_FOR).await {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(job = job_id, error = %e, "remote task's stream unavailable; polling");
                false
            }
        }
    }

    /// A cancelled task whose agent cannot be reached ends here, as cancelled: nobody waits
    /// for it any more. True when it did.
    async fn give_up_if_cancelled(&self, job_id: &str, error: &str) -> bool {
        let Ok(Some(task)) = self.load(job_id).await else {
            return false;
        };
        let Some(reason) = task.cancel.clone() else {
            return false;
        };
        let why =
            format!("it was cancelled ({reason}); the remote agent could not be told: {error}");
        let outcome = failed(&task.agent, &why);
        self.settle(task, outcome).await.is_ok()
    }

    /// One look at the remote task; true once it is settled (or gone from the records).
    async fn step(&self, job_id: &str) -> Result<bool, DelegateError> {
        let Some(mut task) = self.load(job_id).await? else {
            return Ok(true);
        };
        if task.outcome.is_some() {
            return Ok(true);
        }
        if let (Some(reason), None) = (&task.cancel, &task.remote_task) {
            // Not sent as far as the record knows; a send a crash interrupted may have
            // started it all the same.
            if let Ok(agent) = self.agent(&task.agent).await {
                if let Some(found) = self.started_before(&agent, &task).await {
                    let _ = agent.cancel_task(&found.id).await;
                }
            }
            let outcome = failed(
                &task.agent,
                &format!("cancelled before it was sent: {reason}"),
            );
            return self.settle(task, outcome).await.map(|_| true);
        }
        let agent = self.agent(&task.agent).await?;
        let remote = match task.remote_task.clone() {
            Some(id) => agent.get_task(&id).await,
            None => match self.start_remote(&agent, &mut task).await? {
                Some(started) => started,
                None => return Ok(true),
            },
        };
        let remote = match remote {
            Ok(remote) => remote,
            Err(e) if e.is_not_found() => {
                let outcome = failed(&task.agent, &format!("the remote agent lost the task: {e}"));
                return self.settle(task, outcome).await.map(|_| true);
            }
            Err(e) => {
                // The agent may have moved: read its card again next time.
                lock(&self.agents).remove(&task.agent);
                return Err(e.into());
            }
        };
        if task.cancel.is_some() && !remote.status.state.is_terminal() {
            let _ = agent.cancel_task(&remote.id).await;
        }
        match outcome_of(&task.agent, &remote) {
            Some(outcome) => self.settle(task, outcome).await.map(|_| true),
            None => Ok(false),
        }
    }

    /// Send the task, unless a send before a crash already started it; the task as the
    /// remote agent answered (none: try again later).
    async fn start_remote(
        &self,
        agent: &RemoteAgent,
        task: &mut RemoteTask,
    ) -> Result<Option<Result<Task, A2aClientError>>, DelegateError> {
        if let Some(found) = self.started_before(agent, task).await {
            task.remote_task = Some(found.id.clone());
            self.save(task).await?;
            return Ok(Some(Ok(found)));
        }
        let message = Message {
            message_id: task.job_id.clone(),
            context_id: Some(task.context_id.clone()),
            task_id: None,
            role: Role::User,
            parts: vec![Part::text(task.text.clone())],
            metadata: None,
            extensions: None,
            reference_task_ids: None,
        };
        match agent.send(message, true).await {
            Ok(SendMessageResponse::Task(remote)) => {
                task.remote_task = Some(remote.id.clone());
                self.save(task).await?;
                Ok(Some(Ok(remote)))
            }
            Ok(SendMessageResponse::Message(reply)) => {
                let outcome = done(&task.agent, None, &text_of(&reply.parts), false);
                self.settle(task.clone(), outcome).await?;
                Ok(None)
            }
            Err(e @ A2aClientError::Remote { .. }) => {
                let outcome = failed(&task.agent, &e.to_string());
                self.settle(task.clone(), outcome).await?;
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A task of the record's context that its `messageId` started (a send whose answer a
    /// crash lost).
    async fn started_before(&self, agent: &RemoteAgent, task: &RemoteTask) -> Option<Task> {
        let listed = agent.list_tasks(&task.context_id).await.ok()?;
        listed.tasks.into_iter().find(|t| {
            t.history
                .iter()
                .flatten()
                .any(|m| m.message_id == task.job_id)
        })
    }

    /// Store the outcome and tell the parent turn (on `hermes.job.<id>`).
    async fn settle(&self, mut task: RemoteTask, outcome: Outcome) -> Result<(), DelegateError> {
        task.outcome = Some(outcome.clone());
        self.save(&task).await?;
        let event = JobEvent {
            job_id: task.job_id.clone(),
            tool: crate::config::AgentConfig::delegation_tool(&task.agent),
            call_id: task.parent.call_id.clone(),
            agent: Some(task.parent.agent.clone()),
            session: Some(task.parent.session.clone()),
            user: Some(task.parent.user.clone()),
            turn_id: Some(task.parent.turn_id.clone()),
            status: outcome.status,
            progress: None,
            result: Some(outcome.output),
            error: outcome.error,
        };
        let subject = crate::protocol::subjects::job(&task.job_id)?;
        let envelope = Envelope::new(event.status.event_kind(), event)
            .for_session(
                &task.parent.agent,
                &task.parent.session,
                Some(&task.parent.user),
            )
            .in_trace(&task.parent.trace_id);
        let payload = envelope.encode()?;
        if let Err(e) = self.bus.publish(&subject, payload).await {
            tracing::warn!(subject, error = %e, "remote task's end not published; the parent reads it when it looks again");
        }
        Ok(())
    }

    async fn agent(&self, name: &str) -> Result<RemoteAgent, A2aClientError> {
        if let Some(agent) = lock(&self.agents).get(name) {
            return Ok(agent.clone());
        }
        let a2a = self
            .config
            .agents
            .get(name)
            .and_then(|a| a.a2a.clone())
            .unwrap_or_default();
        let Some(card_url) = a2a.card_url else {
            return Err(A2aClientError::Card {
                url: String::new(),
                reason: format!("agents.{name}.a2a.card_url is not set"),
            });
        };
        let token = a2a.token_env.as_deref().and_then(|v| std::env::var(v).ok());
        let timeout = Duration::from_secs(self.config.engine.request_timeout_secs.max(5));
        let agent = RemoteAgent::discover(&card_url, token, timeout).await?;
        lock(&self.agents).insert(name.to_owned(), agent.clone());
        Ok(agent)
    }

    async fn load(&self, job_id: &str) -> Result<Option<RemoteTask>, DelegateError> {
        match crate::bus::kv::lookup(self.kv.as_ref(), job_id).await {
            Ok(None) => Ok(None),
            Ok(Some(bytes)) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(DelegateError::Unreadable),
            Err(e) => Err(DelegateError::Read(e)),
        }
    }

    async fn save(&self, task: &RemoteTask) -> Result<(), DelegateError> {
        let bytes = serde_json::to_vec(task).map_err(DelegateError::Encode)?;
        self.kv
            .put(&task.job_id, Bytes::from(bytes))
            .await
            .map_err(DelegateError::Record)
    }
}

/// The outcome a settled remote task gives the parent's call; none while it works.
pub fn outcome_of(agent: &str, task: &Task) -> Option<Outcome> {
    let said = task
        .status
        .message
        .as_ref()
        .map(|m| text_of(&m.parts))
        .unwrap_or_default();
    let answer = task
        .artifacts
        .iter()
        .flatten()
        .map(|a| text_of(&a.parts))
        .collect::<Vec<_>>()
        .join("\n");
    Some(match task.status.state {
        TaskState::Completed => {
            let text = if answer.is_empty() { said } else { answer };
            done(agent, Some(&task.id), &text, false)
        }
        TaskState::InputRequired | TaskState::AuthRequired => {
            done(agent, Some(&task.id), &said, true)
        }
        TaskState::Failed | TaskState::Rejected => failed(
            agent,
            if said.is_empty() {
                "it gave no reason"
            } else {
                &said
            },
        ),
        TaskState::Canceled => failed(agent, "its task was cancelled"),
        _ => return None,
    })
}

fn done(agent: &str, task: Option<&str>, text: &str, asks: bool) -> Outcome {
    let output = if asks {
        json!({"agent": agent, "remote_task": task, "input_required": true, "question": text})
    } else {
        json!({"agent": agent, "remote_task": task, "answer": text})
    };
    Outcome {
        status: JobStatus::Done,
        output,
        error: None,
    }
}

fn failed(agent: &str, reason: &str) -> Outcome {
    Outcome {
        status: JobStatus::Failed,
        output: json!({"agent": agent, "answer": null}),
        error: Some(
            ToolError::new(
                ToolErrorCode::ExecutionFailed,
                format!("agent `{agent}` could not finish the task: {reason}"),
            )
            .with_hint("answer with what you have, or try another way once"),
        ),
    }
}

/// The text of parts (data parts as JSON).
fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match &p.content {
            PartContent::Text(t) => Some(t.clone()),
            PartContent::Data(d) => Some(d.to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
#[path = "delegate_tests.rs"]
mod tests;
