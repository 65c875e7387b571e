//! The A2A server: Hermes agents served on the HTTP listener of `hermes serve --http ADDR`,
//! each at `/a2a/<agent>` with both A2A 1.0 bindings on that one base URL —
//! JSON-RPC 2.0 (`POST /a2a/<agent>`) and HTTP+JSON (`/a2a/<agent>/message:send`,
//! `/tasks/{id}`, …) — and its Agent Card at `/a2a/<agent>/.well-known/agent-card.json`
//! (the default agent's also at `/.well-known/agent-card.json`).
//!
//! The work runs wherever the session lives: this server only talks to sessions over the bus
//! ([`crate::a2a::sessions`]), so any process on the bus can serve A2A.
//!
//! - [`routes`]: paths → operations; [`card`]: Agent Cards; [`jsonrpc`] and [`rest`]: the
//!   two bindings; [`send`], [`task_ops`], [`push_ops`]: the operations, binding-neutral;
//!   [`follow`]: a running task's updates; [`sse`]: Server-Sent Events.
//!
//! Callers authenticate with the bearer tokens of Hermes' MCP server (`[[mcp.server.tokens]]`,
//! `[mcp.server] anonymous` on a loopback listener); a caller sees only its own user's tasks.

pub mod card;
pub mod follow;
pub mod jsonrpc;
pub mod push_ops;
pub mod rest;
pub mod routes;
pub mod send;
pub mod sse;
pub mod task_ops;

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response, StatusCode};

use super::push::{Notifier, Retry};
use super::push_store::PushStore;
use super::sessions::Sessions;
use super::wire::{error_code, A2AError};
use crate::bus::SharedBus;
use crate::config::Config;
use crate::mcp::server::auth::{Principal, TokenTable};
use crate::store::durability::Durable;

/// The body of every response.
pub type Body = BoxBody<Bytes, Infallible>;

/// Where the agents are served.
pub const PREFIX: &str = "/a2a/";
/// The well-known path of an Agent Card.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

#[derive(Debug, thiserror::Error)]
pub enum A2aServerError {
    #[error("A2A cannot authenticate callers: {0}")]
    Tokens(crate::mcp::server::auth::TokenError),
    #[error("[a2a] default_agent = `{0}` is not a served agent; set `a2a = {{ expose = true }}` on it or `[a2a] expose_all = true`")]
    DefaultAgent(String),
    #[error("A2A cannot store push-notification configs: {0}")]
    Store(String),
    #[error("A2A push notifications cannot follow the agents' events: {0}")]
    Bus(#[from] crate::bus::BusError),
}

/// The A2A server of one HTTP listener.
pub struct A2aServer {
    pub(crate) sessions: Sessions,
    pub(crate) bus: SharedBus,
    pub(crate) config: Arc<Config>,
    pub(crate) agents: BTreeSet<String>,
    pub(crate) default_agent: Option<String>,
    tokens: TokenTable,
    pub(crate) push: PushStore,
    pub(crate) listen: SocketAddr,
}

impl std::fmt::Debug for A2aServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aServer")
            .field("agents", &self.agents)
            .field("listen", &self.listen)
            .finish()
    }
}

/// Who calls, for which agent.
#[derive(Debug, Clone)]
pub struct Caller {
    pub agent: String,
    pub user: String,
}

impl A2aServer {
    /// The agents `config` serves over A2A.
    pub fn served_agents(config: &Config) -> BTreeSet<String> {
        config
            .agents
            .iter()
            .filter(|(_, a)| {
                let remote = a.a2a.as_ref().is_some_and(|x| x.card_url.is_some());
                !remote && (config.a2a.expose_all || a.a2a.as_ref().is_some_and(|x| x.expose))
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The server for the listener at `listen`, with its push notifier started on the current
    /// (I/O) runtime; none when no agent is served. Push configs live in the cluster's bucket,
    /// else in `db`, else in memory.
    pub async fn start(
        bus: SharedBus,
        config: Arc<Config>,
        db: Option<&Durable>,
        listen: SocketAddr,
    ) -> Result<Option<Arc<Self>>, A2aServerError> {
        let agents = Self::served_agents(&config);
        if agents.is_empty() {
            return Ok(None);
        }
        let default_agent = match &config.a2a.default_agent {
            Some(name) if agents.contains(name) => Some(name.clone()),
            Some(name) => return Err(A2aServerError::DefaultAgent(name.clone())),
            None if agents.contains("assistant") => Some("assistant".into()),
            None => agents.iter().next().cloned(),
        };
        let mut tokens =
            TokenTable::from_config(&config.mcp.server).map_err(A2aServerError::Tokens)?;
        if !listen.ip().is_loopback() {
            tokens = tokens.without_anonymous();
        }
        let push = PushStore::open(&bus, db).map_err(|e| A2aServerError::Store(e.to_string()))?;
        let timeout = Duration::from_secs(config.engine.request_timeout_secs.max(1));
        let notifier = Notifier::new(
            push.clone(),
            Retry::from_config(&config.a2a),
            Sessions::new(bus.clone(), timeout),
        );
        notifier
            .clone()
            .run(bus.clone(), agents.iter().cloned().collect())
            .await?;
        Ok(Some(Arc::new(Self {
            sessions: Sessions::new(bus.clone(), timeout),
            bus,
            config,
            agents,
            default_agent,
            tokens,
            push,
            listen,
        })))
    }

    /// Whether the server answers `path`.
    pub fn owns(path: &str) -> bool {
        path == CARD_PATH || path.starts_with(PREFIX)
    }

    /// Answer one request.
    pub async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let route = routes::route(
            &parts.method,
            parts.uri.path(),
            self.default_agent.as_deref(),
        );
        let agent = match route.agent() {
            Some(agent) if self.agents.contains(agent) => agent.to_owned(),
            Some(agent) => {
                return plain(
                    StatusCode::NOT_FOUND,
                    format!(
                        "no agent `{agent}` is served over A2A here; served: {}\n",
                        self.agents.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                )
            }
            None => return plain(StatusCode::NOT_FOUND, route.not_found_text()),
        };
        let max = self.config.engine.max_envelope_bytes;
        let bytes = match read_body(body, max).await {
            Ok(bytes) => bytes,
            Err(text) => return plain(StatusCode::PAYLOAD_TOO_LARGE, text),
        };
        let query = parts.uri.query().unwrap_or("");
        match route {
            routes::Route::Card { .. } => card::response(&self, &agent, &parts.headers).await,
            routes::Route::JsonRpc { .. } => {
                jsonrpc::handle(self.clone(), &agent, &parts.headers, query, bytes).await
            }
            routes::Route::Rest { op, .. } => {
                rest::handle(self.clone(), &agent, op, &parts.headers, query, bytes).await
            }
            routes::Route::NotAllowed { .. } | routes::Route::NotFound => {
                plain(StatusCode::METHOD_NOT_ALLOWED, route.not_found_text())
            }
        }
    }

    /// The caller of a request for `agent`, or why it is refused.
    pub(crate) fn authenticate(
        &self,
        agent: &str,
        headers: &HeaderMap,
    ) -> Result<Caller, A2AError> {
        let authorization = headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let principal: Principal = self
            .tokens
            .authenticate(authorization)
            .map_err(|denied| A2AError::new(UNAUTHENTICATED, denied.to_string()))?;
        Ok(Caller {
            agent: agent.to_owned(),
            user: principal.user,
        })
    }

    /// Whether callers must send a bearer token.
    pub(crate) fn needs_token(&self) -> bool {
        !self.tokens.has_anonymous()
    }

    /// Whether any bearer token is configured.
    pub(crate) fn has_tokens(&self) -> bool {
        self.tokens.has_tokens()
    }
}

/// The JSON-RPC code Hermes answers a refused credential with (A2A leaves it to the server;
/// HTTP+JSON answers 401).
pub const UNAUTHENTICATED: i32 = -32010;

/// The A2A version a request asks for (`A2A-Version` header or query parameter; none means
/// 0.3), refused unless it is 1.x.
pub(crate) fn check_version(headers: &HeaderMap, query: &str) -> Result<(), A2AError> {
    let asked = headers
        .get(super::VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| routes::query_param(query, super::VERSION_HEADER))
        .unwrap_or_default();
    let asked = asked.trim();
    let major = asked.split('.').next().unwrap_or("");
    if major == "1" {
        return Ok(());
    }
    let shown = if asked.is_empty() {
        "0.3 (no A2A-Version header)"
    } else {
        asked
    };
    Err(A2AError::new(
        error_code::VERSION_NOT_SUPPORTED,
        format!(
            "A2A version {shown} is not supported: this agent speaks A2A {}; send the header \
             `A2A-Version: {}`",
            super::PROTOCOL_VERSION,
            super::PROTOCOL_VERSION
        ),
    ))
}

async fn read_body(body: Incoming, max: usize) -> Result<Bytes, String> {
    let limited = http_body_util::Limited::new(body, max);
    match limited.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) => Err(format!(
            "the request body could not be read or is over {max} bytes ([engine] \
             max_envelope_bytes): {e}\n"
        )),
    }
}

/// A plain-text response.
pub(crate) fn plain(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A JSON response.
pub(crate) fn json(
    status: StatusCode,
    content_type: &'static str,
    value: &impl serde::Serialize,
) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_else(|e| {
        format!("{{\"error\":\"the answer could not be encoded: {e}\"}}").into_bytes()
    });
    let mut response = Response::new(Full::new(Bytes::from(bytes)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}
