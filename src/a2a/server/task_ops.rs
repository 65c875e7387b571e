//! `GetTask`, `ListTasks`, `CancelTask` and `SubscribeToTask`: tasks read back from the
//! durable turns of the caller's sessions, whichever process runs them.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::send::refused;
use super::{A2aServer, Caller};
use crate::a2a::ids;
use crate::a2a::tasks::{self, TurnTask, View};
use crate::a2a::wire::{
    A2AError, CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse,
    StreamResponse, SubscribeToTaskRequest, Task, TaskState,
};

/// Tasks in a `ListTasks` page when the request names no `pageSize`.
pub const DEFAULT_PAGE: i32 = 50;
/// The most tasks in one page.
pub const MAX_PAGE: i32 = 100;

impl A2aServer {
    pub async fn get_task(
        &self,
        caller: &Caller,
        request: GetTaskRequest,
    ) -> Result<Task, A2AError> {
        let task = self.task_by_id(caller, &request.id).await?;
        Ok(task.to_task(View {
            history_length: request.history_length,
            without_artifacts: false,
        }))
    }

    pub async fn list_tasks(
        &self,
        caller: &Caller,
        request: ListTasksRequest,
    ) -> Result<ListTasksResponse, A2AError> {
        let page_size = request.page_size.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&page_size) {
            return Err(A2AError::invalid_params(format!(
                "pageSize must be 1–{MAX_PAGE} (it was {page_size})"
            )));
        }
        let offset = match request.page_token.as_deref().filter(|t| !t.is_empty()) {
            None => 0,
            Some(token) => token.parse::<usize>().map_err(|_| {
                A2AError::invalid_params(format!(
                    "pageToken `{token}` is not one this server gave out; use the \
                     nextPageToken of the previous page"
                ))
            })?,
        };
        let sessions: Vec<String> = match request.context_id.as_deref().filter(|c| !c.is_empty()) {
            Some(context) => vec![context.to_owned()],
            None => self
                .sessions
                .list(&caller.agent, &caller.user)
                .await
                .map_err(refused)?
                .into_iter()
                .map(|s| s.session)
                .collect(),
        };
        let mut all: Vec<TurnTask> = Vec::new();
        for session in sessions {
            if crate::protocol::subjects::check_id("session", &session).is_err() {
                continue;
            }
            if let Some(snapshot) = self.owned_session(caller, &session).await? {
                all.extend(tasks::turns(&snapshot));
            }
        }
        let wanted = request
            .status
            .clone()
            .filter(|s| *s != TaskState::Unspecified);
        let after: Option<DateTime<Utc>> = request.status_timestamp_after;
        all.retain(|t| {
            wanted.as_ref().is_none_or(|w| *w == t.state)
                && after.is_none_or(|after| t.updated_at >= after)
        });
        all.sort_by_key(|t| std::cmp::Reverse(t.updated_at));
        let total = all.len();
        let view = View {
            history_length: request.history_length,
            without_artifacts: !request.include_artifacts.unwrap_or(false),
        };
        let page: Vec<Task> = all
            .iter()
            .skip(offset)
            .take(page_size as usize)
            .map(|t| t.to_task(view))
            .collect();
        let next = offset + page.len();
        Ok(ListTasksResponse {
            next_page_token: if next < total {
                next.to_string()
            } else {
                String::new()
            },
            page_size,
            total_size: i32::try_from(total).unwrap_or(i32::MAX),
            tasks: page,
        })
    }

    pub async fn cancel_task(
        &self,
        caller: &Caller,
        request: CancelTaskRequest,
    ) -> Result<Task, A2AError> {
        let task = self.task_by_id(caller, &request.id).await?;
        if task.state.is_terminal() {
            return Err(A2AError::new(
                crate::a2a::wire::error_code::TASK_NOT_CANCELABLE,
                format!(
                    "task {} has already ended ({:?}); there is nothing to cancel",
                    request.id, task.state
                ),
            ));
        }
        self.sessions
            .cancel(&caller.agent, &task.session, &caller.user)
            .await
            .map_err(refused)?;
        // The session answers once the turn is stored as cancelled; a replicated read may
        // lag a moment.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let now = self.task_by_id(caller, &request.id).await?;
            if now.state.is_terminal() || tokio::time::Instant::now() >= deadline {
                return Ok(now.to_task(View::default()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn subscribe(
        self: &Arc<Self>,
        caller: &Caller,
        request: SubscribeToTaskRequest,
    ) -> Result<mpsc::Receiver<StreamResponse>, A2AError> {
        let (session, turn) =
            ids::parse_task_id(&request.id).ok_or_else(|| A2AError::task_not_found(&request.id))?;
        // Subscribed before the state is read, so nothing between the two is missed.
        let events = self
            .sessions
            .events(&caller.agent, session)
            .await
            .map_err(refused)?;
        let task = self.turn_task(caller, session, turn).await?;
        if task.state.is_terminal() {
            return Err(A2AError::unsupported_operation(format!(
                "task {} has ended ({:?}); read it with GetTask",
                request.id, task.state
            )));
        }
        Ok(self.stream_task(caller, task, events, View::default()))
    }

    /// The task `id` names, if it is the caller's.
    async fn task_by_id(&self, caller: &Caller, id: &str) -> Result<TurnTask, A2AError> {
        let (session, turn) = ids::parse_task_id(id).ok_or_else(|| A2AError::task_not_found(id))?;
        self.turn_task(caller, session, turn).await
    }
}
