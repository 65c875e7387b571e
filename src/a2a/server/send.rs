//! `SendMessage` and `SendStreamingMessage`: a message without `taskId` starts a turn (a new
//! task) in the session its `contextId` names (a new one when it names none); a message to an
//! `INPUT_REQUIRED` task is the user's decision on the call the turn waits for, and the same
//! task goes on. The message is stored and acknowledged by the session before anything is
//! answered; its `messageId` makes a retry safe.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::follow::{ends_stream, Follow};
use super::{A2aServer, Caller};
use crate::a2a::ids;
use crate::a2a::sessions::{Decision, SessionsError, Snapshot};
use crate::a2a::tasks::{self, TurnTask, View};
use crate::a2a::wire::{
    A2AError, Message, PartContent, SendMessageRequest, SendMessageResponse, StreamResponse,
    TaskPushNotificationConfig, TaskState,
};
use crate::bus::Subscription;
use crate::protocol::subjects::check_id;

/// A message the session accepted: the task it started or continued.
pub struct Started {
    pub session: String,
    pub turn_id: String,
    /// The session's events, subscribed before the message was sent.
    pub events: Subscription,
    /// The task as it starts: `SUBMITTED` with the new message, or `WORKING` again after a
    /// decision.
    pub first: TurnTask,
}

impl Started {
    fn task_id(&self) -> String {
        ids::task_id(&self.session, &self.turn_id)
    }
}

/// What the client asked of the reply.
struct Asked {
    view: View,
    return_immediately: bool,
    push: Option<TaskPushNotificationConfig>,
}

impl Asked {
    fn of(request: &SendMessageRequest) -> Self {
        let c = request.configuration.as_ref();
        Self {
            view: View {
                history_length: c.and_then(|c| c.history_length),
                without_artifacts: false,
            },
            return_immediately: c.and_then(|c| c.return_immediately).unwrap_or(false),
            push: c.and_then(|c| c.task_push_notification_config.clone()),
        }
    }
}

impl A2aServer {
    /// `SendMessage`: the task once it ends or asks for input (or at once with
    /// `returnImmediately`).
    pub async fn send_message(
        self: &Arc<Self>,
        caller: &Caller,
        request: SendMessageRequest,
    ) -> Result<SendMessageResponse, A2AError> {
        let asked = Asked::of(&request);
        let started = self.start_message(caller, &request.message).await?;
        self.store_push(caller, started.task_id(), asked.push)
            .await?;
        if !asked.return_immediately {
            let wait = Duration::from_secs(self.config.a2a.blocking_timeout_secs.max(1));
            let deadline = tokio::time::Instant::now() + wait;
            let follow = Follow {
                sessions: &self.sessions,
                agent: &caller.agent,
                session: &started.session,
                turn_id: &started.turn_id,
                events: started.events,
            };
            follow.run(None, deadline).await;
            return Ok(SendMessageResponse::Task(
                self.settled_task(caller, &started.session, &started.turn_id)
                    .await?
                    .to_task(asked.view),
            ));
        }
        let task = self
            .current_task(caller, &started.session, &started.turn_id)
            .await?;
        Ok(SendMessageResponse::Task(task.to_task(asked.view)))
    }

    /// `SendStreamingMessage`: the task, then its updates until it ends or asks for input.
    pub async fn stream_message(
        self: &Arc<Self>,
        caller: &Caller,
        request: SendMessageRequest,
    ) -> Result<mpsc::Receiver<StreamResponse>, A2AError> {
        let asked = Asked::of(&request);
        let started = self.start_message(caller, &request.message).await?;
        self.store_push(caller, started.task_id(), asked.push)
            .await?;
        // The task as it starts, not as it is read back: a quick turn may have ended by then,
        // and its updates, buffered since the subscription, follow.
        Ok(self.stream_task(caller, started.first, started.events, asked.view))
    }

    /// The updates of `first`'s task from now on, `first` itself first.
    pub(crate) fn stream_task(
        self: &Arc<Self>,
        caller: &Caller,
        first: TurnTask,
        events: Subscription,
        view: View,
    ) -> mpsc::Receiver<StreamResponse> {
        let (tx, rx) = mpsc::channel(64);
        let server = self.clone();
        let agent = caller.agent.clone();
        tokio::spawn(async move {
            let state = first.state.clone();
            if tx
                .send(StreamResponse::Task(first.to_task(view)))
                .await
                .is_err()
            {
                return;
            }
            // Already settled (a retried message, a quick turn): nothing more to follow.
            if ends_stream(&state) {
                return;
            }
            let follow = Follow {
                sessions: &server.sessions,
                agent: &agent,
                session: &first.session,
                turn_id: &first.turn_id,
                events,
            };
            // A stream lasts as long as its client wants it.
            let forever = tokio::time::Instant::now() + Duration::from_secs(365 * 86_400);
            follow.run(Some(&tx), forever).await;
        });
        rx
    }

    /// Hand `message` to its session: a new turn, or a decision for a waiting one.
    pub(crate) async fn start_message(
        &self,
        caller: &Caller,
        message: &Message,
    ) -> Result<Started, A2AError> {
        if message.message_id.is_empty() {
            return Err(A2AError::invalid_params(
                "message.messageId is required: a unique id (e.g. a UUID) the client chooses",
            ));
        }
        let text = text_of(message)?;
        let envelope_id = ids::envelope_id(&message.message_id);
        if let Some(task_id) = message.task_id.as_deref().filter(|t| !t.is_empty()) {
            return self
                .continue_task(caller, message, task_id, &envelope_id)
                .await;
        }
        let session = match message.context_id.as_deref().filter(|c| !c.is_empty()) {
            Some(context) => {
                check_id("session", context).map_err(|e| {
                    A2AError::invalid_params(format!(
                        "message.contextId cannot name a Hermes session: {e}; leave it out and \
                         use the contextId of the task you get back"
                    ))
                })?;
                context.to_owned()
            }
            None => ids::new_context_id(),
        };
        let events = self
            .sessions
            .events(&caller.agent, &session)
            .await
            .map_err(refused)?;
        let accepted = self
            .sessions
            .send(&caller.agent, &session, &caller.user, &envelope_id, &text)
            .await
            .map_err(refused)?;
        let turn_id = accepted.turn_id.ok_or_else(|| {
            A2AError::internal(
                "the session accepted the message without naming its turn; the session \
                 service runs an older Hermes: upgrade it",
            )
        })?;
        let mut first = TurnTask::starting(&session, &turn_id, TaskState::Submitted);
        first.request = Some((accepted.message_id, text));
        Ok(Started {
            session,
            turn_id,
            events,
            first,
        })
    }

    /// A message for an existing task: only a task that asks for input takes one.
    async fn continue_task(
        &self,
        caller: &Caller,
        message: &Message,
        task_id: &str,
        envelope_id: &str,
    ) -> Result<Started, A2AError> {
        let (session, turn) =
            ids::parse_task_id(task_id).ok_or_else(|| A2AError::task_not_found(task_id))?;
        if let Some(context) = message.context_id.as_deref().filter(|c| !c.is_empty()) {
            if context != session {
                return Err(A2AError::invalid_params(format!(
                    "message.contextId `{context}` is not the context of task {task_id} \
                     (`{session}`); send the task's own contextId or none"
                )));
            }
        }
        let task = self.turn_task(caller, session, turn).await?;
        match &task.state {
            TaskState::InputRequired => {}
            s if s.is_terminal() => {
                return Err(A2AError::unsupported_operation(format!(
                    "task {task_id} has ended; send a new message with contextId `{session}` \
                     and no taskId to go on with the conversation"
                )))
            }
            _ => {
                return Err(A2AError::unsupported_operation(format!(
                    "task {task_id} is still working and takes no input now; follow it with \
                     SubscribeToTask or GetTask"
                )))
            }
        }
        let approve = tasks::decision_of(message).ok_or_else(|| {
            A2AError::invalid_params(format!(
                "task {task_id} waits for a yes or no: {}",
                task.status_text.clone().unwrap_or_default()
            ))
        })?;
        let events = self
            .sessions
            .events(&caller.agent, session)
            .await
            .map_err(refused)?;
        let decision = Decision {
            approve,
            call_id: None,
            content: tasks::answer_of(message),
        };
        self.sessions
            .confirm(&caller.agent, session, &caller.user, envelope_id, decision)
            .await
            .map_err(refused)?;
        Ok(Started {
            session: session.to_owned(),
            turn_id: turn.to_owned(),
            events,
            first: TurnTask {
                state: TaskState::Working,
                status_text: None,
                pending: Vec::new(),
                questions: Vec::new(),
                ..task
            },
        })
    }

    async fn store_push(
        &self,
        caller: &Caller,
        task_id: String,
        push: Option<TaskPushNotificationConfig>,
    ) -> Result<(), A2AError> {
        let Some(mut config) = push else {
            return Ok(());
        };
        config.task_id = task_id;
        self.put_push(caller, config).await.map(|_| ())
    }

    /// `caller`'s session `session`; none when it does not exist or is another user's.
    pub(crate) async fn owned_session(
        &self,
        caller: &Caller,
        session: &str,
    ) -> Result<Option<Snapshot>, A2AError> {
        let snapshot = self
            .sessions
            .load(&caller.agent, session)
            .await
            .map_err(refused)?;
        Ok(snapshot.filter(|s| s.detail.summary.user == caller.user))
    }

    /// Turn `turn` of `caller`'s session `session`.
    pub(crate) async fn turn_task(
        &self,
        caller: &Caller,
        session: &str,
        turn: &str,
    ) -> Result<TurnTask, A2AError> {
        let not_found = || A2AError::task_not_found(&ids::task_id(session, turn));
        let snapshot = self
            .owned_session(caller, session)
            .await?
            .ok_or_else(not_found)?;
        tasks::turn(&snapshot, turn).ok_or_else(not_found)
    }

    /// The task as stored now; a turn the session has not written yet is `SUBMITTED`.
    async fn current_task(
        &self,
        caller: &Caller,
        session: &str,
        turn: &str,
    ) -> Result<TurnTask, A2AError> {
        match self.turn_task(caller, session, turn).await {
            Ok(task) => Ok(task),
            Err(e) if e.code == crate::a2a::wire::error_code::TASK_NOT_FOUND => {
                Ok(TurnTask::starting(session, turn, TaskState::Submitted))
            }
            Err(e) => Err(e),
        }
    }

    /// The task once its stored state agrees that it settled (its answer event may run a
    /// little ahead of a replicated read), or as it is after a short wait.
    async fn settled_task(
        &self,
        caller: &Caller,
        session: &str,
        turn: &str,
    ) -> Result<TurnTask, A2AError> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let task = self.current_task(caller, session, turn).await?;
            if ends_stream(&task.state) || tokio::time::Instant::now() >= deadline {
                return Ok(task);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The text a message carries: its text parts, and its data parts as JSON.
fn text_of(message: &Message) -> Result<String, A2AError> {
    if message.parts.is_empty() {
        return Err(A2AError::invalid_params(
            "message.parts is empty: send at least one part ({\"text\": \"…\"})",
        ));
    }
    let mut pieces = Vec::new();
    for part in &message.parts {
        match &part.content {
            PartContent::Text(text) => pieces.push(text.clone()),
            PartContent::Data(data) => pieces.push(data.to_string()),
            PartContent::Raw(_) | PartContent::Url(_) => {
                return Err(A2AError::new(
                    crate::a2a::wire::error_code::CONTENT_TYPE_NOT_SUPPORTED,
                    "Hermes agents take text and JSON data parts; send the file's content as \
                     text, or a link to it inside a text part",
                ))
            }
        }
    }
    Ok(pieces.join("\n"))
}

/// A session's refusal as an A2A error.
pub(crate) fn refused(e: SessionsError) -> A2AError {
    match e {
        SessionsError::Refused { code, message } => match code.as_str() {
            "wrong_user" => A2AError::invalid_params(format!(
                "{message} (the contextId names another caller's conversation)"
            )),
            "awaiting_confirmation" => A2AError::unsupported_operation(format!(
                "{message} — over A2A: reply \"yes\" or \"no\" with the taskId of the task \
                 that asks for input (ListTasks with status TASK_STATE_INPUT_REQUIRED finds it)"
            )),
            "awaiting_job" | "busy" | "nothing_to_confirm" => {
                A2AError::unsupported_operation(message)
            }
            "empty_message" | "message_too_long" | "bad_envelope" | "invalid_subject" => {
                A2AError::invalid_params(message)
            }
            _ => A2AError::internal(format!("{code}: {message}")),
        },
        other => A2AError::internal(other.to_string()),
    }
}
