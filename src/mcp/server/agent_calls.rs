//! The agent side of [`HermesMcpServer`]: a `tools/call` of an exposed agent (a task at once,
//! or the answer) and `tasks/get`, `tasks/update`, `tasks/cancel` of the tasks those calls
//! started — each authorised for the caller and audited.

use std::time::Instant;

use rmcp::model::{
    CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock, GetTaskParams, GetTaskResult,
    UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::agent_tasks::{self, TaskOpError};
use super::agents::{self, AgentCallError};
use super::auth::Principal;
use super::HermesMcpServer;

impl HermesMcpServer {
    /// A call to an exposed agent: a task at once for a client that negotiated tasks, else
    /// the answer once the turn ends.
    pub(super) async fn call_agent(
        &self,
        who: &Principal,
        agent: &str,
        arguments: Value,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started_at = Instant::now();
        let as_task = ctx
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        let outcome = match agents::parse(agent, arguments) {
            Ok(args) => agents::start(&self.deps, who, agent, args).await,
            Err(e) => Err(e),
        };
        let started = match outcome {
            Ok(started) => started,
            Err(error) => {
                self.audited(
                    who,
                    "tools/call",
                    agent,
                    started_at,
                    Some(error.to_string()),
                )
                .await;
                return Ok(
                    CallToolResult::error(vec![ContentBlock::text(error.to_string())]).into(),
                );
            }
        };
        let task_id = started.task_id();
        if as_task {
            let created = agent_tasks::created(&started);
            agent_tasks::announce(self.deps.clone(), who.clone(), ctx.peer.clone(), started);
            self.audited(who, "tools/call", &task_id, started_at, None)
                .await;
            return Ok(created.into());
        }
        let answered = agents::answer(&self.deps, who, started).await;
        let error = match &answered {
            Ok(result) if result.is_error == Some(true) => Some(
                result
                    .content
                    .first()
                    .and_then(|c| c.as_text())
                    .map(|t| t.text.clone())
                    .unwrap_or_default(),
            ),
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        };
        self.audited(who, "tools/call", &task_id, started_at, error)
            .await;
        answered
            .map(Into::into)
            .map_err(|e: AgentCallError| ErrorData::internal_error(e.to_string(), None))
    }

    /// A task request refused or failed, as the caller's error (refusals audited).
    async fn task_error(
        &self,
        who: &Principal,
        method: &str,
        id: &str,
        error: TaskOpError,
    ) -> ErrorData {
        match error {
            TaskOpError::Denied(denied) => self.deny(who, method, id, denied).await,
            e @ (TaskOpError::NotFound(_)
            | TaskOpError::UnknownInput { .. }
            | TaskOpError::NotWaiting(_)) => ErrorData::invalid_params(e.to_string(), None),
            e @ TaskOpError::Sessions { .. } => ErrorData::internal_error(e.to_string(), None),
        }
    }

    pub(super) async fn answer_get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let who = self.principal(&ctx)?;
        match agent_tasks::get(&self.deps, &who, &request.task_id).await {
            Ok(task) => Ok(GetTaskResult::new(task)),
            Err(e) => Err(self
                .task_error(&who, "tasks/get", &request.task_id, e)
                .await),
        }
    }

    pub(super) async fn answer_update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let who = self.principal(&ctx)?;
        let started_at = Instant::now();
        let id = &request.task_id;
        match agent_tasks::update(&self.deps, &who, id, &request.input_responses).await {
            Ok(resumed) => {
                agent_tasks::announce(self.deps.clone(), who.clone(), ctx.peer.clone(), resumed);
                self.audited(&who, "tasks/update", id, started_at, None)
                    .await;
                Ok(())
            }
            Err(e) => Err(self.task_error(&who, "tasks/update", id, e).await),
        }
    }

    pub(super) async fn answer_cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let who = self.principal(&ctx)?;
        let started_at = Instant::now();
        let id = &request.task_id;
        match agent_tasks::cancel(&self.deps, &who, id).await {
            Ok(()) => {
                self.audited(&who, "tasks/cancel", id, started_at, None)
                    .await;
                Ok(())
            }
            Err(e) => Err(self.task_error(&who, "tasks/cancel", id, e).await),
        }
    }
}
