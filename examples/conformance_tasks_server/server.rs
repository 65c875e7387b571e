//! The fixture's MCP server: tools and the tasks extension (`tasks/get`, `tasks/update`,
//! `tasks/cancel`) over the [`Store`]; rmcp gates the task methods on the client having
//! declared the extension.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::store::Store;
use super::tools;

/// The server; clones share its tasks.
#[derive(Clone, Default)]
pub struct Fixture {
    store: Store,
}

impl Fixture {
    /// Every task's status, in no order: what a test checks its client did to the tasks.
    #[allow(dead_code, reason = "read by the tests that build this fixture in")]
    pub fn statuses(&self) -> Vec<rmcp::model::TaskStatus> {
        self.store.statuses()
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            "hermes-conformance-tasks-fixture",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let takes_tasks = ctx
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        tools::call(&self.store, request, takes_tasks).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.store.get(&request.task_id).map(GetTaskResult::new)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.store.answer(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.store.cancel(&request.task_id)
    }
}
