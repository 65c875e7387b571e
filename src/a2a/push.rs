//! Push notifications: when a served task's state changes (its turn's events on
//! `hermes.out.<agent>.*.*`), each of its stored webhook configs gets the update as an A2A
//! `StreamResponse` in an HTTP POST (`Content-Type: application/a2a+json`), authenticated as
//! the config says (`Authorization: <scheme> <credentials>`, and its `token` in
//! `X-A2A-Notification-Token`, as the official SDKs send it). A failed delivery is retried
//! with exponential backoff.
//!
//! On NATS every serving process subscribes in one queue group, so each event is delivered by
//! one of them. Events are not durable: a task that ended while no serving process listened
//! (or whose delivery a crash cut short) is found by a sweep of the tasks with configs that
//! have not ended ([`PushStore::open_tasks`]), at start and every [`SWEEP_EVERY`], which
//! notifies the state the durable turn shows if it is not the state last notified.

use std::time::Duration;

use super::push_store::{OpenTask, PushStore};
use super::server::follow::{ends_stream, settled_updates, status_update};
use super::sessions::Sessions;
use super::tasks;
use super::wire::{StreamResponse, TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskState};
use crate::bus::{BusError, SharedBus};
use crate::client::events_of;
use crate::config::A2aConfig;
use crate::protocol::{subjects, TurnEvent};

/// How often tasks with configs are looked at for an end no event reported.
pub const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// The queue group of the processes that deliver push notifications.
pub const QUEUE: &str = "a2a-push";
/// The header carrying a config's `token`.
pub const TOKEN_HEADER: &str = "X-A2A-Notification-Token";
/// The media type of A2A's HTTP+JSON payloads.
pub const MEDIA_TYPE: &str = "application/a2a+json";

/// How deliveries are attempted.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub attempts: u32,
    pub first_backoff: Duration,
    pub timeout: Duration,
}

impl Retry {
    pub fn from_config(config: &A2aConfig) -> Self {
        Self {
            attempts: config.push_attempts.max(1),
            first_backoff: Duration::from_millis(config.push_backoff_ms),
            timeout: Duration::from_secs(config.push_timeout_secs.max(1)),
        }
    }
}

/// Delivers the push notifications of the served agents' tasks.
#[derive(Clone)]
pub struct Notifier {
    store: PushStore,
    http: reqwest::Client,
    retry: Retry,
    sessions: Sessions,
}

impl Notifier {
    pub fn new(store: PushStore, retry: Retry, sessions: Sessions) -> Self {
        Self {
            store,
            http: reqwest::Client::new(),
            retry,
            sessions,
        }
    }

    /// Follow the events of `agents`' sessions and notify until the bus closes. Runs on the
    /// I/O runtime.
    pub async fn run(self, bus: SharedBus, agents: Vec<String>) -> Result<(), BusError> {
        let mut subs = Vec::new();
        for agent in &agents {
            subs.push(
                bus.queue_subscribe(&format!("hermes.out.{agent}.*.*"), QUEUE)
                    .await?,
            );
        }
        let sweeper = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(SWEEP_EVERY);
            loop {
                every.tick().await;
                sweeper.sweep().await;
            }
        });
        for mut sub in subs {
            let this = self.clone();
            tokio::spawn(async move {
                while let Some(msg) = sub.next().await {
                    let Ok(address) = subjects::parse_outbound(&msg.subject) else {
                        continue;
                    };
                    let session = address.session;
                    for event in events_of(&msg) {
                        this.on_event(&session, &event).await;
                    }
                }
            });
        }
        Ok(())
    }

    async fn on_event(&self, session: &str, event: &TurnEvent) {
        let Some(updates) = updates_for(session, event) else {
            return;
        };
        let task = match &updates[0] {
            StreamResponse::StatusUpdate(s) => s.task_id.clone(),
            StreamResponse::ArtifactUpdate(a) => a.task_id.clone(),
            _ => return,
        };
        let configs = match self.store.list(&task).await {
            Ok(configs) => configs,
            Err(error) => {
                tracing::warn!(%task, %error, "push configs unreadable; no notification sent");
                return;
            }
        };
        if configs.is_empty() {
            return;
        }
        let settled = updates.iter().rev().find_map(|u| match u {
            StreamResponse::StatusUpdate(s) if ends_stream(&s.status.state) => {
                Some(s.status.state.clone())
            }
            _ => None,
        });
        let this = self.clone();
        tokio::spawn(async move {
            this.deliver_all(&configs, &updates).await;
            if let Some(state) = settled {
                this.settled(&task, &state).await;
            }
        });
    }

    /// Deliver `updates` to every config, each in order, the configs side by side.
    async fn deliver_all(
        &self,
        configs: &[TaskPushNotificationConfig],
        updates: &[StreamResponse],
    ) {
        let each = configs.iter().map(|config| async move {
            for update in updates {
                self.deliver(config, update).await;
            }
        });
        futures::future::join_all(each).await;
    }

    /// `task` was notified of `state` (a sweep does not notify it again); an end closes it.
    async fn settled(&self, task: &str, state: &TaskState) {
        let name = state_name(state);
        if let Err(error) = self.store.set_notified(task, &name).await {
            tracing::warn!(%task, %error, "the notified state was not recorded; a sweep may notify it again");
        }
        if state.is_terminal() {
            if let Err(error) = self.store.close(task).await {
                tracing::warn!(%task, %error, "an ended task stays in the push index");
            }
        }
    }

    /// Notify the tasks with configs whose durable state settled unnoticed.
    pub async fn sweep(&self) {
        let open = match self.store.open_tasks().await {
            Ok(open) => open,
            Err(error) => {
                tracing::warn!(%error, "the push index is unreadable; no sweep now");
                return;
            }
        };
        for OpenTask { agent, task } in open {
            let Some((session, turn)) = super::ids::parse_task_id(&task) else {
                continue;
            };
            let now = match self.sessions.load(&agent, session).await {
                Ok(Some(snapshot)) => tasks::turn(&snapshot, turn),
                Ok(None) => None,
                Err(error) => {
                    tracing::debug!(%task, %error, "a task with push configs is not readable now");
                    continue;
                }
            };
            let Some(now) = now.filter(|t| ends_stream(&t.state)) else {
                continue;
            };
            let notified = self.store.notified(&task).await.ok().flatten();
            if notified.as_deref() != Some(state_name(&now.state).as_str()) {
                let configs = self.store.list(&task).await.unwrap_or_default();
                self.deliver_all(&configs, &settled_updates(&now)).await;
            }
            self.settled(&task, &now.state).await;
        }
    }

    /// POST `update` to `config`'s URL, retried with backoff; false when every attempt failed.
    pub async fn deliver(
        &self,
        config: &TaskPushNotificationConfig,
        update: &StreamResponse,
    ) -> bool {
        let mut backoff = self.retry.first_backoff;
        for attempt in 1..=self.retry.attempts {
            match self.post(config, update).await {
                Ok(()) => return true,
                Err(error) => {
                    tracing::warn!(url = %config.url, task = %config.task_id, attempt, %error, "push notification not delivered");
                }
            }
            if attempt < self.retry.attempts {
                tokio::time::sleep(backoff).await;
                backoff = backoff.saturating_mul(2);
            }
        }
        false
    }

    async fn post(
        &self,
        config: &TaskPushNotificationConfig,
        update: &StreamResponse,
    ) -> Result<(), String> {
        let mut request = self
            .http
            .post(&config.url)
            .timeout(self.retry.timeout)
            .header(reqwest::header::CONTENT_TYPE, MEDIA_TYPE)
            .json(update);
        if let Some(token) = config.token.as_deref().filter(|t| !t.is_empty()) {
            request = request.header(TOKEN_HEADER, token);
        }
        if let Some(auth) = &config.authentication {
            if let Some(credentials) = auth.credentials.as_deref().filter(|c| !c.is_empty()) {
                request = request.header(
                    reqwest::header::AUTHORIZATION,
                    format!("{} {credentials}", auth.scheme),
                );
            }
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("the webhook answered {}", response.status()))
        }
    }
}

/// The notifications an event of a turn of `session` makes: a status change (and, for an
/// answer, the answer artifact first); none for events that change nothing a client tracks.
fn updates_for(session: &str, event: &TurnEvent) -> Option<Vec<StreamResponse>> {
    let status = |turn: &str, state, text| status_update(session, turn, state, text);
    Some(match event {
        TurnEvent::TurnStarted { turn_id, .. } => vec![status(turn_id, TaskState::Working, None)],
        TurnEvent::ConfirmationRequired {
            turn_id,
            call_id,
            name,
            ..
        } => {
            let text = tasks::confirmation_question(&[(call_id.clone(), name.clone())]);
            vec![status(turn_id, TaskState::InputRequired, Some(text))]
        }
        TurnEvent::Answer { turn_id, text } => vec![
            StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: super::ids::task_id(session, turn_id),
                context_id: session.to_owned(),
                artifact: tasks::answer_artifact(text),
                append: Some(false),
                last_chunk: Some(true),
                metadata: None,
            }),
            status(turn_id, TaskState::Completed, None),
        ],
        TurnEvent::Error {
            turn_id: Some(turn_id),
            code,
            message,
        } => {
            let state = if code == "cancelled" {
                TaskState::Canceled
            } else {
                TaskState::Failed
            };
            vec![status(turn_id, state, Some(message.clone()))]
        }
        _ => return None,
    })
}

/// A state as the wire names it (`TASK_STATE_COMPLETED`).
fn state_name(state: &TaskState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
