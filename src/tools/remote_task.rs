//! Following an MCP server's task from an async job: the handle stored in the job record
//! (server, task id, user), and the loop that asks the MCP-bridge (`hermes.mcp.task`) until
//! the task ends. The bridge follows the task for at most a while per request; when it is
//! unreachable (killed, restarting) the loop waits and asks again, so any bridge copy carries
//! on where the last one stopped and the server's work is never started twice. A task that asks
//! the user something ends the job with the questions ([`Followed::Asks`]); the answers go back
//! with the call made again, which follows the same task in a new job.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Progress, ToolError, ToolErrorCode};
use crate::bus::{rpc, Bus};
use crate::mcp::{McpInputRequired, McpTaskState, McpTaskStatus, McpToolResult};
use crate::protocol::envelope::Envelope;
use crate::protocol::McpTaskRequest;

/// How long the bridge follows a task per request before it reports back.
const WAIT_PER_ASK: Duration = Duration::from_secs(5);
/// How long to wait for the bridge's answer beyond [`WAIT_PER_ASK`].
const ANSWER_MARGIN: Duration = Duration::from_secs(5);
/// The pause before asking again after the bridge was unreachable or failed.
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// How many answers in a row may be errors from the bridge (the server down, the task
/// unknown) before the job fails; being unreachable does not count (a restart is expected).
const MAX_ERRORS_IN_A_ROW: u32 = 30;

/// What a job stores to follow a task: enough to ask any bridge copy about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskHandle {
    /// Always `mcp_task`, so a handle says what it is.
    pub kind: String,
    pub server: String,
    pub task_id: String,
    #[serde(default)]
    pub user: Option<String>,
}

/// The value of [`TaskHandle::kind`].
pub const KIND: &str = "mcp_task";

/// The handle of `task`, which `server` runs for `user`.
pub fn handle(server: &str, user: Option<String>, task: &McpTaskState) -> Value {
    serde_json::to_value(TaskHandle {
        kind: KIND.to_owned(),
        server: server.to_owned(),
        task_id: task.task_id.clone(),
        user,
    })
    .unwrap_or(Value::Null)
}

fn parse(handle: Value) -> Result<TaskHandle, ToolError> {
    serde_json::from_value(handle).map_err(|e| {
        ToolError::new(
            ToolErrorCode::ExecutionFailed,
            format!("the stored MCP task handle is unreadable: {e}"),
        )
        .with_hint("the task's outcome is unknown; tell the user to check it on the server")
    })
}

/// Where following a task stopped.
#[derive(Debug)]
pub enum Followed {
    /// The task ended with this `tools/call` result.
    Done(McpToolResult),
    /// The task asks the user first; the answers go back with the call made again.
    Asks(McpInputRequired),
}

/// Follow the task until it ends or asks the user something.
pub async fn follow(
    bus: &dyn Bus,
    handle: Value,
    progress: Progress,
) -> Result<Followed, ToolError> {
    let handle = parse(handle)?;
    let mut errors = 0;
    loop {
        match ask(bus, &handle, false).await {
            Ok(state) => {
                errors = 0;
                if let Some(done) = ended(&handle, state.clone()) {
                    return done;
                }
                if let Some(message) = &state.message {
                    progress.report(0.0, message.clone());
                }
            }
            Err(Ask::Unreachable(e)) => {
                tracing::info!(task = %handle.task_id, error = %e, "MCP-bridge unreachable while following a task; asking again");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(Ask::Failed(e)) => {
                errors += 1;
                if errors >= MAX_ERRORS_IN_A_ROW {
                    return Err(unfollowable(&handle, &e));
                }
                tracing::warn!(task = %handle.task_id, error = %e, "MCP task not readable now; asking again");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// A task the bridge kept failing to read: the server took it (it has an id), so it may have
/// run or may still finish there. Its outcome is unknown, not the tool unavailable: a repeat
/// of the call could do the work twice (a write's key stays taken, as after a timeout).
fn unfollowable(handle: &TaskHandle, error: &str) -> ToolError {
    ToolError::new(
        ToolErrorCode::OutcomeUnknown,
        format!(
            "MCP task {} on `{}` could not be followed: {error}",
            handle.task_id, handle.server
        ),
    )
    .with_hint(
        "the task was started and may have finished or still finish on the server; do not \
         start it again: tell the user to check it there",
    )
}

/// Ask the server to cancel the task.
pub async fn cancel(bus: &dyn Bus, handle: Value) -> Result<(), ToolError> {
    let handle = parse(handle)?;
    match ask(bus, &handle, true).await {
        Ok(_) => Ok(()),
        Err(Ask::Unreachable(e) | Ask::Failed(e)) => Err(ToolError::new(
            ToolErrorCode::Unavailable,
            format!("MCP task {} was not cancelled: {e}", handle.task_id),
        )
        .with_hint("the task may still run on the server")),
    }
}

enum Ask {
    /// No bridge answered.
    Unreachable(String),
    /// A bridge answered with an error.
    Failed(String),
}

async fn ask(bus: &dyn Bus, handle: &TaskHandle, cancel: bool) -> Result<McpTaskState, Ask> {
    let wait = if cancel { Duration::ZERO } else { WAIT_PER_ASK };
    let request = Envelope::request(McpTaskRequest {
        server: handle.server.clone(),
        task_id: handle.task_id.clone(),
        cancel,
        wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        user: handle.user.clone(),
    });
    let reply = rpc::request(bus, request, wait + ANSWER_MARGIN)
        .await
        .map_err(|e| Ask::Unreachable(e.to_string()))?;
    match (reply.body.state, reply.body.error) {
        (Some(state), _) => Ok(state),
        (None, Some(e)) => Err(Ask::Failed(e)),
        (None, None) => Err(Ask::Failed(
            "the MCP-bridge answered with neither a state nor an error".to_owned(),
        )),
    }
}

/// The job's outcome once the task has ended.
fn ended(handle: &TaskHandle, state: McpTaskState) -> Option<Result<Followed, ToolError>> {
    let failed = |what: String| {
        Err(ToolError::new(ToolErrorCode::ExecutionFailed, what)
            .with_hint("tell the user what the server said; do not start it again unasked"))
    };
    match state.status {
        McpTaskStatus::Completed => {
            Some(state.result.map(Followed::Done).ok_or(()).or_else(|()| {
                failed(format!(
                    "MCP task {} on `{}` completed without a result",
                    state.task_id, handle.server
                ))
            }))
        }
        McpTaskStatus::InputRequired if state.input_required.is_some() => {
            state.input_required.map(|asked| Ok(Followed::Asks(asked)))
        }
        McpTaskStatus::Failed => Some(failed(format!(
            "MCP task {} on `{}` failed: {}",
            state.task_id,
            handle.server,
            state.error.as_deref().unwrap_or("no reason given")
        ))),
        McpTaskStatus::Cancelled => Some(failed(format!(
            "MCP task {} on `{}` was cancelled",
            state.task_id, handle.server
        ))),
        McpTaskStatus::Working | McpTaskStatus::InputRequired => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;

    use super::*;
    use crate::bus::embedded::EmbeddedBus;
    use crate::bus::service::{typed, Service, ServiceError};
    use crate::protocol::{subjects, McpTaskReply};

    /// A bridge whose server no longer knows the task.
    struct Forgotten;

    #[async_trait]
    impl Service<McpTaskRequest> for Forgotten {
        async fn call(
            &self,
            request: Envelope<McpTaskRequest>,
        ) -> Result<McpTaskReply, ServiceError> {
            Ok(McpTaskReply {
                state: None,
                error: Some(format!("unknown task {}", request.body.task_id)),
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_cannot_be_read_any_more_has_an_unknown_outcome_and_is_not_started_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::store::durability::Durable::from(crate::store::open(dir.path()).unwrap());
        let bus = Arc::new(EmbeddedBus::open(db).unwrap());
        let _bridge = bus
            .serve(
                subjects::MCP_TASK,
                "mcp-bridge",
                typed::<McpTaskRequest, _>(Arc::new(Forgotten), 1 << 20),
            )
            .await
            .unwrap();
        let task = McpTaskState {
            task_id: "t-9".into(),
            status: McpTaskStatus::Working,
            message: None,
            poll_interval_ms: None,
            result: None,
            input_required: None,
            error: None,
        };
        let followed = follow(bus.as_ref(), handle("files", None, &task), Progress::none()).await;
        let error = followed.expect_err("the job fails");
        assert_eq!(error.code, ToolErrorCode::OutcomeUnknown);
        assert!(
            error.message.contains("unknown task t-9"),
            "{}",
            error.message
        );
        assert!(error
            .hint
            .unwrap_or_default()
            .contains("do not start it again"));
    }

    #[test]
    fn a_handle_round_trips_through_the_job_record() {
        let state = McpTaskState {
            task_id: "t-9".into(),
            status: McpTaskStatus::Working,
            message: None,
            poll_interval_ms: Some(200),
            result: None,
            error: None,
            input_required: None,
        };
        let stored = handle("slow", Some("u-1".into()), &state);
        let back = parse(stored).unwrap();
        assert_eq!(back.kind, KIND);
        assert_eq!(
            (back.server.as_str(), back.task_id.as_str()),
            ("slow", "t-9")
        );
        assert_eq!(back.user.as_deref(), Some("u-1"));
    }
}
