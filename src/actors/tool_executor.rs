//! The Tool-executor: serves `hermes.tool.<name>` (queue `tool`) for every tool in its
//! registry, the catalog on `hermes.tools.list` and its counters on `hermes.tools.metrics`.
//!
//! Every call passes the whitelist and schema validation (with safe repair) before it runs
//! ([`run::execute`]). MCP tools are mounted from the MCP-bridge's catalog as proxy tools, so
//! they get the same checks, and re-mounted when the bridge announces a change on
//! `hermes.mcp.changed` ([`mcp_mounts`]). Worker tools declared in config (`[[tools.define]]`) are listed
//! in the catalog but not served here: their workers answer `hermes.tool.<name>` themselves.
//! The executor owns the sled trees `jobs`, `tool_results_idem` and `tool_raw`
//! ([`crate::tools::stores::ToolStores`]); on start it resumes unfinished async jobs
//! ([`jobs::resume`]).

pub mod jobs;
pub mod mcp_mounts;
pub mod run;

use std::sync::Arc;

use actix::prelude::*;
use bytes::Bytes;

use super::adapter::{self, Incoming};
use super::{error_bytes, reply_bytes, ActorDeps};
use crate::bus::messages::{kinds, ToolCallRequest, ToolsCatalog};
use crate::bus::SharedBus;
use crate::bus::{subjects, BusError};
use crate::config::ToolsConfig;
use crate::envelope::Envelope;
use crate::tools::builtin::{self, BuiltinData};
use crate::tools::definition::ToolDefinition;
use crate::tools::metrics::ExecutorMetrics;
use crate::tools::registry::ToolRegistry;
use crate::tools::remote::SessionSearchTool;
use crate::tools::stores::ToolStores;
use crate::tools::worker::worker_definitions;
use crate::tools::Tool;

pub use mcp_mounts::mount_mcp_tools;
pub use run::{execute, Caller, ExecCore};

pub struct ToolExecutor {
    deps: ActorDeps,
    core: ExecCore,
}

impl Actor for ToolExecutor {
    type Context = Context<Self>;
}

impl ToolExecutor {
    /// Start the executor with the configured built-ins and subscribe them; MCP tools are
    /// mounted by [`mount_mcp_tools`] once the bridge answers. `db` holds the executor's
    /// trees (a temporary database is used when there is none). Unfinished async jobs are
    /// resumed in the background.
    pub async fn start(
        deps: ActorDeps,
        db: Option<sled::Db>,
        arbiter: &ArbiterHandle,
    ) -> Result<(Addr<ToolExecutor>, ExecCore), String> {
        let core = build_core(&deps, db)?;
        let actor = ToolExecutor {
            deps: deps.clone(),
            core: core.clone(),
        };
        let addr = ToolExecutor::start_in_arbiter(arbiter, |_| actor);
        let recipient = addr.clone().recipient();
        for subject in [subjects::TOOLS_LIST, subjects::TOOLS_METRICS] {
            adapter::serve(
                &deps.io,
                deps.bus.clone(),
                subject,
                Some(subjects::groups::TOOL),
                recipient.clone(),
            )
            .await
            .map_err(|e| e.to_string())?;
        }
        for name in core.registry.names() {
            subscribe_tool(&deps, &name, recipient.clone())
                .await
                .map_err(|e| e.to_string())?;
        }
        let resuming = core.clone();
        deps.io.spawn(async move {
            let (resumed, failed) = jobs::resume(&resuming).await;
            if resumed + failed > 0 {
                tracing::info!(resumed, failed, "unfinished async jobs handled after start");
            }
        });
        let days = deps.config.tools.raw_retention_days;
        if days > 0 {
            deps.io.spawn(prune_raw_outputs(core.clone(), days));
        }
        Ok((addr, core))
    }
}

/// How often old raw outputs are looked for.
const RAW_PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// Remove raw outputs older than `days`, now and every [`RAW_PRUNE_EVERY`], off the runtime's
/// threads (a large tree takes a while).
async fn prune_raw_outputs(core: ExecCore, days: u64) {
    let Some(age) = i64::try_from(days)
        .ok()
        .and_then(chrono::Duration::try_days)
    else {
        tracing::warn!(
            days,
            "tools.raw_retention_days is too large; raw outputs are kept"
        );
        return;
    };
    let mut every = tokio::time::interval(RAW_PRUNE_EVERY);
    loop {
        every.tick().await;
        let raw = core.stores.raw.clone();
        let Some(cutoff) = chrono::Utc::now().checked_sub_signed(age) else {
            return;
        };
        match tokio::task::spawn_blocking(move || raw.prune_before(cutoff)).await {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::info!(removed = n, days, "old raw tool outputs pruned"),
            Ok(Err(e)) => tracing::warn!(error = %e, "raw tool outputs not pruned"),
            Err(e) => tracing::warn!(error = %e, "raw output pruning crashed"),
        }
    }
}

/// The registry with the configured built-ins (config overrides applied), the worker tools
/// of `[[tools.define]]`, and the stores.
pub fn build_core(deps: &ActorDeps, db: Option<sled::Db>) -> Result<ExecCore, String> {
    let stores = match db {
        Some(db) => ToolStores::open(&db),
        None => ToolStores::temporary(),
    }
    .map_err(|e| e.to_string())?;
    let (registry, workers) = build_registry(&deps.config.tools, &stores, Some(&deps.bus))?;
    Ok(ExecCore {
        registry,
        workers: Arc::new(workers),
        stores,
        metrics: ExecutorMetrics::default(),
        bus: deps.bus.clone(),
        io: deps.io.clone(),
    })
}

/// The configured built-ins (overrides applied) and the worker tool definitions; an unknown
/// built-in or an incomplete worker entry is an error naming it.
pub fn build_registry(
    tools: &ToolsConfig,
    stores: &ToolStores,
    bus: Option<&SharedBus>,
) -> Result<(ToolRegistry, Vec<ToolDefinition>), String> {
    let registry = ToolRegistry::with_overrides(&tools.define);
    let data = BuiltinData::demo().map_err(|e| e.to_string())?;
    for name in &tools.builtin {
        let bus_tool = (name == SessionSearchTool::NAME)
            .then(|| Arc::new(SessionSearchTool::new(bus.cloned())) as Arc<dyn Tool>);
        let tool = builtin::builtin(name, &data)
            .or_else(|| builtin::with_stores(name, stores))
            .or(bus_tool)
            .ok_or_else(|| {
                format!(
                    "unknown built-in tool `{name}` in [tools].builtin; built-ins: {}, {}, {}",
                    builtin::all_names().join(", "),
                    builtin::store_names().join(", "),
                    SessionSearchTool::NAME
                )
            })?;
        registry.register(tool).map_err(|e| e.to_string())?;
    }
    let (workers, problems) = worker_definitions(&tools.define, |n| {
        registry.contains(n)
            || builtin::all_names().contains(&n)
            || builtin::store_names().contains(&n)
            || n == SessionSearchTool::NAME
    });
    match problems.first() {
        Some(first) => Err(first.clone()),
        None => Ok((registry, workers)),
    }
}

/// Every definition a configuration yields without a bus: built-ins and worker tools (MCP
/// tools appear only in a running executor's catalog). For `hermes tools ls|lint`.
pub fn configured_definitions(tools: &ToolsConfig) -> Result<Vec<ToolDefinition>, String> {
    let stores = ToolStores::temporary().map_err(|e| e.to_string())?;
    let (registry, workers) = build_registry(tools, &stores, None)?;
    let mut all = registry.definitions();
    all.extend(workers);
    all.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(all)
}

/// The catalog this executor answers on `hermes.tools.list`: its own tools and the workers'.
pub fn catalog(core: &ExecCore) -> ToolsCatalog {
    let mut definitions = core.registry.definitions();
    definitions.extend(core.workers.iter().cloned());
    definitions.sort_by(|a, b| a.name.cmp(&b.name));
    ToolsCatalog {
        tools: definitions.iter().map(|d| d.spec()).collect(),
        definitions,
        metrics: core.metrics.snapshot(),
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

impl Handler<Incoming> for ToolExecutor {
    type Result = ResponseFuture<Option<Bytes>>;

    fn handle(&mut self, msg: Incoming, _ctx: &mut Self::Context) -> Self::Result {
        let deps = self.deps.clone();
        let core = self.core.clone();
        Box::pin(async move {
            if msg.subject == subjects::TOOLS_LIST {
                return reply_bytes(&Envelope::new(kinds::TOOLS_CATALOG, catalog(&core)));
            }
            if msg.subject == subjects::TOOLS_METRICS {
                let metrics = core.metrics.snapshot();
                return reply_bytes(&Envelope::new(kinds::TOOLS_METRICS, metrics));
            }
            let max = deps.config.engine.max_envelope_bytes;
            let request =
                match Envelope::decode_as::<ToolCallRequest>(&msg.payload, max, kinds::TOOL_CALL) {
                    Ok(r) => r,
                    Err(e) => return error_bytes("bad_request", e.to_string()),
                };
            let trace = request.trace_id.clone();
            let caller = Caller {
                agent: request.agent.clone(),
                session: request.session.clone(),
                user: request.user.clone(),
            };
            let io = deps.io.clone();
            let body = request.body;
            match io
                .spawn(async move { execute(&core, body, caller).await })
                .await
            {
                Ok(result) => {
                    reply_bytes(&Envelope::new(kinds::TOOL_RESULT, result).in_trace(&trace))
                }
                Err(e) => error_bytes("tool_crashed", e.to_string()),
            }
        })
    }
}

#[cfg(test)]
mod tests;
