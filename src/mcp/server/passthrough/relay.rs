//! The passthrough's client side towards the mounted server: what the server sends goes on
//! to Hermes' own client — its notifications ([`Routes::relay`], in arrival order: log
//! messages, progress under the client's progress token, resource updates, list changes,
//! task states) and its sampling, elicitation and roots requests ([`Relay`], on the stream of
//! the client request they belong to), whose answers go back to the server.
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
    ListRootsRequest, ListRootsResult, ProgressToken, RequestId, ServerNotification, ServerRequest,
};
use rmcp::service::{InboundStreamOrigin, OriginatingRequestId, RequestContext};
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient, RoleServer, ServiceError};
use tokio::sync::mpsc;

/// Where the mounted server's traffic goes back to: the client's peer, and the requests in
/// flight.
pub(super) struct Routes {
    downstream: Peer<RoleServer>,
    inner: Mutex<Tables>,
    /// Notifications taken off the wire but not yet sent on. A forwarded request waits for
    /// these before answering (a stateless client's stream ends with the answer).
    pending: tokio::sync::watch::Sender<usize>,
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
            pending: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Count a notification taken off the wire; [`Routes::relay`] sends it on.
    pub(super) fn taken(&self) {
        self.pending.send_modify(|n| *n += 1);
    }

    /// Uncount a notification that could not be queued.
    pub(super) fn dropped(&self) {
        self.pending.send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Let the notifications the mounted server sent before its answer reach the client
    /// first (they were taken off the wire before the answer, so they are counted).
    pub(super) async fn settle(&self) {
        let mut pending = self.pending.subscribe();
        let drained = pending.wait_for(|n| *n == 0);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), drained).await;
    }

    /// Send the mounted server's notifications on to the client, one at a time in the order
    /// they arrived, until the session with the server ends.
    pub(super) async fn relay(
        self: Arc<Self>,
        mut taken: mpsc::UnboundedReceiver<ServerNotification>,
    ) {
        while let Some(notification) = taken.recv().await {
            self.send_on(notification).await;
            self.pending.send_modify(|n| *n = n.saturating_sub(1));
        }
    }

    async fn send_on(&self, notification: ServerNotification) {
        let sent = match notification {
            ServerNotification::ProgressNotification(mut progress) => {
                // Progress of a request the client gave no token for has nowhere to go.
                let Some(token) = self.client_token(&progress.params.progress_token) else {
                    return;
                };
                progress.params.progress_token = token;
                self.downstream
                    .send_notification(ServerNotification::ProgressNotification(progress))
                    .await
            }
            other => self.downstream.send_notification(other).await,
        };
        if let Err(error) = sent {
            tracing::debug!(%error, "passthrough: a notification did not reach the client");
        }
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
}
