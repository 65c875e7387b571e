//! The passthrough's client side towards the mounted server ([`Relay`]): what the server
//! sends during a forwarded request goes on to Hermes' own client — its log messages, its
//! progress (under the client's progress token), resource updates and list changes, and its
//! sampling, elicitation and roots requests (on the stream of the client request they belong
//! to), whose answers go back to the server.
//!
//! [`Routes`] maps each request in flight to the mounted server back to the client request
//! it forwards, and the progress token rmcp gave it to the client's own.

// Logging, sampling and roots are deprecated by SEP-2577 but are what 2025-11-25 servers
// send; relaying them is the point.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientConfig, ClientResult, CreateMessageRequest, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequest, ElicitRequestParams, ElicitResult, GetExtensions,
    ListRootsRequest, ListRootsResult, LoggingMessageNotificationParam, ProgressNotificationParam,
    ProgressToken, RequestId, ResourceUpdatedNotificationParam, ServerRequest,
};
use rmcp::service::{
    InboundStreamOrigin, NotificationContext, OriginatingRequestId, RequestContext,
};
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient, RoleServer, ServiceError};

/// Where the mounted server's traffic goes back to: the client's peer, and the requests in
/// flight.
pub(super) struct Routes {
    downstream: Peer<RoleServer>,
    inner: Mutex<Tables>,
    /// Notifications being relayed now. rmcp hands each notification to its own task, so a
    /// request's answer may overtake the notifications sent before it; a forwarded request
    /// waits for these before answering (a stateless client's stream ends with the answer).
    relaying: tokio::sync::watch::Sender<usize>,
}

/// Counts one notification as being relayed until dropped.
struct Relaying<'a>(&'a tokio::sync::watch::Sender<usize>);

impl Drop for Relaying<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[derive(Default)]
struct Tables {
    /// The mounted server's request id → the client's request id.
    requests: HashMap<RequestId, RequestId>,
    /// The progress token rmcp sent the server → the client's progress token.
    progress: HashMap<ProgressToken, ProgressToken>,
    /// Client requests in flight, oldest first (for server requests that name none).
    order: Vec<RequestId>,
}

/// One forwarded request's entries in [`Routes`], removed by [`Routes::close`].
pub(super) struct Route {
    upstream: RequestId,
    token: Option<ProgressToken>,
}

impl Routes {
    pub(super) fn new(downstream: Peer<RoleServer>) -> Self {
        Self {
            downstream,
            inner: Mutex::new(Tables::default()),
            relaying: tokio::sync::watch::Sender::new(0),
        }
    }

    fn relaying(&self) -> Relaying<'_> {
        self.relaying.send_modify(|n| *n += 1);
        Relaying(&self.relaying)
    }

    /// Let the notifications the mounted server sent before its answer reach the client
    /// first: give their tasks a turn to start, then wait (briefly) for them to finish.
    pub(super) async fn settle(&self) {
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        let mut relaying = self.relaying.subscribe();
        let drained = relaying.wait_for(|n| *n == 0);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drained).await;
    }

    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        // A panic while holding this lock leaves plain maps, still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn open(
        &self,
        upstream: RequestId,
        downstream: RequestId,
        progress: Option<(ProgressToken, ProgressToken)>,
    ) -> Route {
        let mut tables = self.tables();
        tables.requests.insert(upstream.clone(), downstream.clone());
        tables.order.push(downstream);
        let token = progress.map(|(theirs, ours)| {
            tables.progress.insert(theirs.clone(), ours);
            theirs
        });
        Route { upstream, token }
    }

    pub(super) fn close(&self, route: Route) {
        let mut tables = self.tables();
        if let Some(downstream) = tables.requests.remove(&route.upstream) {
            tables.order.retain(|id| id != &downstream);
        }
        if let Some(token) = route.token {
            tables.progress.remove(&token);
        }
    }

    /// The client request a server request of `ctx` belongs to: the one whose stream it came
    /// on, else the latest in flight.
    fn originating(&self, ctx: &RequestContext<RoleClient>) -> Option<RequestId> {
        let tables = self.tables();
        let on_stream = match ctx.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => tables.requests.get(id).cloned(),
            _ => None,
        };
        on_stream.or_else(|| tables.order.last().cloned())
    }

    fn client_token(&self, theirs: &ProgressToken) -> Option<ProgressToken> {
        self.tables().progress.get(theirs).cloned()
    }

    /// Send a server request on to the client, on the stream of the request it belongs to.
    async fn ask(
        &self,
        mut request: ServerRequest,
        ctx: &RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        if let Some(id) = self.originating(ctx) {
            request.extensions_mut().insert(OriginatingRequestId(id));
        }
        self.downstream
            .send_request(request)
            .await
            .map_err(|error| match error {
                ServiceError::McpError(error) => error,
                other => ErrorData::internal_error(
                    format!("the client did not answer the mounted server's request: {other}"),
                    None,
                ),
            })
    }
}

fn unexpected(method: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("the client answered `{method}` with a result of another kind"),
        None,
    )
}

/// The passthrough session's client handler.
pub(super) struct Relay {
    info: ClientConfig,
    routes: Arc<Routes>,
}

impl Relay {
    pub(super) fn new(info: ClientConfig, routes: Arc<Routes>) -> Self {
        Self { info, routes }
    }

    /// Send a notification on; a client that went away is not the server's problem.
    fn notified(&self, what: &str, sent: Result<(), ServiceError>) {
        if let Err(error) = sent {
            tracing::debug!(%error, what, "passthrough: a notification did not reach the client");
        }
    }
}

impl ClientHandler for Relay {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        ctx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match self.routes.ask(request, &ctx).await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(unexpected("sampling/createMessage")),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match self.routes.ask(request, &ctx).await? {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(unexpected("elicitation/create")),
        }
    }

    async fn list_roots(
        &self,
        ctx: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
        match self.routes.ask(request, &ctx).await? {
            ClientResult::ListRootsResult(result) => Ok(result),
            _ => Err(unexpected("roots/list")),
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let _relaying = self.routes.relaying();
        // Progress of a request the client gave no token for has nowhere to go.
        match self.routes.client_token(&params.progress_token) {
            Some(token) => {
                let mut params = params;
                params.progress_token = token;
                let sent = self.routes.downstream.notify_progress(params).await;
                self.notified("progress", sent);
            }
            None => {
                tracing::debug!(token = ?params.progress_token, "passthrough: progress of a request without a client token dropped")
            }
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let _relaying = self.routes.relaying();
        let sent = self.routes.downstream.notify_logging_message(params).await;
        self.notified("message", sent);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let sent = self.routes.downstream.notify_resource_updated(params).await;
        self.notified("resources/updated", sent);
    }

    async fn on_resource_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        let sent = self.routes.downstream.notify_resource_list_changed().await;
        self.notified("resources/list_changed", sent);
    }

    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        let sent = self.routes.downstream.notify_tool_list_changed().await;
        self.notified("tools/list_changed", sent);
    }

    async fn on_prompt_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        let sent = self.routes.downstream.notify_prompt_list_changed().await;
        self.notified("prompts/list_changed", sent);
    }
}
