//! [`HermesMcpServer`]: the rmcp `ServerHandler` of Hermes' own MCP server. Tools
//! `memory_write`, `memory_search`, `memory_forget`, the configured `expose_tools` and one
//! per `expose_agents` agent (with `tasks/get`, `tasks/update`, `tasks/cancel` for their
//! tasks); the caller's memories as resources `memory://<user>/<id>`; the prompt `memory_qa`.
//! Every call is authorised for its principal (tool and data level) and audited.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::RequestParamsMeta;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    Implementation, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptArgument,
    ReadResourceRequestParams, ReadResourceResponse, Resource, ResourceTemplate,
    ServerCapabilities, ServerConfig,
};
use rmcp::model::{
    CancelTaskParams, GetTaskParams, GetTaskResult, UpdateTaskParams, TASKS_EXTENSION_ID,
};
#[allow(deprecated)] // logging and resources/subscribe: what 2025-11-25 clients send
use rmcp::model::{
    CompleteRequestMethod, CompleteRequestParams, CompleteResult, DiscoverResult,
    SetLevelRequestMethod, SetLevelRequestParams, SubscribeRequestMethod, SubscribeRequestParams,
    UnsubscribeRequestMethod, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};
use tracing::Instrument;

use super::agents;
use super::auth::{Denied, Principal};
use super::forwarded::first_page;
use super::memory::{self, MemoryClient};
use super::passthrough::Passthrough;
use super::{exposed, traced, ServerDeps, SERVER_NAME};
use crate::mcp::audit::{self, AuditRecord};
use crate::protocol::subjects::audit_kinds;
use crate::protocol::MemoryListRequest;

pub(super) const WRITE: &str = "memory_write";
pub(super) const SEARCH: &str = "memory_search";
pub(super) const FORGET: &str = "memory_forget";
pub(super) const QA_PROMPT: &str = "memory_qa";

/// One MCP session's handler: the shared deps and, over stdio, its fixed principal.
#[derive(Clone)]
pub struct HermesMcpServer {
    pub(super) deps: Arc<ServerDeps>,
    fixed: Option<Principal>,
    /// The session with the mounted server served through this one, if any.
    pub(super) passthrough: Option<Arc<Passthrough>>,
}

/// What a tool call produced: the text/JSON result, or an error for the caller.
pub(super) type Outcome = Result<Value, String>;

impl HermesMcpServer {
    /// A handler whose principal comes from each HTTP request (`fixed = None`) or is fixed.
    pub fn new(deps: Arc<ServerDeps>, fixed: Option<Principal>) -> Self {
        let passthrough = deps
            .passthrough
            .clone()
            .map(|server| Arc::new(Passthrough::new(server)));
        Self {
            deps,
            fixed,
            passthrough,
        }
    }

    pub(super) fn principal(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Principal, ErrorData> {
        let from_http = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>().cloned());
        from_http
            .or_else(|| self.fixed.clone())
            .ok_or_else(|| ErrorData::invalid_request(Denied::NoToken.to_string(), None))
    }

    pub(super) fn memory(&self) -> MemoryClient<'_> {
        MemoryClient {
            bus: self.deps.bus.as_ref(),
            timeout: self.deps.request_timeout,
        }
    }

    /// Audit a refusal on `hermes.audit.auth_denied` and turn it into the caller's error.
    pub(super) async fn deny(
        &self,
        who: &Principal,
        method: &str,
        target: &str,
        denied: Denied,
    ) -> ErrorData {
        let record = AuditRecord::new("server", Some(&who.user), SERVER_NAME, method, target)
            .denied(&denied.to_string());
        audit::publish(self.deps.bus.as_ref(), audit_kinds::AUTH_DENIED, &record).await;
        tracing::warn!(user = %who.user, method, target, reason = %denied, "MCP request refused");
        ErrorData::invalid_request(
            format!("forbidden: {denied}"),
            Some(json!({"forbidden": true})),
        )
    }

    pub(super) async fn audited(
        &self,
        who: &Principal,
        method: &str,
        target: &str,
        started: Instant,
        error: Option<String>,
    ) {
        let record = AuditRecord::new("server", Some(&who.user), SERVER_NAME, method, target)
            .outcome(started, error);
        audit::publish(self.deps.bus.as_ref(), audit_kinds::MCP_SERVER, &record).await;
    }

    pub(super) async fn run_tool(
        &self,
        who: &Principal,
        name: &str,
        arguments: Value,
        idempotency_key: Option<&str>,
    ) -> Result<Outcome, Denied> {
        match name {
            WRITE => self.write(who, memory::parse(name, arguments)).await,
            SEARCH => self.search(who, memory::parse(name, arguments)).await,
            FORGET => self.forget(who, memory::parse(name, arguments)).await,
            other => Ok(exposed::call(&self.deps, who, other, arguments, idempotency_key).await),
        }
    }
}

impl ServerHandler for HermesMcpServer {
    #[allow(deprecated)] // the logging capability, for a mounted server that has one
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = if self.passes_through() {
            // What the mounted server may offer; a method it lacks answers as it would. List
            // changes are relayed to a session's client but not announced: a 2026-07-28
            // client would ask for them with subscriptions/listen, which is not forwarded.
            ServerCapabilities::builder()
                .enable_logging()
                .enable_completions()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_tools()
                .build()
        } else {
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_resources()
                .enable_tools()
                .build()
        };
        if !self.deps.expose_agents.is_empty() || self.passes_through() {
            // Calls to agents (and to a passthrough server that has tasks) may be answered
            // as tasks.
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
        }
        ServerConfig::new(capabilities)
        .with_server_info(
            Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION"))
                .with_title("Hermes memory and tools"),
        )
        .with_instructions(
            "Hermes' shared memory: memory_search before answering about a user, memory_write to \
             remember, memory_forget to forget. Memories are also resources memory://<user>/<id>.",
        )
    }

    async fn discover(
        &self,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let mut info = self.get_info();
        // A 2026-07-28 client subscribes with subscriptions/listen, which is not forwarded to
        // a passthrough server; resources/subscribe is for 2025-11-25 sessions only.
        if let Some(resources) = info.capabilities.resources.as_mut() {
            resources.subscribe = None;
        }
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let who = self.principal(&ctx)?;
        let mut tools = Vec::new();
        if first_page(&request) {
            tools = Self::memory_tools();
            tools.extend(exposed::list(&self.deps).await);
            tools.extend(agents::tools(&self.deps));
        }
        let mut result = if self.passes_through() {
            let mut passed = self.passed_tools(request, &ctx).await?;
            tools.append(&mut passed.tools);
            passed
        } else {
            ListToolsResult::with_all_items(Vec::new())
        };
        tools.retain(|tool| who.may_call(&tool.name));
        result.tools = tools;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = traced::span(&ctx, request.traceparent(), "tools/call", &request.name);
        let answer = self
            .answer_call_tool(request, ctx)
            .instrument(span.clone())
            .await;
        traced::record(&span, &answer);
        answer
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let who = self.principal(&ctx)?;
        let mut passed = if self.passes_through() {
            Some(self.passed_resources(request.clone(), &ctx).await?)
        } else {
            None
        };
        if !first_page(&request) {
            return Ok(passed.unwrap_or_default());
        }
        let records = self
            .memory()
            .list(MemoryListRequest {
                user: who.user.clone(),
                namespace: None,
                id: None,
                ..MemoryListRequest::default()
            })
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let mut resources: Vec<Resource> = records
            .iter()
            .map(|record| {
                Resource::new(memory::uri(record), record.key.clone())
                    .with_description(record.content.chars().take(120).collect::<String>())
                    .with_mime_type("application/json")
            })
            .collect();
        Ok(match passed.as_mut() {
            Some(passed) => {
                resources.append(&mut passed.resources);
                passed.resources = resources;
                passed.clone()
            }
            None => ListResourcesResult::with_all_items(resources),
        })
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut templates = Vec::new();
        if first_page(&request) {
            templates.push(
                ResourceTemplate::new("memory://{user}/{id}", "memory")
                    .with_description("One memory record of a user, as JSON")
                    .with_mime_type("application/json"),
            );
        }
        if !self.passes_through() {
            return Ok(ListResourceTemplatesResult::with_all_items(templates));
        }
        let mut passed = self.passed_templates(request, &ctx).await?;
        templates.append(&mut passed.resource_templates);
        passed.resource_templates = templates;
        Ok(passed)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let span = traced::span(&ctx, request.traceparent(), "resources/read", &request.uri);
        let answer = self
            .answer_read_resource(request, ctx)
            .instrument(span.clone())
            .await;
        traced::record(&span, &answer);
        answer
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut prompts = Vec::new();
        if first_page(&request) {
            let question = PromptArgument::new("question")
                .with_description("The question about the user to answer from memory")
                .with_required(true);
            prompts.push(Prompt::new(
                QA_PROMPT,
                Some("Answer a question about the calling user from their recalled memories"),
                Some(vec![question]),
            ));
        }
        if !self.passes_through() {
            return Ok(ListPromptsResult::with_all_items(prompts));
        }
        let mut passed = self.passed_prompts(request, &ctx).await?;
        prompts.append(&mut passed.prompts);
        passed.prompts = prompts;
        Ok(passed)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        if !self.passes_through() {
            return Err(ErrorData::method_not_found::<CompleteRequestMethod>());
        }
        self.principal(&ctx)?;
        self.passed_complete(request, &ctx).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !self.passes_through() {
            return Err(ErrorData::method_not_found::<SetLevelRequestMethod>());
        }
        self.principal(&ctx)?;
        self.passed_set_level(request, &ctx).await
    }

    #[allow(deprecated)] // resources/subscribe is what 2025-11-25 clients send
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !self.passes_through() {
            return Err(ErrorData::method_not_found::<SubscribeRequestMethod>());
        }
        self.principal(&ctx)?;
        self.passed_subscribe(request, &ctx).await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !self.passes_through() {
            return Err(ErrorData::method_not_found::<UnsubscribeRequestMethod>());
        }
        self.principal(&ctx)?;
        self.passed_unsubscribe(request, &ctx).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let span = traced::span(&ctx, request.traceparent(), "prompts/get", &request.name);
        let answer = self
            .answer_get_prompt(request, ctx)
            .instrument(span.clone())
            .await;
        traced::record(&span, &answer);
        answer
    }
    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        if self.passed_task(&request.task_id) {
            return self.passed_get_task(request, &ctx).await;
        }
        self.answer_get_task(request, ctx).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if self.passed_task(&request.task_id) {
            return self.passed_update_task(request, &ctx).await;
        }
        self.answer_update_task(request, ctx).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if self.passed_task(&request.task_id) {
            return self.passed_cancel_task(request, &ctx).await;
        }
        self.answer_cancel_task(request, ctx).await
    }
}
