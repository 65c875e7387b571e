//! The Tool-executor: serves `hermes.tool.<name>` (queue `tool`) for every tool in its
//! registry, the catalog on `hermes.tools.list` and its counters on `hermes.tools.metrics` —
//! as bus services that run where a request arrives (see [`crate::bus::Handler`]).
//!
//! Every call passes the whitelist and schema validation (with safe repair) before it runs
//! ([`run::execute`]). MCP tools are mounted from the MCP-bridge's catalog as proxy tools, so
//! they get the same checks, and re-mounted when the bridge announces a change on
//! `hermes.mcp.changed` ([`mcp_mounts`]). Worker tools declared in config (`[[tools.define]]`) are listed
//! in the catalog but not served here: their workers answer `hermes.tool.<name>` themselves.
//! The executor owns the sled trees `jobs`, `tool_results_idem` and `tool_raw`
//! ([`crate::tools::stores::ToolStores`]); on start it resumes unfinished async jobs
//! ([`jobs::resume`]), or on a cluster runs them from the shared job queue ([`job_queue`]).

pub mod job_queue;
pub mod jobs;
pub mod mcp_mounts;
pub mod run;

use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;

use super::start_error::{StartError, ToolSetupError};
use super::ActorDeps;
use crate::bus::service::{typed, Service, ServiceError};
use crate::bus::{BusError, Serving, SharedBus};
use crate::config::ToolsConfig;
use crate::protocol::envelope::Envelope;
use crate::protocol::request::{ToolsListRequest, ToolsMetricsRequest};
use crate::protocol::subjects;
use crate::protocol::{ToolCallRequest, ToolCallResult, ToolMetrics, ToolsCatalog};
use crate::telemetry::spans;
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

/// The tool-executor service: its registry, stores and counters.
pub struct ToolExecutor {
    core: ExecCore,
    max_bytes: usize,
}

impl ToolExecutor {
    /// Start the executor with the configured built-ins and serve them; MCP tools are
    /// mounted by [`mount_mcp_tools`] once the bridge answers. `db` holds the executor's
    /// trees (a temporary database is used when there is none). Unfinished async jobs are
    /// resumed in the background. The guards keep the services running.
    pub async fn start(
        deps: ActorDeps,
        db: Option<crate::store::durability::Durable>,
    ) -> Result<(Arc<ToolExecutor>, Vec<Serving>), StartError> {
        let core = build_core(&deps, db)?;
        core.stores.open_shared().await?;
        let executor = Arc::new(ToolExecutor {
            core: core.clone(),
            max_bytes: deps.config.engine.max_envelope_bytes,
        });
        let group = subjects::groups::TOOL;
        let bus = &deps.bus;
        let mut serving = vec![
            bus.serve(
                subjects::TOOLS_LIST,
                group,
                typed::<ToolsListRequest, _>(executor.clone(), executor.max_bytes),
            )
            .await?,
            bus.serve(
                subjects::TOOLS_METRICS,
                group,
                typed::<ToolsMetricsRequest, _>(executor.clone(), executor.max_bytes),
            )
            .await?,
            bus.serve(
                subjects::JOBS_CANCEL,
                group,
                typed::<crate::protocol::JobCancelRequest, _>(executor.clone(), executor.max_bytes),
            )
            .await?,
        ];
        for name in core.registry.names() {
            serving.push(executor.serve_tool(bus, &name).await?);
        }
        match deps.bus.cluster() {
            Some(cluster) if core.stores.jobs.is_shared() => {
                let ack_wait = cluster.options().ack_wait;
                deps.io.spawn(job_queue::serve(core.clone(), ack_wait));
            }
            _ => {
                let resuming = core.clone();
                deps.io.spawn(async move {
                    let (resumed, failed) = jobs::resume(&resuming).await;
                    if resumed + failed > 0 {
                        tracing::info!(
                            resumed,
                            failed,
                            "unfinished async jobs handled after start"
                        );
                    }
                });
            }
        }
        let days = deps.config.tools.raw_retention_days;
        if days > 0 {
            deps.io.spawn(prune_raw_outputs(core.clone(), days));
        }
        Ok((executor, serving))
    }

    /// The executor's registry, stores and counters.
    pub fn core(&self) -> &ExecCore {
        &self.core
    }

    /// Serve `hermes.tool.<name>` (queue `tool`) until the guard drops.
    pub async fn serve_tool(
        self: &Arc<Self>,
        bus: &SharedBus,
        name: &str,
    ) -> Result<Serving, BusError> {
        let subject = subjects::tool(name).map_err(|e| BusError::InvalidSubject {
            subject: name.to_string(),
            reason: e.to_string(),
        })?;
        bus.serve(
            &subject,
            subjects::groups::TOOL,
            typed::<ToolCallRequest, _>(self.clone(), self.max_bytes),
        )
        .await
    }
}

#[async_trait]
impl Service<ToolCallRequest> for ToolExecutor {
    /// Runs where the request arrives: built-ins are quick, and tools that wait on the network
    /// (MCP proxies, async jobs) hand that wait to the I/O runtime themselves.
    async fn call(
        &self,
        request: Envelope<ToolCallRequest>,
    ) -> Result<ToolCallResult, ServiceError> {
        let caller = Caller {
            agent: request.agent.clone(),
            session: request.session.clone(),
            user: request.user.clone(),
        };
        let span = spans::execute_tool(&request.body.name, &request.body.call_id);
        let result = execute(&self.core, request.body, caller)
            .instrument(span.clone())
            .await;
        if let Some(error) = &result.error {
            spans::record_error(&span, error.code.as_str());
        }
        Ok(result)
    }
}

#[async_trait]
impl Service<ToolsListRequest> for ToolExecutor {
    async fn call(&self, _: Envelope<ToolsListRequest>) -> Result<ToolsCatalog, ServiceError> {
        Ok(catalog(&self.core))
    }
}

#[async_trait]
impl Service<crate::protocol::JobCancelRequest> for ToolExecutor {
    async fn call(
        &self,
        request: Envelope<crate::protocol::JobCancelRequest>,
    ) -> Result<crate::protocol::JobCancelReply, ServiceError> {
        Ok(jobs::cancel(&self.core, &request.body.job_id).await)
    }
}

#[async_trait]
impl Service<ToolsMetricsRequest> for ToolExecutor {
    async fn call(&self, _: Envelope<ToolsMetricsRequest>) -> Result<ToolMetrics, ServiceError> {
        Ok(self.core.metrics.snapshot())
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
pub fn build_core(
    deps: &ActorDeps,
    db: Option<crate::store::durability::Durable>,
) -> Result<ExecCore, StartError> {
    let stores = match db {
        Some(db) => ToolStores::open(&db),
        None => ToolStores::temporary(),
    }?;
    let stores = match deps.bus.cluster() {
        Some(cluster) => {
            stores.shared_through(cluster.as_ref(), deps.config.tools.raw_retention_days)
        }
        None => stores,
    };
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
) -> Result<(ToolRegistry, Vec<ToolDefinition>), ToolSetupError> {
    let registry = ToolRegistry::with_overrides(&tools.define);
    let data = BuiltinData::demo()?;
    for name in &tools.builtin {
        let bus_tool = (name == SessionSearchTool::NAME)
            .then(|| Arc::new(SessionSearchTool::new(bus.cloned())) as Arc<dyn Tool>);
        let tool = builtin::builtin(name, &data)
            .or_else(|| builtin::with_stores(name, stores))
            .or(bus_tool)
            .ok_or_else(|| ToolSetupError::UnknownBuiltin {
                name: name.clone(),
                known: format!(
                    "{}, {}, {}",
                    builtin::all_names().join(", "),
                    builtin::store_names().join(", "),
                    SessionSearchTool::NAME
                ),
            })?;
        registry.register(tool)?;
    }
    let (workers, problems) = worker_definitions(&tools.define, |n| {
        registry.contains(n)
            || builtin::all_names().contains(&n)
            || builtin::store_names().contains(&n)
            || n == SessionSearchTool::NAME
    });
    match problems.first() {
        Some(first) => Err(ToolSetupError::Worker(first.clone())),
        None => Ok((registry, workers)),
    }
}

/// Every definition a configuration yields without a bus: built-ins and worker tools (MCP
/// tools appear only in a running executor's catalog). For `hermes tools ls|lint`.
pub fn configured_definitions(tools: &ToolsConfig) -> Result<Vec<ToolDefinition>, StartError> {
    let stores = ToolStores::temporary()?;
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

#[cfg(test)]
mod submit_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod write_tests;
