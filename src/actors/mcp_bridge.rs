//! The MCP-bridge: mounts the MCP servers of `[[mcp.servers]]` (an [`McpPool`] keeps each one
//! connected, reconnecting with backoff) and serves, in queue `mcp`:
//! `hermes.mcp.call` (tools/call), `hermes.mcp.read` (resources/read), `hermes.mcp.prompt`
//! (prompts/get), `hermes.mcp.task` (follow or cancel a server's task, see [`tasks`]),
//! `hermes.mcp.catalog` (servers with tools, resources, prompts, status, pid) and
//! `hermes.mcp.audit` (the latest audit records). It publishes its catalog on
//! `hermes.mcp.changed` whenever a server dies, comes back or changes its lists.
//!
//! It owns the audit trail (sled tree `mcp_audit`; on a NATS cluster the shared stream
//! `HERMES_AUDIT`, which `hermes.mcp.audit` answers from): every call it makes is recorded and
//! published on `hermes.audit.mcp`; what Hermes' own MCP server publishes on
//! `hermes.audit.mcp_server` and `hermes.audit.auth_denied` is recorded too.
//!
//! A server that fails to start is reported loudly (an error log and `status = "failed"` in
//! the catalog, which `hermes demo`/`serve`/`mcp status` print) — never silently.

mod tasks;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use async_trait::async_trait;
use tracing::Instrument;

use super::start_error::StartError;
use super::ActorDeps;
use crate::bus::service::{typed, Service, ServiceError};
use crate::bus::{BusError, Serving, SharedBus};
use crate::mcp::audit::{self, AuditLog, AuditRecord};
use crate::mcp::pool::McpPool;
use crate::protocol::envelope::Envelope;
use crate::protocol::request::McpCatalogRequest;
use crate::protocol::subjects::{self, audit_kinds};
use crate::protocol::{
    AuditEntry, McpAuditReply, McpAuditRequest, McpCallReply, McpCallRequest, McpCatalog,
    McpPromptReply, McpPromptRequest, McpReadReply, McpReadRequest,
};
use crate::telemetry::metrics::{self, McpStatus};

/// Owns the MCP connections: shuts them down when it stops.
pub struct McpBridge {
    deps: ActorDeps,
    pool: Arc<McpPool>,
}

impl Actor for McpBridge {
    type Context = Context<Self>;

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        let pool = self.pool.clone();
        self.deps.io.spawn(async move { pool.shutdown().await });
    }
}

impl McpBridge {
    /// Start every configured server (concurrently), then serve. `db` holds the audit tree
    /// (without one, calls are still published on `hermes.audit.mcp` but not stored).
    pub async fn start(
        deps: ActorDeps,
        db: Option<crate::store::durability::Durable>,
        arbiter: &ArbiterHandle,
    ) -> Result<(Addr<McpBridge>, McpCatalog, Vec<Serving>), StartError> {
        let self_exe = std::env::current_exe().map_err(StartError::SelfExe)?;
        let mut configs = deps.config.mcp.servers.clone();
        let token_dir = crate::mcp::oauth::token_store::store_dir(&deps.config.engine.data_dir);
        for config in &mut configs {
            config.oauth_store = Some(token_dir.clone());
        }
        // Spawning children and the handshakes are MCP I/O: they run on the I/O runtime.
        let pool = deps
            .io
            .spawn(async move { McpPool::start(&configs, &self_exe).await })
            .await?;
        let audit = db.as_ref().map(AuditLog::open).transpose()?;
        if let Some(cluster) = deps.bus.cluster() {
            cluster.audit_trail().open().await?;
        }
        let catalog = pool.catalog();
        let bridge = McpBridge {
            deps: deps.clone(),
            pool: pool.clone(),
        };
        let addr = McpBridge::start_in_arbiter(arbiter, |_| bridge);
        let serving = serve(&deps, pool.clone(), audit.clone()).await?;
        if let Some(audit) = audit {
            record_server_side_audit(&deps, audit).await?;
        }
        deps.io.spawn(announce_changes(deps.clone(), pool));
        Ok((addr, catalog, serving))
    }
}

/// Serve the bridge's subjects (queue `mcp`) until the guards drop.
async fn serve(
    deps: &ActorDeps,
    pool: Arc<McpPool>,
    audit: Option<AuditLog>,
) -> Result<Vec<Serving>, crate::bus::BusError> {
    let requests = Arc::new(McpRequests {
        deps: deps.clone(),
        pool,
        audit,
    });
    let max = deps.config.engine.max_envelope_bytes;
    let group = subjects::groups::MCP;
    let bus = &deps.bus;
    Ok(vec![
        bus.serve(
            subjects::MCP_CALL,
            group,
            typed::<McpCallRequest, _>(requests.clone(), max),
        )
        .await?,
        bus.serve(
            subjects::MCP_READ,
            group,
            typed::<McpReadRequest, _>(requests.clone(), max),
        )
        .await?,
        bus.serve(
            subjects::MCP_PROMPT,
            group,
            typed::<McpPromptRequest, _>(requests.clone(), max),
        )
        .await?,
        bus.serve(
            subjects::MCP_TASK,
            group,
            typed::<crate::protocol::McpTaskRequest, _>(requests.clone(), max),
        )
        .await?,
        bus.serve(
            subjects::MCP_CATALOG,
            group,
            typed::<McpCatalogRequest, _>(requests.clone(), max),
        )
        .await?,
        bus.serve(
            subjects::MCP_AUDIT,
            group,
            typed::<McpAuditRequest, _>(requests, max),
        )
        .await?,
    ])
}

/// Publish the catalog on `hermes.mcp.changed` after every change.
async fn announce_changes(deps: ActorDeps, pool: Arc<McpPool>) {
    let mut changes = pool.changes();
    while changes.changed().await.is_ok() {
        let envelope = Envelope::event(pool.catalog());
        if let Err(e) =
            crate::bus::rpc::publish(deps.bus.as_ref(), subjects::MCP_CHANGED, &envelope).await
        {
            tracing::warn!(error = %e, "could not announce an MCP catalog change");
        }
    }
}

/// Store what Hermes' MCP server publishes on `hermes.audit.mcp_server` / `.auth_denied`.
async fn record_server_side_audit(deps: &ActorDeps, log: AuditLog) -> Result<(), BusError> {
    for kind in [audit_kinds::MCP_SERVER, audit_kinds::AUTH_DENIED] {
        let subject = subjects::audit(kind).map_err(|e| BusError::InvalidSubject {
            subject: format!("hermes.audit.{kind}"),
            reason: e.to_string(),
        })?;
        let mut sub = deps
            .bus
            .queue_subscribe(&subject, subjects::groups::MCP)
            .await?;
        let log = log.clone();
        deps.io.spawn(async move {
            while let Some(msg) = sub.next().await {
                match Envelope::<AuditEntry>::decode_event(&msg.payload, 1 << 20) {
                    Ok(envelope) => {
                        if let Err(e) = log.record(&envelope.body.into()) {
                            tracing::warn!(error = %e, "could not store an MCP audit record");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "malformed MCP audit event ignored"),
                }
            }
        });
    }
    Ok(())
}

/// Answers the bridge's requests: catalog and audit at once, server calls on the I/O runtime
/// (the MCP connections live there).
struct McpRequests {
    deps: ActorDeps,
    pool: Arc<McpPool>,
    audit: Option<AuditLog>,
}

impl McpRequests {
    async fn on_io<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, ServiceError> {
        // The call's span (and so its trace) goes along to the I/O runtime.
        self.deps
            .io
            .spawn(work.in_current_span())
            .await
            .map_err(|e| {
                ServiceError::new("mcp_crashed", format!("the MCP bridge task failed: {e}"))
            })
    }

    fn context(&self) -> OwnedContext {
        OwnedContext {
            deps: self.deps.clone(),
            audit: self.audit.clone(),
            pool: self.pool.clone(),
        }
    }
}

/// What a call on the I/O runtime takes along.
struct OwnedContext {
    deps: ActorDeps,
    audit: Option<AuditLog>,
    pool: Arc<McpPool>,
}

impl OwnedContext {
    fn borrow(&self) -> CallContext<'_> {
        CallContext {
            deps: &self.deps,
            audit: self.audit.as_ref(),
        }
    }
}

#[async_trait]
impl Service<McpCallRequest> for McpRequests {
    async fn call(&self, request: Envelope<McpCallRequest>) -> Result<McpCallReply, ServiceError> {
        let owned = self.context();
        if request.body.accept_task {
            return self
                .on_io(async move {
                    owned
                        .borrow()
                        .call_accepting_task(&owned.pool, request.body)
                        .await
                })
                .await;
        }
        self.on_io(async move { owned.borrow().call(&owned.pool, request.body).await })
            .await
    }
}

#[async_trait]
impl Service<McpReadRequest> for McpRequests {
    async fn call(&self, request: Envelope<McpReadRequest>) -> Result<McpReadReply, ServiceError> {
        let owned = self.context();
        self.on_io(async move { owned.borrow().read(&owned.pool, request.body).await })
            .await
    }
}

#[async_trait]
impl Service<McpPromptRequest> for McpRequests {
    async fn call(
        &self,
        request: Envelope<McpPromptRequest>,
    ) -> Result<McpPromptReply, ServiceError> {
        let owned = self.context();
        self.on_io(async move { owned.borrow().prompt(&owned.pool, request.body).await })
            .await
    }
}

#[async_trait]
impl Service<McpCatalogRequest> for McpRequests {
    async fn call(&self, _: Envelope<McpCatalogRequest>) -> Result<McpCatalog, ServiceError> {
        Ok(self.pool.catalog())
    }
}

#[async_trait]
impl Service<McpAuditRequest> for McpRequests {
    async fn call(
        &self,
        request: Envelope<McpAuditRequest>,
    ) -> Result<McpAuditReply, ServiceError> {
        if let Some(cluster) = self.deps.bus.cluster() {
            let records = audit::latest_shared(cluster.audit_trail().as_ref(), request.body.limit)
                .await
                .map_err(|e| ServiceError::new("audit_failed", e.to_string()))?;
            return Ok(McpAuditReply { records });
        }
        let Some(log) = &self.audit else {
            return Err(ServiceError::new(
                "no_audit_store",
                "this MCP bridge runs without a data directory, so it keeps no audit records; \
                 run the bridge with a data directory",
            ));
        };
        let records = log
            .latest(request.body.limit)
            .map_err(|e| ServiceError::new("audit_failed", e.to_string()))?;
        Ok(McpAuditReply {
            records: records.into_iter().map(Into::into).collect(),
        })
    }
}

/// What an audited operation needs.
struct CallContext<'a> {
    deps: &'a ActorDeps,
    audit: Option<&'a AuditLog>,
}

impl CallContext<'_> {
    async fn call(&self, pool: &McpPool, body: McpCallRequest) -> McpCallReply {
        let started = Instant::now();
        let record = AuditRecord::new(
            "client",
            body.user.as_deref(),
            &body.server,
            "tools/call",
            &body.tool,
        );
        let call = uuid::Uuid::new_v4().to_string();
        let outcome = match pool.client(&body.server) {
            Ok((client, timeout)) => {
                // In the trail before the server can act: a kill mid-call leaves `started`.
                self.audited(record.started(&call)).await;
                let outcome = client.call_tool(&body.tool, body.arguments, timeout).await;
                let status = match &outcome {
                    Ok(result) if result.is_error => McpStatus::ToolError,
                    Ok(_) => McpStatus::Ok,
                    Err(e) => McpStatus::of(e.failure()),
                };
                metrics::mcp_call(&body.server, status, started.elapsed());
                outcome
            }
            // No call was made (unknown or down server): nothing to time.
            Err(e) => Err(e),
        };
        let error = match &outcome {
            Ok(result) if result.is_error => Some(format!(
                "the tool reported an error: {}",
                first_line(&result.text)
            )),
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        };
        self.audited(record.for_call(&call).outcome(started, error))
            .await;
        match outcome {
            Ok(result) => McpCallReply {
                result: Some(result),
                ..McpCallReply::default()
            },
            Err(e) => McpCallReply {
                error: Some(e.to_string()),
                failure: Some(e.failure()),
                ..McpCallReply::default()
            },
        }
    }

    async fn read(&self, pool: &McpPool, body: McpReadRequest) -> McpReadReply {
        let started = Instant::now();
        let record = AuditRecord::new(
            "client",
            body.user.as_deref(),
            &body.server,
            "resources/read",
            &body.uri,
        );
        let outcome = match pool.client(&body.server) {
            Ok((client, timeout)) => client.read_resource(&body.uri, timeout).await,
            Err(e) => Err(e),
        };
        let error = outcome.as_ref().err().map(ToString::to_string);
        self.audited(record.outcome(started, error)).await;
        match outcome {
            Ok(contents) => McpReadReply {
                contents,
                error: None,
                failure: None,
            },
            Err(e) => McpReadReply {
                contents: Vec::new(),
                error: Some(e.to_string()),
                failure: Some(e.failure()),
            },
        }
    }

    async fn prompt(&self, pool: &McpPool, body: McpPromptRequest) -> McpPromptReply {
        let started = Instant::now();
        let record = AuditRecord::new(
            "client",
            body.user.as_deref(),
            &body.server,
            "prompts/get",
            &body.name,
        );
        let outcome = match pool.client(&body.server) {
            Ok((client, timeout)) => client
                .get_prompt(&body.name, body.arguments, timeout)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        self.audited(record.outcome(started, outcome.as_ref().err().cloned()))
            .await;
        match outcome {
            Ok(prompt) => McpPromptReply {
                prompt: Some(prompt),
                error: None,
            },
            Err(e) => McpPromptReply {
                prompt: None,
                error: Some(e),
            },
        }
    }

    /// Store (when the bridge has a store) and publish on `hermes.audit.mcp`, waited for at
    /// most [`AUDIT_WAIT`]: while the shared trail is slow (JetStream failing over) the call
    /// goes on and its record follows, instead of the call timing out on its audit.
    async fn audited(&self, record: AuditRecord) {
        let stored = self.deps.io.spawn(record_audit(
            self.deps.bus.clone(),
            self.audit.cloned(),
            record,
        ));
        if tokio::time::timeout(AUDIT_WAIT, stored).await.is_err() {
            tracing::warn!("the MCP audit trail is slow; the call goes on and its record follows");
        }
    }
}

/// How long a call waits for one of its audit records to be stored.
const AUDIT_WAIT: Duration = Duration::from_millis(500);

/// Store `record` in this bridge's tree (when it has one) and publish it on
/// `hermes.audit.mcp` (the shared trail on a NATS cluster).
async fn record_audit(bus: SharedBus, log: Option<AuditLog>, record: AuditRecord) {
    if let Some(log) = &log {
        if let Err(e) = log.record(&record) {
            tracing::warn!(error = %e, "could not store an MCP audit record");
        }
    }
    audit::publish(bus.as_ref(), audit_kinds::MCP, &record).await;
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}
