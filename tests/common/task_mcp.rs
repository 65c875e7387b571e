//! A Streamable HTTP MCP server for tests whose tool `build_report` answers `tools/call` with
//! a task (extension `io.modelcontextprotocol/tasks`) that completes after a set time. Tasks
//! live in the server, not in an MCP session, so a client that reconnects (a restarted
//! MCP-bridge) follows them with `tasks/get`. It counts how often the work was started and
//! which tasks were cancelled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Task, TaskPayload, TaskStatus, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

/// The server's tasks and counters; clones share them.
#[derive(Clone)]
pub struct TaskServer {
    runs_for: Duration,
    tasks: Arc<Mutex<HashMap<String, DetailedTask>>>,
    started: Arc<AtomicU32>,
}

impl TaskServer {
    /// Tasks complete `runs_for` after they start.
    pub fn new(runs_for: Duration) -> Self {
        Self {
            runs_for,
            tasks: Arc::default(),
            started: Arc::default(),
        }
    }

    /// How many times `build_report` started its work.
    pub fn started(&self) -> u32 {
        self.started.load(Ordering::SeqCst)
    }

    /// The status of every task, by id.
    pub fn statuses(&self) -> Vec<TaskStatus> {
        self.tasks
            .lock()
            .unwrap()
            .values()
            .map(DetailedTask::status)
            .collect()
    }

    /// Serve on a free loopback port; returns `http://127.0.0.1:<port>/mcp`.
    pub async fn serve(&self) -> String {
        crate::common::dynamic_mcp::serve_http(self.clone()).await
    }

    fn set(&self, id: &str, payload: TaskPayload) {
        let mut tasks = self.tasks.lock().unwrap();
        if let Some(task) = tasks.get_mut(id) {
            if task.status().is_terminal() {
                return;
            }
            let mut base = task.task.clone();
            base.last_updated_at = now();
            *task = DetailedTask::new(base, payload);
        }
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339()
}

impl ServerHandler for TaskServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"topic": {"type": "string"}},
            "required": ["topic"]
        });
        let tool = Tool::new(
            "build_report",
            "Build a long report on a topic (takes a while; runs as a task)",
            Arc::new(schema.as_object().unwrap().clone()),
        );
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let topic = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("topic"))
            .and_then(|t| t.as_str())
            .unwrap_or("nothing")
            .to_owned();
        let text = format!("report on {topic}: 3 findings");
        self.started.fetch_add(1, Ordering::SeqCst);
        let tasks_ok = ctx
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if !tasks_ok {
            tokio::time::sleep(self.runs_for).await;
            return Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into());
        }
        let id = format!("task-{}", uuid::Uuid::new_v4().simple());
        let task = Task::new(&id, TaskStatus::Working, now(), now())
            .with_poll_interval_ms(200)
            .with_status_message("building");
        self.tasks.lock().unwrap().insert(
            id.clone(),
            DetailedTask::new(task.clone(), TaskPayload::Working),
        );
        let server = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(server.runs_for).await;
            let result = CallToolResult::success(vec![ContentBlock::text(text)]);
            let serde_json::Value::Object(result) = serde_json::to_value(result).unwrap() else {
                unreachable!("a tool result is an object")
            };
            server.set(&id, TaskPayload::Completed { result });
        });
        Ok(CreateTaskResult::new(task).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let tasks = self.tasks.lock().unwrap();
        match tasks.get(&request.task_id) {
            Some(task) => Ok(GetTaskResult::new(task.clone())),
            None => Err(ErrorData::invalid_params(
                format!("no task {}", request.task_id),
                None,
            )),
        }
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.set(&request.task_id, TaskPayload::Cancelled);
        Ok(())
    }
}
