//! The Tool-executor: serves `hermes.tool.<name>` (queue `tool`) for every tool in its
//! registry and the catalog on `hermes.tools.list`.
//!
//! Every call passes the whitelist and schema validation (with safe repair) before it runs, and
//! runs under its timeout on the I/O runtime. MCP tools are mounted from the MCP-bridge's
//! catalog as proxy tools, so they get the same checks, and re-mounted when the bridge
//! announces a change on `hermes.mcp.changed`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use actix::prelude::*;
use bytes::Bytes;
use serde_json::Value;

use super::adapter::{self, Incoming};
use super::{error_bytes, reply_bytes, ActorDeps};
use crate::bus::messages::{
    kinds, McpCatalog, ToolCallRequest, ToolCallResult, ToolStatus, ToolsCatalog,
};
use crate::bus::{rpc, subjects, BusError};
use crate::envelope::Envelope;
use crate::tools::builtin::{self, BuiltinData};
use crate::tools::registry::ToolRegistry;
use crate::tools::remote::{McpProxyTool, McpReadResourceTool, MCP_SEPARATOR};
use crate::tools::{Tool, ToolError, ToolErrorCode};

pub struct ToolExecutor {
    deps: ActorDeps,
    registry: ToolRegistry,
}

impl Actor for ToolExecutor {
    type Context = Context<Self>;
}

impl ToolExecutor {
    /// Start the executor with the configured built-ins and subscribe them; MCP tools are
    /// mounted by [`mount_mcp_tools`] once the bridge answers.
    pub async fn start(
        deps: ActorDeps,
        arbiter: &ArbiterHandle,
    ) -> Result<(Addr<ToolExecutor>, ToolRegistry), String> {
        let registry = ToolRegistry::new();
        let data = BuiltinData::demo().map_err(|e| e.to_string())?;
        for name in &deps.config.tools.builtin {
            let tool = builtin::builtin(name, &data).ok_or_else(|| {
                format!(
                    "unknown built-in tool `{name}` in [tools].builtin; built-ins: {}",
                    builtin::all_names().join(", ")
                )
            })?;
            registry.register(tool).map_err(|e| e.to_string())?;
        }
        let actor = ToolExecutor {
            deps: deps.clone(),
            registry: registry.clone(),
        };
        let addr = ToolExecutor::start_in_arbiter(arbiter, |_| actor);
        let recipient = addr.clone().recipient();
        adapter::serve(
            &deps.io,
            deps.bus.clone(),
            subjects::TOOLS_LIST,
            Some(subjects::groups::TOOL),
            recipient.clone(),
        )
        .await
        .map_err(|e| e.to_string())?;
        for name in registry.names() {
            subscribe_tool(&deps, &name, recipient.clone())
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok((addr, registry))
    }
}

async fn subscribe_tool(
    deps: &ActorDeps,
    name: &str,
    recipient: Recipient<Incoming>,
) -> Result<(), BusError> {
    let subject = subjects::tool(name).map_err(|e| BusError::InvalidSubject {
        subject: name.to_string(),
        reason: e.to_string(),
    })?;
    adapter::serve(
        &deps.io,
        deps.bus.clone(),
        &subject,
        Some(subjects::groups::TOOL),
        recipient,
    )
    .await
    .map(|_| ())
}

/// Ask the MCP-bridge for its catalog (retrying while it starts, up to `wait`), mount every
/// tool of every ready server plus `mcp_read_resource`, and keep the mounts in step with the
/// catalogs the bridge publishes on `hermes.mcp.changed` (a server that reconnects or changes
/// its tool list). Returns how many MCP tools were mounted at first.
pub async fn mount_mcp_tools(
    deps: ActorDeps,
    registry: ToolRegistry,
    addr: Addr<ToolExecutor>,
    wait: Duration,
) -> Result<usize, String> {
    // Subscribe before asking, so no change between the answer and the subscription is lost.
    let mut changes = deps
        .bus
        .subscribe(subjects::MCP_CHANGED)
        .await
        .map_err(|e| e.to_string())?;
    let catalog = fetch_mcp_catalog(&deps, wait).await?;
    let mounts = McpMounts {
        deps: deps.clone(),
        registry,
        recipient: addr.recipient(),
        subscribed: Arc::new(Mutex::new(HashSet::new())),
    };
    let reader = McpReadResourceTool::new(
        Duration::from_secs(deps.config.tools.default_timeout_secs),
        deps.bus.clone(),
    );
    mounts.add(Arc::new(reader)).await?;
    let mounted = mounts.sync(&catalog).await?;
    deps.io.spawn(async move {
        while let Some(msg) = changes.next().await {
            match Envelope::decode_as::<McpCatalog>(&msg.payload, usize::MAX, kinds::MCP_CATALOG) {
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

async fn fetch_mcp_catalog(deps: &ActorDeps, wait: Duration) -> Result<McpCatalog, String> {
    let deadline = Instant::now() + wait;
    let request = Envelope::new(kinds::MCP_CATALOG_REQUEST, Value::Null);
    loop {
        match rpc::call::<_, McpCatalog>(
            deps.bus.as_ref(),
            subjects::MCP_CATALOG,
            &request,
            kinds::MCP_CATALOG,
            Duration::from_secs(deps.config.engine.request_timeout_secs),
        )
        .await
        {
            Ok(env) => return Ok(env.body),
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(error = %e, "MCP bridge not ready yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(format!("MCP bridge did not answer: {e}")),
        }
    }
}

/// The MCP proxy tools this executor has mounted, and the subjects it already serves.
struct McpMounts {
    deps: ActorDeps,
    registry: ToolRegistry,
    recipient: Recipient<Incoming>,
    subscribed: Arc<Mutex<HashSet<String>>>,
}

impl McpMounts {
    /// Register `tool` (if new) and serve its subject (once).
    async fn add(&self, tool: Arc<dyn Tool>) -> Result<bool, String> {
        let name = tool.spec().name;
        if self.registry.contains(&name) {
            return Ok(false);
        }
        if let Err(e) = self.registry.register(tool) {
            tracing::warn!(tool = %name, error = %e, "MCP tool rejected");
            return Ok(false);
        }
        let first = self
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.clone());
        if first {
            subscribe_tool(&self.deps, &name, self.recipient.clone())
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(true)
    }

    /// Mount the tools of every ready server and unmount the ones a ready server no longer
    /// lists. Tools of a server that is down stay mounted: calls fail fast with the reason.
    async fn sync(&self, catalog: &McpCatalog) -> Result<usize, String> {
        let mut mounted = 0;
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
                if self.add(Arc::new(proxy)).await? {
                    mounted += 1;
                }
            }
            let prefix = format!("{}{MCP_SEPARATOR}", server.name);
            for name in self.registry.names() {
                if name.starts_with(&prefix) && !listed.contains(&name) {
                    self.registry.unregister(&name);
                    tracing::info!(tool = %name, "MCP tool unmounted (its server no longer lists it)");
                }
            }
        }
        Ok(mounted)
    }
}

impl Handler<Incoming> for ToolExecutor {
    type Result = ResponseFuture<Option<Bytes>>;

    fn handle(&mut self, msg: Incoming, _ctx: &mut Self::Context) -> Self::Result {
        let deps = self.deps.clone();
        let registry = self.registry.clone();
        Box::pin(async move {
            if msg.subject == subjects::TOOLS_LIST {
                let catalog = ToolsCatalog {
                    tools: registry.specs(),
                };
                return reply_bytes(&Envelope::new(kinds::TOOLS_CATALOG, catalog));
            }
            let max = deps.config.engine.max_envelope_bytes;
            let request =
                match Envelope::decode_as::<ToolCallRequest>(&msg.payload, max, kinds::TOOL_CALL) {
                    Ok(r) => r,
                    Err(e) => return error_bytes("bad_request", e.to_string()),
                };
            let io = deps.io.clone();
            let trace = request.trace_id.clone();
            match io.spawn(execute(registry, request.body)).await {
                Ok(result) => {
                    reply_bytes(&Envelope::new(kinds::TOOL_RESULT, result).in_trace(&trace))
                }
                Err(e) => error_bytes("tool_crashed", e.to_string()),
            }
        })
    }
}

/// Validate, run under the tool's timeout, and report — never panics, never hangs.
pub async fn execute(registry: ToolRegistry, request: ToolCallRequest) -> ToolCallResult {
    let started = Instant::now();
    let mut result = ToolCallResult {
        call_id: request.call_id.clone(),
        name: request.name.clone(),
        status: ToolStatus::Error,
        output: Value::Null,
        error: None,
        auto_corrected: false,
        corrections: Vec::new(),
        via: "builtin".into(),
        duration_ms: 0,
    };
    let (tool, prepared) = match registry.prepare(&request.name, request.arguments) {
        Ok(p) => p,
        Err(e) => {
            result.error = Some(e);
            return result;
        }
    };
    if request.name.contains(crate::tools::remote::MCP_SEPARATOR) {
        result.via = format!(
            "mcp:{}",
            request.name.split("__").next().unwrap_or_default()
        );
    }
    let mut prepared = prepared;
    if let Some(user) = &request.user {
        registry.inject_user(&request.name, &mut prepared, user);
    }
    result.auto_corrected = !prepared.corrections.is_empty();
    result.corrections = prepared.corrections;
    let arguments = prepared.arguments;
    let timeout = tool.timeout();
    match tokio::time::timeout(timeout, tool.call(arguments)).await {
        Ok(Ok(output)) => {
            result.status = ToolStatus::Ok;
            result.output = output;
        }
        Ok(Err(e)) => result.error = Some(e),
        Err(_) => {
            result.error = Some(
                ToolError::new(
                    ToolErrorCode::Timeout,
                    format!(
                        "`{}` did not finish within {timeout:?}; its backend may be slow or down, or the request too large",
                        request.name
                    ),
                )
                .with_hint("retry once with a narrower request; if it times out again, tell the user"),
            )
        }
    }
    result.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    result
}
