//! What [`HermesMcpServer`] answers through the [`Passthrough`](super::passthrough): the
//! mounted server's lists merged after Hermes' own (on the first page; the server's cursor,
//! `ttlMs` and `cacheScope` pass through), and its tool calls, resource reads, prompts,
//! completions, logging level, subscriptions and the tasks of the tasks extension
//! (`tasks/get`, `tasks/update`, `tasks/cancel` for a task the server answered a call with)
//! forwarded. A tool call is authorised for the caller's roles like Hermes' own tools; calls,
//! reads and task changes are audited.

// Logging and resources/subscribe are deprecated by SEP-2577 but are what 2025-11-25 clients
// and servers speak; forwarding them is the point.
#![allow(deprecated)]

use std::time::Instant;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, ClientRequest, CompleteRequest,
    CompleteRequestParams, CompleteResult, ContentBlock, GetPromptRequest, GetPromptRequestParams,
    GetPromptResponse, ListPromptsRequest, ListPromptsResult, ListResourceTemplatesRequest,
    ListResourceTemplatesResult, ListResourcesRequest, ListResourcesResult, ListToolsRequest,
    ListToolsResult, PaginatedRequestParams, ProgressToken, ReadResourceRequest,
    ReadResourceRequestParams, ReadResourceResponse, RequestMetaObject, ServerResult,
    SetLevelRequest, SetLevelRequestParams, SubscribeRequest, SubscribeRequestParams,
    UnsubscribeRequest, UnsubscribeRequestParams,
};
use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, GetTaskParams, GetTaskRequest, GetTaskResult,
    UpdateTaskParams, UpdateTaskRequest,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::auth::Principal;
use super::passthrough::Passthrough;
use super::HermesMcpServer;

fn unexpected(server: &str, method: &str) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "the passthrough server `{server}` answered `{method}` with a result of another kind"
        ),
        None,
    )
}

/// The client's progress token: rmcp keeps `_meta` in the context, older paths in params.
fn progress_token(
    ctx: &RequestContext<RoleServer>,
    in_params: Option<&RequestMetaObject>,
) -> Option<ProgressToken> {
    ctx.meta
        .get_progress_token()
        .or_else(|| in_params.and_then(RequestMetaObject::get_progress_token))
}

/// The request's `_meta` as the client sent it, for the mounted server (rmcp sets its own
/// progress token and protocol fields over it).
fn meta(
    ctx: &RequestContext<RoleServer>,
    in_params: Option<RequestMetaObject>,
) -> Option<RequestMetaObject> {
    in_params.or_else(|| (!ctx.meta.0 .0.is_empty()).then(|| ctx.meta.clone()))
}

/// Whether a list request asks for the first page (where Hermes' own items go).
pub(super) fn first_page(request: &Option<PaginatedRequestParams>) -> bool {
    request.as_ref().and_then(|r| r.cursor.as_ref()).is_none()
}

impl HermesMcpServer {
    fn through(&self) -> Option<&Passthrough> {
        self.passthrough.as_deref()
    }

    /// Whether a mounted server is served through this one.
    pub(super) fn passes_through(&self) -> bool {
        self.passthrough.is_some()
    }

    async fn forward(
        &self,
        ctx: &RequestContext<RoleServer>,
        request: ClientRequest,
        progress: Option<ProgressToken>,
    ) -> Result<(ServerResult, &str), ErrorData> {
        let Some(through) = self.through() else {
            return Err(ErrorData::internal_error(
                "no mounted server is served through Hermes; set [mcp.server] passthrough",
                None,
            ));
        };
        let result = through.forward(ctx, request, progress).await?;
        Ok((result, through.server()))
    }

    pub(super) async fn passed_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let list = ClientRequest::ListToolsRequest(ListToolsRequest {
            method: Default::default(),
            params: request,
            extensions: Default::default(),
        });
        match self.forward(ctx, list, None).await? {
            (ServerResult::ListToolsResult(result), _) => Ok(result),
            (_, server) => Err(unexpected(server, "tools/list")),
        }
    }

    pub(super) async fn passed_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let list = ClientRequest::ListResourcesRequest(ListResourcesRequest {
            method: Default::default(),
            params: request,
            extensions: Default::default(),
        });
        match self.forward(ctx, list, None).await? {
            (ServerResult::ListResourcesResult(result), _) => Ok(result),
            (_, server) => Err(unexpected(server, "resources/list")),
        }
    }

    pub(super) async fn passed_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let list = ClientRequest::ListResourceTemplatesRequest(ListResourceTemplatesRequest {
            method: Default::default(),
            params: request,
            extensions: Default::default(),
        });
        match self.forward(ctx, list, None).await? {
            (ServerResult::ListResourceTemplatesResult(result), _) => Ok(result),
            (_, server) => Err(unexpected(server, "resources/templates/list")),
        }
    }

    pub(super) async fn passed_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let list = ClientRequest::ListPromptsRequest(ListPromptsRequest {
            method: Default::default(),
            params: request,
            extensions: Default::default(),
        });
        match self.forward(ctx, list, None).await? {
            (ServerResult::ListPromptsResult(result), _) => Ok(result),
            (_, server) => Err(unexpected(server, "prompts/list")),
        }
    }

    /// Forward a tool call the caller's roles allow (checked by the caller), audited.
    pub(super) async fn passed_call(
        &self,
        who: &Principal,
        mut request: CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        let name = request.name.to_string();
        let progress = progress_token(ctx, request.meta.as_ref());
        tracing::debug!(tool = %name, ?progress, "passthrough: tools/call");
        request.meta = meta(ctx, request.meta.take());
        let call = ClientRequest::CallToolRequest(CallToolRequest::new(request));
        let answer = match self.forward(ctx, call, progress).await {
            Ok((ServerResult::CallToolResult(result), _)) => Ok(CallToolResponse::Complete(result)),
            Ok((ServerResult::InputRequiredResult(result), _)) => {
                Ok(CallToolResponse::InputRequired(result))
            }
            Ok((ServerResult::CreateTaskResult(result), _)) => Ok(CallToolResponse::Task(result)),
            Ok((_, server)) => Err(unexpected(server, "tools/call")),
            Err(error) => Err(error),
        };
        let error = match &answer {
            Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => {
                Some(first_text(&result.content))
            }
            Ok(_) => None,
            Err(error) => Some(error.message.to_string()),
        };
        self.audited(who, "tools/call", &name, started, error).await;
        answer
    }

    /// Forward a resource read, audited.
    pub(super) async fn passed_read(
        &self,
        who: &Principal,
        mut request: ReadResourceRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let started = Instant::now();
        let uri = request.uri.clone();
        let progress = progress_token(ctx, request.meta.as_ref());
        request.meta = meta(ctx, request.meta.take());
        let read = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(request));
        let answer = match self.forward(ctx, read, progress).await {
            Ok((ServerResult::ReadResourceResult(result), _)) => {
                Ok(ReadResourceResponse::Complete(result))
            }
            Ok((ServerResult::InputRequiredResult(result), _)) => {
                Ok(ReadResourceResponse::InputRequired(result))
            }
            Ok((_, server)) => Err(unexpected(server, "resources/read")),
            Err(error) => Err(error),
        };
        let error = answer.as_ref().err().map(|e| e.message.to_string());
        self.audited(who, "resources/read", &uri, started, error)
            .await;
        answer
    }

    pub(super) async fn passed_prompt(
        &self,
        mut request: GetPromptRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let progress = progress_token(ctx, request.meta.as_ref());
        request.meta = meta(ctx, request.meta.take());
        let get = ClientRequest::GetPromptRequest(GetPromptRequest::new(request));
        match self.forward(ctx, get, progress).await? {
            (ServerResult::GetPromptResult(result), _) => Ok(GetPromptResponse::Complete(result)),
            (ServerResult::InputRequiredResult(result), _) => {
                Ok(GetPromptResponse::InputRequired(result))
            }
            (_, server) => Err(unexpected(server, "prompts/get")),
        }
    }

    pub(super) async fn passed_complete(
        &self,
        request: CompleteRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let complete = ClientRequest::CompleteRequest(CompleteRequest::new(request));
        match self.forward(ctx, complete, None).await? {
            (ServerResult::CompleteResult(result), _) => Ok(result),
            (_, server) => Err(unexpected(server, "completion/complete")),
        }
    }

    pub(super) async fn passed_set_level(
        &self,
        request: SetLevelRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let set = ClientRequest::SetLevelRequest(SetLevelRequest::new(request));
        self.forward(ctx, set, None).await.map(|_| ())
    }

    pub(super) async fn passed_subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let subscribe = ClientRequest::SubscribeRequest(SubscribeRequest::new(request));
        self.forward(ctx, subscribe, None).await.map(|_| ())
    }

    pub(super) async fn passed_unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let unsubscribe = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(request));
        self.forward(ctx, unsubscribe, None).await.map(|_| ())
    }
}

/// The mounted server's tasks (a call it answered with a task).
impl HermesMcpServer {
    pub(super) async fn passed_get_task(
        &self,
        request: GetTaskParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.principal(ctx)?;
        let get = ClientRequest::GetTaskRequest(GetTaskRequest::new(request));
        match self.forward(ctx, get, None).await? {
            (ServerResult::GetTaskResult(result), _) => Ok(result),
            (_, server) => Err(unexpected(server, "tasks/get")),
        }
    }

    pub(super) async fn passed_update_task(
        &self,
        request: UpdateTaskParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let who = self.principal(ctx)?;
        let started = Instant::now();
        let id = request.task_id.clone();
        let update = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(request));
        let answer = self.forward(ctx, update, None).await.map(|_| ());
        let error = answer.as_ref().err().map(|e| e.message.to_string());
        self.audited(&who, "tasks/update", &id, started, error)
            .await;
        answer
    }

    pub(super) async fn passed_cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let who = self.principal(ctx)?;
        let started = Instant::now();
        let id = request.task_id.clone();
        let cancel = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(request));
        let answer = self.forward(ctx, cancel, None).await.map(|_| ());
        let error = answer.as_ref().err().map(|e| e.message.to_string());
        self.audited(&who, "tasks/cancel", &id, started, error)
            .await;
        answer
    }
}

/// The first text block of a failed call, for the audit.
fn first_text(content: &[ContentBlock]) -> String {
    content
        .iter()
        .find_map(|block| block.as_text().map(|text| text.text.clone()))
        .unwrap_or_else(|| "the tool reported an error".to_owned())
}
