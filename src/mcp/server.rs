//! Hermes as an MCP server: its memory (`memory_write`, `memory_search`, `memory_forget`,
//! memories as resources, a memory-QA prompt) and, optionally, some of its own tools, the
//! mounted servers' tools (a gateway) and its agents as tools ([`agents`], answered as tasks
//! of the tasks extension) — so other agents share one memory service and reach its agents.
//!
//! It talks to the rest of Hermes only over the bus (`hermes.memory.*`, `hermes.tool.<name>`),
//! so it runs in any process on the bus: over stdio (`hermes mcp serve --stdio`, one configured
//! principal) or over Streamable HTTP while `hermes serve` runs ([`http`], bearer tokens).
//! Every call is authorised ([`auth`]) and audited on `hermes.audit.mcp_server` /
//! `hermes.audit.auth_denied`.

mod agent_calls;
mod agent_tasks;
mod agents;
mod answers;
pub mod auth;
mod exposed;
mod forwarded;
pub mod glob;
mod handler;
pub mod http;
pub mod memory;
mod memory_tools;
mod passthrough;
mod traced;

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;

pub use self::auth::{Principal, TokenTable};
pub use self::handler::HermesMcpServer;
use super::McpError;
use crate::a2a::sessions::Sessions;
use crate::bus::SharedBus;
use crate::config::{Config, McpServerConfig};

/// The name the server gives in `initialize` and in audit records.
pub const SERVER_NAME: &str = "hermes";

/// How long a call to an agent waits for its answer by default (a client without tasks).
pub const DEFAULT_AGENT_CALL_SECS: u64 = 600;

/// What every session of the server shares.
#[derive(Clone)]
pub struct ServerDeps {
    pub bus: SharedBus,
    /// Tools of the tool-executor offered over MCP (names or `*` patterns).
    pub expose_tools: Vec<String>,
    /// Agents offered as tools: (name, description).
    pub expose_agents: Vec<(String, String)>,
    /// The sessions the agents' turns run in, over the bus.
    pub sessions: Sessions,
    /// Longest a call to an agent waits for its answer when the client takes no task.
    pub agent_call_timeout: Duration,
    /// Timeout of memory requests.
    pub request_timeout: Duration,
    /// Timeout of exposed tool calls.
    pub tool_timeout: Duration,
    /// The mounted server served under its own names (`[mcp.server] passthrough`).
    pub passthrough: Option<Arc<McpServerConfig>>,
}

impl ServerDeps {
    pub fn from_config(bus: SharedBus, config: &Config) -> Self {
        let host = &config.mcp.server;
        let expose_agents = host
            .expose_agents
            .iter()
            .map(|name| {
                let description = config
                    .agents
                    .get(name)
                    .map(|agent| agent.description.clone())
                    .unwrap_or_default();
                (name.clone(), description)
            })
            .collect();
        let request_timeout = Duration::from_secs(config.engine.request_timeout_secs.max(1));
        Self {
            sessions: Sessions::new(bus.clone(), request_timeout),
            bus,
            expose_tools: host.expose_tools.clone(),
            expose_agents,
            agent_call_timeout: Duration::from_secs(
                host.agent_call_timeout_secs
                    .unwrap_or(DEFAULT_AGENT_CALL_SECS)
                    .max(1),
            ),
            request_timeout: Duration::from_secs(config.engine.request_timeout_secs.max(1)),
            tool_timeout: Duration::from_secs(config.tools.default_timeout_secs.max(1)),
            passthrough: host.passthrough.as_ref().and_then(|name| {
                config
                    .mcp
                    .servers
                    .iter()
                    .find(|server| &server.name == name)
                    .map(|server| Arc::new(server.clone()))
            }),
        }
    }
}

/// Serve one session over `transport` as `principal`, until the client closes it.
pub async fn serve_as<T, E, A>(
    deps: ServerDeps,
    principal: Principal,
    transport: T,
) -> Result<(), McpError>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let handler = HermesMcpServer::new(Arc::new(deps), Some(principal));
    let running = handler.serve(transport).await.map_err(|error| McpError::Handshake {
        server: SERVER_NAME.to_owned(),
        reason: format!("no MCP client initialized a session ({error}); start `hermes mcp serve --stdio` from an MCP client"),
    })?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|error| McpError::Dead {
            server: SERVER_NAME.to_owned(),
            reason: format!("the server task failed: {error}"),
        })
}
