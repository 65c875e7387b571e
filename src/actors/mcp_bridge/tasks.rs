//! The bridge's side of MCP tasks (extension `io.modelcontextprotocol/tasks`): a call whose
//! caller can wait (`accept_task`) comes back with the task at once, and `hermes.mcp.task`
//! follows a task until it ends or the caller's wait is over, or cancels it.
//!
//! The bridge keeps no task state: the caller (the tool-executor's job) stores the task id and
//! asks again, so any copy of the bridge, or this one after a restart, can carry on following.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{CallContext, McpRequests};
use crate::bus::service::{Service, ServiceError};
use crate::mcp::audit::AuditRecord;
use crate::mcp::pool::McpPool;
use crate::mcp::{tasks, McpCallOutcome, McpError};
use crate::protocol::envelope::Envelope;
use crate::protocol::{McpCallReply, McpCallRequest, McpTaskReply, McpTaskRequest};
use crate::telemetry::metrics::{self, McpStatus};

/// The longest one `hermes.mcp.task` request follows a task before it reports (callers ask
/// again); keeps each request well inside a bus request's patience.
pub const MAX_WAIT: Duration = Duration::from_secs(20);

#[async_trait]
impl Service<McpTaskRequest> for McpRequests {
    async fn call(&self, request: Envelope<McpTaskRequest>) -> Result<McpTaskReply, ServiceError> {
        let owned = self.context();
        self.on_io(async move { owned.borrow().task(&owned.pool, request.body).await })
            .await
    }
}

impl CallContext<'_> {
    /// `tools/call` for a caller that waits for a task itself.
    pub(super) async fn call_accepting_task(
        &self,
        pool: &McpPool,
        body: McpCallRequest,
    ) -> McpCallReply {
        let started = Instant::now();
        let record = AuditRecord::new(
            "client",
            body.user.as_deref(),
            &body.server,
            "tools/call",
            &body.tool,
        );
        let call = uuid::Uuid::new_v4().to_string();
        let (client, timeout) = match pool.client(&body.server) {
            Ok(found) => found,
            // No call was made (unknown or down server), and the trail says so, as for a call
            // that does not accept a task.
            Err(e) => {
                self.audited(record.for_call(&call).outcome(started, Some(e.to_string())))
                    .await;
                return failed(&e);
            }
        };
        self.audited(record.started(&call)).await;
        let outcome = client
            .call_tool_or_task(&body.tool, body.arguments, body.input, timeout)
            .await;
        let status = match &outcome {
            Ok(McpCallOutcome::Done(result)) if result.is_error => McpStatus::ToolError,
            Ok(_) => McpStatus::Ok,
            Err(e) => McpStatus::of(e.failure()),
        };
        metrics::mcp_call(&body.server, status, started.elapsed());
        let error = match &outcome {
            Ok(McpCallOutcome::Done(r)) if r.is_error => Some(format!(
                "the tool reported an error: {}",
                super::first_line(&r.text)
            )),
            Ok(McpCallOutcome::InputRequired(asked)) => Some(format!(
                "the server asks the user first: {}",
                super::first_line(&asked.message())
            )),
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        };
        self.audited(record.for_call(&call).outcome(started, error))
            .await;
        match outcome {
            Ok(McpCallOutcome::Done(result)) => McpCallReply {
                result: Some(result),
                ..McpCallReply::default()
            },
            Ok(McpCallOutcome::InputRequired(asked)) => {
                tracing::info!(server = %body.server, tool = %body.tool, questions = asked.questions.len(), "MCP server asks the user first");
                McpCallReply {
                    input_required: Some(asked),
                    ..McpCallReply::default()
                }
            }
            Ok(McpCallOutcome::Task(task)) => {
                tracing::info!(server = %body.server, tool = %body.tool, task = %task.task_id, "MCP server answered with a task");
                McpCallReply {
                    task: Some(task),
                    ..McpCallReply::default()
                }
            }
            Err(e) => failed(&e),
        }
    }

    /// Follow (or cancel) one task for at most the request's wait.
    async fn task(&self, pool: &McpPool, body: McpTaskRequest) -> McpTaskReply {
        let started = Instant::now();
        let cancel_record = || {
            AuditRecord::new(
                "client",
                body.user.as_deref(),
                &body.server,
                "tasks/cancel",
                &body.task_id,
            )
        };
        let (client, timeout) = match pool.client(&body.server) {
            Ok(found) => found,
            Err(e) => {
                if body.cancel {
                    self.audited(cancel_record().outcome(started, Some(e.to_string())))
                        .await;
                }
                return task_failed(e.to_string());
            }
        };
        if body.cancel {
            let record = cancel_record();
            let outcome = client.cancel_task(&body.task_id, timeout).await;
            self.audited(record.outcome(started, outcome.as_ref().err().map(|e| e.to_string())))
                .await;
            if let Err(e) = outcome {
                return task_failed(e.to_string());
            }
        }
        let state = match client.get_task(&body.task_id, timeout).await {
            Ok(state) => state,
            Err(e) => return task_failed(e.to_string()),
        };
        let wait = Duration::from_millis(body.wait_ms).min(MAX_WAIT);
        let until = tokio::time::Instant::now() + wait;
        match tasks::follow(client.as_ref(), state, until, timeout).await {
            Ok(state) => McpTaskReply {
                state: Some(state),
                error: None,
            },
            Err(e) => task_failed(e.to_string()),
        }
    }
}

fn failed(error: &McpError) -> McpCallReply {
    McpCallReply {
        error: Some(error.to_string()),
        failure: Some(error.failure()),
        ..McpCallReply::default()
    }
}

fn task_failed(error: String) -> McpTaskReply {
    McpTaskReply {
        state: None,
        error: Some(error),
    }
}
