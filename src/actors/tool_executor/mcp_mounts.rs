//! Mounting MCP tools into the tool-executor: ask the MCP-bridge for its catalog, register one
//! [`McpProxyTool`] per tool of every ready server plus `mcp_read_resource`, and keep the
//! registry in step with the catalogs the bridge publishes on `hermes.mcp.changed` (a server
//! that reconnects or changes its tool list is re-mounted; tools it no longer lists are
//! unmounted).

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::ToolExecutor;
use crate::actors::start_error::StartError;
use crate::actors::ActorDeps;
use crate::bus::{rpc, BusError, Serving};
use crate::protocol::envelope::Envelope;
use crate::protocol::request::McpCatalogRequest;
use crate::protocol::subjects;
use crate::protocol::{McpCatalog, ToolsChanged};
use crate::tools::registry::ToolRegistry;
use crate::tools::remote::{McpProxyTool, McpReadResourceTool, MCP_SEPARATOR};
use crate::tools::Tool;

/// Ask the MCP-bridge for its catalog (retrying while it starts, up to `wait`), mount every
/// tool of every ready server plus `mcp_read_resource`, and keep the mounts in step with the
/// catalogs the bridge publishes on `hermes.mcp.changed` (a server that reconnects or changes
/// its tool list). Returns how many MCP tools were mounted at first.
pub async fn mount_mcp_tools(
    deps: ActorDeps,
    executor: Arc<ToolExecutor>,
    wait: Duration,
) -> Result<usize, StartError> {
    let registry = executor.core().registry.clone();
    // Subscribe before asking, so no change between the answer and the subscription is lost.
    let mut changes = deps.bus.subscribe(subjects::MCP_CHANGED).await?;
    let catalog = fetch_mcp_catalog(&deps, wait).await?;
    let mounts = McpMounts {
        deps: deps.clone(),
        registry,
        executor,
        serving: Arc::new(Mutex::new(HashMap::new())),
    };
    let reader = McpReadResourceTool::new(
        Duration::from_secs(deps.config.tools.default_timeout_secs),
        deps.bus.clone(),
    );
    mounts.add(Arc::new(reader)).await?;
    let mounted = mounts.sync(&catalog).await?;
    deps.io.spawn(async move {
        while let Some(msg) = changes.next().await {
            match Envelope::<McpCatalog>::decode_event(&msg.payload, usize::MAX) {
                Ok(catalog) => {
                    if let Err(e) = mounts.sync(&catalog.body).await {
                        tracing::warn!(error = %e, "re-mounting MCP tools failed");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "malformed MCP catalog change ignored"),
            }
        }
    });
    Ok(mounted)
}

async fn fetch_mcp_catalog(deps: &ActorDeps, wait: Duration) -> Result<McpCatalog, StartError> {
    let deadline = Instant::now() + wait;
    let request = Envelope::request(McpCatalogRequest);
    loop {
        let timeout = Duration::from_secs(deps.config.engine.request_timeout_secs);
        match rpc::request(deps.bus.as_ref(), request.clone(), timeout).await {
            Ok(env) => return Ok(env.body),
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(error = %e, "MCP bridge not ready yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(source) => {
                return Err(StartError::NoCatalog {
                    waited_secs: wait.as_secs(),
                    source,
                })
            }
        }
    }
}

/// The MCP proxy tools this executor has mounted, and the subjects it serves for them.
struct McpMounts {
    deps: ActorDeps,
    registry: ToolRegistry,
    executor: Arc<ToolExecutor>,
    serving: Arc<Mutex<HashMap<String, Serving>>>,
}

impl McpMounts {
    /// Register `tool` (if new) and serve its subject (once).
    async fn add(&self, tool: Arc<dyn Tool>) -> Result<bool, BusError> {
        let name = tool.spec().name;
        if self.registry.contains(&name) {
            return Ok(false);
        }
        if let Err(e) = self.registry.register(tool) {
            tracing::warn!(tool = %name, error = %e, "MCP tool rejected");
            return Ok(false);
        }
        let served = self
            .serving
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&name);
        if !served {
            let guard = self.executor.serve_tool(&self.deps.bus, &name).await?;
            self.serving
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(name, guard);
        }
        Ok(true)
    }

    /// Mount the tools of every ready server and unmount the ones a ready server no longer
    /// lists. Tools of a server that is down stay mounted: calls fail fast with the reason.
    async fn sync(&self, catalog: &McpCatalog) -> Result<usize, BusError> {
        let mut changed = ToolsChanged::default();
        for server in &catalog.servers {
            if server.status != "ready" {
                tracing::error!(server = %server.name, status = %server.status, error = ?server.error, "MCP server is not ready; its tools fail until it is back");
                continue;
            }
            let timeout = Duration::from_secs(server.timeout_secs.max(1));
            let mut listed = HashSet::new();
            for tool in &server.tools {
                let Some(proxy) =
                    McpProxyTool::new(&server.name, tool, timeout, self.deps.bus.clone())
                else {
                    tracing::warn!(server = %server.name, tool = %tool.name, "MCP tool name cannot be used as a subject; skipped");
                    continue;
                };
                listed.insert(proxy.spec().name);
                let name = proxy.spec().name;
                if self.add(Arc::new(proxy)).await? {
                    changed.mounted.push(name);
                }
            }
            let prefix = format!("{}{MCP_SEPARATOR}", server.name);
            for name in self.registry.names() {
                if name.starts_with(&prefix) && !listed.contains(&name) {
                    self.registry.unregister(&name);
                    tracing::info!(tool = %name, "MCP tool unmounted (its server no longer lists it)");
                    changed.unmounted.push(name);
                }
            }
        }
        let mounted = changed.mounted.len();
        if changed != ToolsChanged::default() {
            // After the registry changed, so a session that refetches sees the new catalog.
            let envelope = Envelope::event(changed);
            if let Err(e) =
                rpc::publish(self.deps.bus.as_ref(), subjects::TOOLS_CHANGED, &envelope).await
            {
                tracing::warn!(error = %e, "announcing the changed tool catalog failed; sessions keep the old one until the next change");
            }
        }
        Ok(mounted)
    }
}
