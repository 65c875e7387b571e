//! Passthrough (`[mcp.server] passthrough = "<mounted server>"`): Hermes' MCP server serves
//! one mounted server's tools, resources, resource templates, prompts, completions, logging
//! level and subscriptions under their own names, beside its memory, behind Hermes' tokens,
//! roles and audit.
//!
//! Each client session (each request, for a 2026-07-28 stateless client) gets its own
//! session with the mounted server, opened at its first request, speaking the client's
//! revision and announcing the client's capabilities (sampling, elicitation, roots) — so the
//! server asks for only what the client can answer. Requests are forwarded as they came
//! (params, `_meta`, `input_required` answers and `requestState` unchanged) and results
//! come back unchanged (every content block, `isError`, `input_required`), while the
//! [`relay`] carries the server's notifications and its requests back to the client.
//!
//! It connects with rmcp directly rather than through the MCP-bridge: a bus hop would lose
//! the per-client relay. OAuth-protected servers are not supported here (static headers are).

mod ordered;
mod relay;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientRequest, Implementation, ProgressToken,
    ProtocolVersion, ResultType, ServerResult,
};
use rmcp::service::{ClientLifecycleMode, PeerRequestOptions, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientServiceExt, ErrorData, RoleClient, RoleServer, ServiceError};
use tokio::sync::Mutex;

use self::ordered::Ordered;
use self::relay::{Relay, Routes};
use crate::config::McpServerConfig;

/// The name Hermes gives the mounted server in `initialize`.
const CLIENT_NAME: &str = "hermes-passthrough";

/// One client session's way to the mounted server: connected at its first request, and
/// again at the next request after that session was lost (the server restarted).
pub(super) struct Passthrough {
    config: Arc<McpServerConfig>,
    upstream: Mutex<Option<Arc<Upstream>>>,
}

/// A live session with the mounted server and the relay's routing tables.
struct Upstream {
    session: RunningService<RoleClient, Relay>,
    routes: Arc<Routes>,
}

/// Why the mounted server could not be reached.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("the passthrough server `{server}` could not be started: {reason}; check its command/args or url in [[mcp.servers]]")]
    Start { server: String, reason: String },
    #[error("the passthrough server `{server}` did not complete the MCP handshake: {reason}; check that it is running and speaks MCP")]
    Handshake { server: String, reason: String },
}

impl Passthrough {
    pub(super) fn new(config: Arc<McpServerConfig>) -> Self {
        Self {
            config,
            upstream: Mutex::new(None),
        }
    }

    /// The mounted server's name (`[[mcp.servers]] name`).
    pub(super) fn server(&self) -> &str {
        &self.config.name
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.config.timeout_secs.max(1))
    }

    async fn upstream(&self, ctx: &RequestContext<RoleServer>) -> Result<Arc<Upstream>, ErrorData> {
        let mut upstream = self.upstream.lock().await;
        if let Some(live) = upstream
            .as_ref()
            .filter(|u| !u.session.peer().is_transport_closed())
        {
            return Ok(live.clone());
        }
        let connected = self.connect(ctx).await.map_err(|error| {
            tracing::warn!(%error, "passthrough server unreachable");
            ErrorData::internal_error(error.to_string(), None)
        })?;
        let connected = Arc::new(connected);
        *upstream = Some(connected.clone());
        Ok(connected)
    }

    async fn connect(&self, ctx: &RequestContext<RoleServer>) -> Result<Upstream, ConnectError> {
        let routes = Arc::new(Routes::new(ctx.peer.clone()));
        let (capabilities, version) = match ctx.peer.peer_info() {
            Some(info) => (
                info.capabilities.clone(),
                Some(info.protocol_version.clone()),
            ),
            None => (ClientCapabilities::default(), None),
        };
        // A stateless (2026-07-28) request names its revision and capabilities in `_meta`.
        let capabilities = ctx.meta.client_capabilities().unwrap_or(capabilities);
        let version = ctx.meta.protocol_version().or(version);
        // Mirror what the client can answer (and whether it takes tasks), so the server asks
        // and answers only as the client can follow.
        let mut info = ClientConfig::new(
            capabilities,
            Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION")),
        );
        let lifecycle = match version {
            Some(version) if !version.has_initialize() => ClientLifecycleMode::Discover {
                preferred_versions: vec![version],
            },
            version => {
                info = info.with_protocol_version(
                    version.unwrap_or(ProtocolVersion::LATEST_WITH_INITIALIZE),
                );
                ClientLifecycleMode::Initialize
            }
        };
        let relay = Relay::new(info, routes.clone());
        let server = self.config.name.clone();
        let handshake = |reason: String| ConnectError::Handshake {
            server: server.clone(),
            reason,
        };
        let started = match &self.config.url {
            Some(url) => {
                let (transport, taken) = Ordered::new(
                    StreamableHttpClientTransport::from_config(http_config(&self.config, url)?),
                    routes.clone(),
                );
                tokio::spawn(routes.clone().relay(taken));
                tokio::time::timeout(
                    self.timeout(),
                    relay.serve_with_lifecycle(transport, lifecycle),
                )
                .await
            }
            None => {
                let mut command = tokio::process::Command::new(&self.config.command);
                command.args(&self.config.args).envs(&self.config.env);
                let transport =
                    TokioChildProcess::new(command).map_err(|e| ConnectError::Start {
                        server: server.clone(),
                        reason: e.to_string(),
                    })?;
                let (transport, taken) = Ordered::new(transport, routes.clone());
                tokio::spawn(routes.clone().relay(taken));
                tokio::time::timeout(
                    self.timeout(),
                    relay.serve_with_lifecycle(transport, lifecycle),
                )
                .await
            }
        };
        let session = match started {
            Ok(Ok(session)) => session,
            Ok(Err(error)) => return Err(handshake(error.to_string())),
            Err(_) => return Err(handshake(format!("no answer within {:?}", self.timeout()))),
        };
        tracing::info!(server = %self.config.name, "passthrough session opened");
        Ok(Upstream { session, routes })
    }

    /// Send `request` to the mounted server for the client request `ctx` and return its
    /// answer unchanged; the server's JSON-RPC errors come back as they were.
    pub(super) async fn forward(
        &self,
        ctx: &RequestContext<RoleServer>,
        request: ClientRequest,
        progress: Option<ProgressToken>,
    ) -> Result<ServerResult, ErrorData> {
        let upstream = self.upstream(ctx).await?;
        let mut options = PeerRequestOptions::no_options();
        options.timeout = Some(self.timeout());
        let method = request.method().to_owned();
        let handle = upstream
            .session
            .peer()
            .send_request_with_option(request, options)
            .await
            .map_err(|e| self.failed(&method, e))?;
        let route = upstream.routes.open(
            handle.id.clone(),
            ctx.id.clone(),
            progress.map(|token| (handle.progress_token.clone(), token)),
        );
        let answer = handle.await_response().await;
        upstream.routes.settle().await;
        upstream.routes.close(route);
        let mut answer = answer.map_err(|e| self.failed(&method, e))?;
        mark_complete(&mut answer);
        Ok(answer)
    }

    fn failed(&self, method: &str, error: ServiceError) -> ErrorData {
        match error {
            ServiceError::McpError(error) => error,
            other => ErrorData::internal_error(
                format!(
                    "the passthrough server `{}` did not answer `{method}`: {other}",
                    self.config.name
                ),
                None,
            ),
        }
    }
}

/// A final result carries `resultType: "complete"` for a 2026-07-28 client even when the
/// mounted server (an older revision) left it out; rmcp strips it again for older clients.
fn mark_complete(result: &mut ServerResult) {
    let result_type = match result {
        ServerResult::CompleteResult(r) => &mut r.result_type,
        ServerResult::GetPromptResult(r) => &mut r.result_type,
        ServerResult::ListPromptsResult(r) => &mut r.result_type,
        ServerResult::ListResourcesResult(r) => &mut r.result_type,
        ServerResult::ListResourceTemplatesResult(r) => &mut r.result_type,
        ServerResult::ReadResourceResult(r) => &mut r.result_type,
        ServerResult::ListToolsResult(r) => &mut r.result_type,
        ServerResult::CallToolResult(r) => &mut r.result_type,
        _ => return,
    };
    result_type.get_or_insert(ResultType::COMPLETE);
}

/// The Streamable HTTP client config of `url`: the configured headers (values or environment
/// variables); `Authorization` goes through rmcp's auth header.
fn http_config(
    config: &McpServerConfig,
    url: &str,
) -> Result<StreamableHttpClientTransportConfig, ConnectError> {
    let mut headers = HashMap::new();
    let mut bearer = None;
    let from_env = config.headers_env.iter().map(|(name, variable)| {
        let value = std::env::var(variable).map_err(|_| ConnectError::Start {
            server: config.name.clone(),
            reason: format!("the environment variable `{variable}` for header `{name}` is not set"),
        })?;
        Ok((name.clone(), value))
    });
    let all: Vec<(String, String)> = config
        .headers
        .iter()
        .map(|(name, value)| Ok((name.clone(), value.clone())))
        .chain(from_env)
        .collect::<Result<_, ConnectError>>()?;
    for (name, value) in all {
        if name.eq_ignore_ascii_case("authorization") {
            bearer = Some(value.strip_prefix("Bearer ").unwrap_or(&value).to_owned());
            continue;
        }
        let invalid = |what: &str| ConnectError::Start {
            server: config.name.clone(),
            reason: format!("header `{name}` has an invalid {what}; fix [[mcp.servers]] headers"),
        };
        headers.insert(
            http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid("name"))?,
            http::HeaderValue::from_str(&value).map_err(|_| invalid("value"))?,
        );
    }
    let mut transport = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
        .custom_headers(headers)
        .reinit_on_expired_session(true);
    if let Some(token) = bearer {
        transport = transport.auth_header(token);
    }
    Ok(transport)
}
