//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) as rmcp speaks it, in our
//! terms: a `tools/call` answered with a task, `tasks/get`, `tasks/cancel`, and the
//! `notifications/tasks` a server sends, all turned into [`McpTaskState`].

use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, InputRequiredResult, Task, TaskPayload,
    TaskStatus,
};
use serde_json::Value;

use super::{convert, input};
use crate::mcp::{McpTaskState, McpTaskStatus};

/// How many task states a slow follower may fall behind before it misses some (it then asks
/// `tasks/get`, so nothing is lost).
pub(super) const UPDATES_BUFFER: usize = 64;

/// A task the server just created in answer to `tools/call`.
pub(super) fn created(result: CreateTaskResult) -> McpTaskState {
    base(result.task)
}

/// A task as `tasks/get` or `notifications/tasks` describe it.
pub(super) fn detailed(task: DetailedTask) -> McpTaskState {
    let mut state = base(task.task);
    match task.payload {
        TaskPayload::Completed { result } => {
            match serde_json::from_value::<CallToolResult>(Value::Object(result)) {
                Ok(result) => state.result = Some(convert::result_from_rmcp(result)),
                Err(e) => {
                    state.status = McpTaskStatus::Failed;
                    state.error = Some(format!(
                        "the task completed with a result that is not a tools/call result: {e}"
                    ));
                }
            }
        }
        TaskPayload::Failed { error } => {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| Value::Object(error).to_string());
            state.error = Some(message);
        }
        TaskPayload::InputRequired { input_requests } => {
            let asked = InputRequiredResult::from_input_requests(input_requests);
            match input::to_ask_in_task(&state.task_id, &asked) {
                Ok(questions) => state.input_required = Some(questions),
                Err(e) => {
                    state.status = McpTaskStatus::Failed;
                    state.error = Some(format!("the task asks what Hermes cannot answer: {e}"));
                }
            }
        }
        _ => {}
    }
    state
}

fn base(task: Task) -> McpTaskState {
    McpTaskState {
        status: status(task.status),
        task_id: task.task_id,
        message: task.status_message,
        poll_interval_ms: task.poll_interval_ms,
        result: None,
        error: None,
        input_required: None,
    }
}

fn status(status: TaskStatus) -> McpTaskStatus {
    match status {
        TaskStatus::Working => McpTaskStatus::Working,
        TaskStatus::InputRequired => McpTaskStatus::InputRequired,
        TaskStatus::Completed => McpTaskStatus::Completed,
        TaskStatus::Failed => McpTaskStatus::Failed,
        TaskStatus::Cancelled => McpTaskStatus::Cancelled,
        // A status newer than this client: keep following it until it ends.
        _ => McpTaskStatus::Working,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wire(value: Value) -> DetailedTask {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_completed_task_carries_its_tool_result() {
        let state = detailed(wire(json!({
            "taskId": "t-1", "status": "completed", "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:05Z", "ttlMs": null, "pollIntervalMs": 500,
            "result": {"content": [{"type": "text", "text": "report ready"}], "isError": false}
        })));
        assert_eq!(state.status, McpTaskStatus::Completed);
        assert_eq!(state.poll_interval_ms, Some(500));
        assert_eq!(state.result.unwrap().text, "report ready");
    }

    #[test]
    fn a_failed_task_carries_the_servers_message() {
        let state = detailed(wire(json!({
            "taskId": "t-2", "status": "failed", "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:05Z", "ttlMs": 1000,
            "error": {"code": -32603, "message": "disk full"}
        })));
        assert_eq!(state.status, McpTaskStatus::Failed);
        assert_eq!(state.error.as_deref(), Some("disk full"));
        assert!(state.status.is_final());
    }
}
