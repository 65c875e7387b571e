//! [`HermesMcpServer`]: the rmcp `ServerHandler` of Hermes' own MCP server. Tools
//! `memory_write`, `memory_search`, `memory_forget`, the configured `expose_tools` and one
//! per `expose_agents` agent (with `tasks/get`, `tasks/update`, `tasks/cancel` for their
//! tasks); the caller's memories as resources `memory://<user>/<id>`; the prompt `memory_qa`.
//! Every call is authorised for its principal (tool and data level) and audited.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::RequestParamsMeta;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities,
    ServerConfig, Tool,
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
use super::memory::{
    self, ForgetArgs, MemoryArgsError, MemoryClient, ReadFailure, SearchArgs, WriteArgs,
};
use super::passthrough::Passthrough;
use super::{exposed, traced, ServerDeps, SERVER_NAME};
use crate::mcp::audit::{self, AuditRecord};
use crate::protocol::subjects::audit_kinds;
use crate::protocol::{MemoryForgetRequest, MemoryListRequest, RecallRequest};

pub(super) const WRITE: &str = "memory_write";
pub(super) const SEARCH: &str = "memory_search";
pub(super) const FORGET: &str = "memory_forget";
const QA_PROMPT: &str = "memory_qa";

/// One MCP session's handler: the shared deps and, over stdio, its fixed principal.
#[derive(Clone)]
pub struct HermesMcpServer {
    pub(super) deps: Arc<ServerDeps>,
    fixed: Option<Principal>,
    /// The session with the mounted server served through this one, if any.
    pub(super) passthrough: Option<Arc<Passthrough>>,
}

/// What a tool call produced: the text/JSON result, or an error for the caller.
type Outcome = Result<Value, String>;

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

    fn memory(&self) -> MemoryClient<'_> {
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

    async fn run_tool(
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

    async fn write(
        &self,
        who: &Principal,
        args: Result<WriteArgs, MemoryArgsError>,
    ) -> Result<Outcome, Denied> {
        let args = match args {
            Ok(args) => args,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let user = args.user.clone().unwrap_or_else(|| who.user.clone());
        let namespace = memory::namespace_or_default(args.namespace.as_deref()).to_owned();
        who.check_data(&user, &namespace)?;
        let source = format!("mcp:{}", who.user);
        let outcome = match memory::write_request(args, &user, &namespace, &source) {
            Ok(request) => self
                .memory()
                .write(request)
                .await
                .map(|reply| json!({"changes": reply.changes}))
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        Ok(outcome)
    }

    async fn search(
        &self,
        who: &Principal,
        args: Result<SearchArgs, MemoryArgsError>,
    ) -> Result<Outcome, Denied> {
        let args = match args {
            Ok(args) => args,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let user = args.user.clone().unwrap_or_else(|| who.user.clone());
        // Another user's memories are searched in one (granted) namespace only, never across.
        let namespace = match (&args.namespace, user == who.user) {
            (None, true) => None,
            (namespace, _) => {
                let namespace = memory::namespace_or_default(namespace.as_deref()).to_owned();
                who.check_data(&user, &namespace)?;
                Some(namespace)
            }
        };
        let request = RecallRequest {
            user,
            query: args.query,
            limit: args.limit.unwrap_or(5).clamp(1, 5),
            namespace,
            ..RecallRequest::default()
        };
        let outcome = self.memory().recall(request).await.map(|reply| {
            let hits: Vec<Value> = reply
                .hits
                .iter()
                .map(|hit| memory::hit_json(&hit.record, hit.score))
                .collect();
            json!({ "memories": hits })
        });
        let outcome = outcome.map_err(|e| e.to_string());
        Ok(outcome)
    }

    async fn forget(
        &self,
        who: &Principal,
        args: Result<ForgetArgs, MemoryArgsError>,
    ) -> Result<Outcome, Denied> {
        let args = match args {
            Ok(args) => args,
            Err(e) => return Ok(Err(e.to_string())),
        };
        if args.id.is_none() && args.key.is_none() {
            return Ok(Err(
                "give the memory's `id` (from memory_search) or its `key`".into(),
            ));
        }
        let user = args.user.clone().unwrap_or_else(|| who.user.clone());
        let namespace = memory::namespace_or_default(args.namespace.as_deref()).to_owned();
        who.check_data(&user, &namespace)?;
        let request = MemoryForgetRequest {
            user,
            namespace,
            id: args.id,
            key: args.key,
        };
        Ok(self
            .memory()
            .forget(request)
            .await
            .map(|reply| json!({"changes": reply.changes}))
            .map_err(|e| e.to_string()))
    }

    fn memory_tools() -> Vec<Tool> {
        vec![
            Tool::new(WRITE, "Remember one thing about a user for later conversations and other agents: a fact, preference, constraint or event, as one sentence. Writing the same `key` again updates it. Returns {changes: [{op, key, content}]}. Writes only your own user's memories unless your role grants the namespace.", rmcp::handler::server::common::schema_for_type::<WriteArgs>()),
            Tool::new(SEARCH, "Search a user's memories by words (Chinese or English); returns up to 5, best first: {memories: [{id, uri, key, content, kind, namespace, score}]}. Use before answering questions about the user's preferences or history.", rmcp::handler::server::common::schema_for_type::<SearchArgs>()),
            Tool::new(FORGET, "Forget one memory, by its `id` (from memory_search) or its `key`. Returns {changes}. Use when the user asks to forget or cancel something.", rmcp::handler::server::common::schema_for_type::<ForgetArgs>()),
        ]
    }

    async fn read_memory(
        &self,
        who: &Principal,
        uri: &str,
    ) -> Result<Result<ReadResourceResult, ReadFailure>, Denied> {
        let Some((user, id)) = memory::parse_uri(uri) else {
            return Ok(Err(ReadFailure::NotAMemoryUri(uri.to_owned())));
        };
        if user != who.user {
            // Only a granted namespace opens another user's record: look it up, then check.
            let records = self
                .memory()
                .list(MemoryListRequest {
                    user: user.clone(),
                    namespace: None,
                    id: Some(id.clone()),
                    ..MemoryListRequest::default()
                })
                .await;
            let namespace = match &records {
                Ok(records) => records.first().map(|r| r.namespace.clone()),
                Err(_) => None,
            };
            who.check_data(
                &user,
                namespace
                    .as_deref()
                    .unwrap_or(memory::namespace_or_default(None)),
            )?;
        }
        let records = self
            .memory()
            .list(MemoryListRequest {
                user,
                namespace: None,
                id: Some(id),
                ..MemoryListRequest::default()
            })
            .await;
        Ok(match records {
            Ok(records) => match records.into_iter().next() {
                Some(record) => {
                    let text = serde_json::to_string_pretty(&record).unwrap_or_default();
                    Ok(ReadResourceResult::new(vec![
                        ResourceContents::TextResourceContents {
                            uri: uri.to_owned(),
                            mime_type: Some("application/json".into()),
                            text,
                            meta: None,
                        },
                    ]))
                }
                None => Err(ReadFailure::NotFound(uri.to_owned())),
            },
            Err(e) => Err(e.into()),
        })
    }

    async fn qa_prompt(
        &self,
        who: &Principal,
        arguments: Option<JsonObject>,
    ) -> Result<GetPromptResult, ErrorData> {
        let question = arguments
            .as_ref()
            .and_then(|args| args.get("question"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ErrorData::invalid_params("memory_qa needs the argument `question`", None)
            })?
            .to_owned();
        let recalled = self
            .memory()
            .recall(RecallRequest {
                user: who.user.clone(),
                query: question.clone(),
                limit: 5,
                ..RecallRequest::default()
            })
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let memories: Vec<String> = recalled
            .hits
            .iter()
            .map(|hit| format!("- [{}] {}", hit.record.key, hit.record.content))
            .collect();
        let listed = if memories.is_empty() {
            "(none found)".to_owned()
        } else {
            memories.join("\n")
        };
        let text = format!(
            "Answer the question about user `{}` using only the memories below. If they do not \
             contain the answer, say that you do not know.\n\nMemories:\n{listed}\n\nQuestion: {question}",
            who.user
        );
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]).with_description(
                format!("Memory QA for `{}` ({} memories)", who.user, memories.len()),
            ),
        )
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

/// The answers behind the traced [`ServerHandler`] methods.
impl HermesMcpServer {
    /// Whether `task_id` is a task of the passthrough server rather than of an exposed agent.
    fn passed_task(&self, task_id: &str) -> bool {
        self.passes_through()
            && !agents::parse_task_id(task_id)
                .is_some_and(|(agent, _, _)| agents::offered(&self.deps, agent))
    }

    async fn answer_call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let who = self.principal(&ctx)?;
        let name = request.name.to_string();
        let is_agent = agents::offered(&self.deps, &name);
        let known = [WRITE, SEARCH, FORGET].contains(&name.as_str())
            || is_agent
            || exposed::offered(&self.deps, &name);
        if !known && self.passes_through() {
            if let Err(denied) = who.check_tool(&name) {
                return Err(self.deny(&who, "tools/call", &name, denied).await);
            }
            return self.passed_call(&who, request, &ctx).await;
        }
        if !known {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`; call tools/list"),
                None,
            ));
        }
        if let Err(denied) = who.check_tool(&name) {
            return Err(self.deny(&who, "tools/call", &name, denied).await);
        }
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        if is_agent {
            return self.call_agent(&who, &name, arguments, &ctx).await;
        }
        let started = Instant::now();
        let key = idempotency_key(&request, &ctx);
        let outcome = match self.run_tool(&who, &name, arguments, key.as_deref()).await {
            Ok(outcome) => outcome,
            Err(denied) => return Err(self.deny(&who, "tools/call", &name, denied).await),
        };
        self.audited(
            &who,
            "tools/call",
            &name,
            started,
            outcome.as_ref().err().cloned(),
        )
        .await;
        Ok(match outcome {
            Ok(value) => {
                let mut result =
                    CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
                result.structured_content = Some(value);
                result
            }
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e)]),
        }
        .into())
    }

    async fn answer_read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let who = self.principal(&ctx)?;
        if self.passes_through() && !request.uri.starts_with(memory::URI_SCHEME) {
            return self.passed_read(&who, request, &ctx).await;
        }
        let started = Instant::now();
        let outcome = match self.read_memory(&who, &request.uri).await {
            Ok(outcome) => outcome,
            Err(denied) => {
                return Err(self
                    .deny(&who, "resources/read", &request.uri, denied)
                    .await)
            }
        };
        self.audited(
            &who,
            "resources/read",
            &request.uri,
            started,
            outcome.as_ref().err().map(ToString::to_string),
        )
        .await;
        outcome.map(Into::into).map_err(|e| e.to_error_data())
    }

    async fn answer_get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let who = self.principal(&ctx)?;
        if request.name != QA_PROMPT && self.passes_through() {
            return self.passed_prompt(request, &ctx).await;
        }
        if request.name != QA_PROMPT {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown prompt `{}`; the prompt is `{QA_PROMPT}`",
                    request.name
                ),
                None,
            ));
        }
        self.qa_prompt(&who, request.arguments)
            .await
            .map(Into::into)
    }
}

/// The client's idempotency key of a call (`_meta["io.hermes/idempotencyKey"]`), if any.
fn idempotency_key(
    request: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Option<String> {
    let in_params = request
        .meta
        .as_ref()
        .and_then(|meta| meta.0 .0.get(exposed::IDEMPOTENCY_KEY).cloned());
    in_params
        .or_else(|| ctx.meta.0 .0.get(exposed::IDEMPOTENCY_KEY).cloned())
        .and_then(|key| key.as_str().map(str::to_owned))
        .filter(|key| !key.is_empty())
}
