//! Following a task a mounted server runs (tasks extension `io.modelcontextprotocol/tasks`)
//! over our [`McpClient`] trait: take each state the server announces
//! (`notifications/tasks`), and when it says nothing for a poll interval, ask `tasks/get` —
//! at the server's `pollIntervalMs`, within [`MIN_POLL`]..[`MAX_POLL`].

use std::time::Duration;

use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::Instant;

use super::{McpClient, McpError, McpTaskState};

/// The poll interval when the server suggests none.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// Never ask more often than this, whatever the server suggests.
pub const MIN_POLL: Duration = Duration::from_millis(100);
/// Never wait longer than this between two looks at a task.
pub const MAX_POLL: Duration = Duration::from_secs(30);

/// How long to wait before asking about `state` again.
pub fn poll_interval(state: &McpTaskState) -> Duration {
    state
        .poll_interval_ms
        .map_or(DEFAULT_POLL, Duration::from_millis)
        .clamp(MIN_POLL, MAX_POLL)
}

/// Follow the task `state` describes until it ends or `until` passes; returns the last state
/// seen (final, or still running at `until`). Each `tasks/get` may take `request_timeout`.
pub async fn follow<C: McpClient + ?Sized>(
    client: &C,
    mut state: McpTaskState,
    until: Instant,
    request_timeout: Duration,
) -> Result<McpTaskState, McpError> {
    let mut updates = client.task_updates();
    loop {
        if state.status.is_final() {
            return Ok(state);
        }
        let now = Instant::now();
        if now >= until {
            return Ok(state);
        }
        let wait = poll_interval(&state).min(until - now);
        state = match heard(updates.as_mut(), &state.task_id, wait).await {
            Some(announced) => announced,
            None => client.get_task(&state.task_id, request_timeout).await?,
        };
    }
}

/// A state of `task_id` the server announces within `wait`, if any.
async fn heard(
    updates: Option<&mut broadcast::Receiver<McpTaskState>>,
    task_id: &str,
    wait: Duration,
) -> Option<McpTaskState> {
    let Some(updates) = updates else {
        tokio::time::sleep(wait).await;
        return None;
    };
    let deadline = Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, updates.recv()).await {
            Ok(Ok(state)) if state.task_id == task_id => return Some(state),
            Ok(Ok(_)) => continue,
            // Missed some: ask the server instead of guessing.
            Ok(Err(RecvError::Lagged(_))) => return None,
            Ok(Err(RecvError::Closed)) | Err(_) => {
                tokio::time::sleep_until(deadline).await;
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::McpTaskStatus;

    fn state(poll: Option<u64>) -> McpTaskState {
        McpTaskState {
            task_id: "t".into(),
            status: McpTaskStatus::Working,
            message: None,
            poll_interval_ms: poll,
            result: None,
            error: None,
            input_required: None,
        }
    }

    #[test]
    fn the_servers_poll_interval_is_honoured_within_bounds() {
        assert_eq!(poll_interval(&state(Some(500))), Duration::from_millis(500));
        assert_eq!(poll_interval(&state(None)), DEFAULT_POLL);
        assert_eq!(poll_interval(&state(Some(1))), MIN_POLL);
        assert_eq!(poll_interval(&state(Some(3_600_000))), MAX_POLL);
    }
}
