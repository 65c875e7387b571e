//! Hermes' MCP server over Streamable HTTP (`[mcp.server] http_listen`, path `/mcp`): rmcp's
//! `StreamableHttpService` on its own hyper listener (not actix-web), behind three checks:
//!
//! 1. **DNS rebinding**: `Host` must be a loopback name or one of `allowed_hosts`, and a
//!    browser `Origin`, when sent, must be a loopback origin or one of `allowed_origins` (rmcp
//!    enforces both; 403).
//! 2. **Authentication**: `Authorization: Bearer <token>` must match a configured token
//!    (compared by sha256; never logged) → a [`Principal`] attached to the request. Without a
//!    header the `anonymous` principal is used only on a loopback listener; else 401.
//! 3. **Authorisation** happens per call in the handler (tools per role, data per user).
//!
//! Refusals are audited on `hermes.audit.auth_denied`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::serving::{self, Serving};

use super::auth::{Denied, TokenTable};
use super::{HermesMcpServer, ServerDeps, SERVER_NAME};
use crate::config::McpHostConfig;
use crate::mcp::audit::{self, AuditRecord};
use crate::protocol::subjects::audit_kinds;

/// The listener's name in the log.
const LISTENER: &str = "the MCP server over HTTP";

/// The MCP endpoint's path.
pub const PATH: &str = "/mcp";

type Body = BoxBody<Bytes, Infallible>;
type Service = StreamableHttpService<HermesMcpServer, LocalSessionManager>;

/// A running HTTP endpoint; stops when [`HttpServer::stop`] is called or it is dropped.
pub struct HttpServer {
    pub addr: SocketAddr,
    cancel: CancellationToken,
    serving: Serving,
}

impl HttpServer {
    /// `http://<addr>/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{PATH}", self.addr)
    }

    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// Stop accepting and wait for the requests in flight to finish (Ctrl-C).
    pub fn shutdown(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let serving = self.serving.clone();
        async move { serving.shutdown().await }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Why Hermes' MCP server cannot serve over HTTP.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpHttpError {
    #[error(
        "the MCP HTTP server cannot listen on {listen}: {source}; choose a free port in \
         [mcp.server] http_listen (or --http)"
    )]
    Bind {
        listen: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tokens(#[from] super::auth::TokenError),
}

/// Bind `listen` and serve until stopped, at most
/// [`DEFAULT_MAX_CONNECTIONS`](crate::serving::DEFAULT_MAX_CONNECTIONS) connections at once.
/// Must run on the I/O runtime.
pub async fn start(
    listen: &str,
    deps: ServerDeps,
    host: &McpHostConfig,
) -> Result<HttpServer, McpHttpError> {
    start_capped(listen, deps, host, serving::DEFAULT_MAX_CONNECTIONS).await
}

/// [`start`], at most `max_connections` connections at once (`[http] max_connections`).
pub async fn start_capped(
    listen: &str,
    deps: ServerDeps,
    host: &McpHostConfig,
    max_connections: usize,
) -> Result<HttpServer, McpHttpError> {
    let bind = |source| McpHttpError::Bind {
        listen: listen.to_owned(),
        source,
    };
    let listener = TcpListener::bind(listen).await.map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    let mut tokens = TokenTable::from_config(host)?;
    if !addr.ip().is_loopback() {
        if host.anonymous.is_some() {
            tracing::warn!(%addr, "[mcp.server] anonymous is ignored: the listener is not on loopback");
        }
        tokens = tokens.without_anonymous();
    }
    let cancel = CancellationToken::new();
    let service = rmcp_service(deps.clone(), host, cancel.child_token());
    let gate = Arc::new(Gate {
        service,
        tokens,
        deps,
    });
    let serving = serving::spawn(
        LISTENER,
        listener,
        max_connections,
        cancel.clone(),
        move |stream, shutdown| connection(stream, gate.clone(), shutdown),
    );
    tracing::info!(url = %format!("http://{addr}{PATH}"), "MCP server listening");
    Ok(HttpServer {
        addr,
        cancel,
        serving,
    })
}

fn rmcp_service(deps: ServerDeps, host: &McpHostConfig, cancel: CancellationToken) -> Service {
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
        "[::1]".to_owned(),
    ];
    hosts.extend(host.allowed_hosts.iter().cloned());
    // A page served from this machine may call; any other browser origin must be listed.
    let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .flat_map(|h| [format!("http://{h}:*"), format!("https://{h}:*")])
        .collect();
    origins.extend(host.allowed_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_cancellation_token(cancel);
    let deps = Arc::new(deps);
    StreamableHttpService::new(
        move || Ok(HermesMcpServer::new(deps.clone(), None)),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// What every connection shares: the rmcp service and the token table.
struct Gate {
    service: Service,
    tokens: TokenTable,
    deps: ServerDeps,
}

/// One connection, through the [`Gate`].
async fn connection(stream: tokio::net::TcpStream, gate: Arc<Gate>, shutdown: CancellationToken) {
    let service = service_fn(move |request| {
        let gate = gate.clone();
        async move { Ok::<_, Infallible>(gate.handle(request).await) }
    });
    serving::http1(LISTENER, stream, service, shutdown).await;
}

impl Gate {
    async fn handle(&self, mut request: Request<Incoming>) -> Response<Body> {
        if request.uri().path() != PATH {
            return plain(
                StatusCode::NOT_FOUND,
                &format!("Hermes serves MCP at {PATH}"),
            );
        }
        let authorization = request
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok());
        match self.tokens.authenticate(authorization) {
            Ok(principal) => {
                request.extensions_mut().insert(principal);
                self.service.handle(request).await
            }
            Err(denied) => {
                self.audit_refusal(&denied).await;
                let mut response = plain(StatusCode::UNAUTHORIZED, &denied.to_string());
                response.headers_mut().insert(
                    hyper::header::WWW_AUTHENTICATE,
                    hyper::header::HeaderValue::from_static("Bearer realm=\"hermes\""),
                );
                response
            }
        }
    }

    async fn audit_refusal(&self, denied: &Denied) {
        tracing::warn!(reason = %denied, "MCP HTTP request refused");
        let record =
            AuditRecord::new("server", None, SERVER_NAME, "auth", PATH).denied(&denied.to_string());
        audit::publish(self.deps.bus.as_ref(), audit_kinds::AUTH_DENIED, &record).await;
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_owned())).boxed());
    *response.status_mut() = status;
    response
}
