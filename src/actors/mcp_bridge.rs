//! The MCP-bridge: mounts the MCP servers of `[[mcp.servers]]` (an [`McpPool`] keeps each one
//! connected, reconnecting with backoff) and serves, in queue `mcp`:
//! `hermes.mcp.call` (tools/call), `hermes.mcp.read` (resources/read), `hermes.mcp.prompt`
//! (prompts/get), `hermes.mcp.catalog` (servers with tools, resources, prompts, status, pid) and
//! `hermes.mcp.audit` (the latest audit records). It publishes its catalog on
//! `hermes.mcp.changed` whenever a server dies, comes back or changes its lists.
//!
//! It owns the audit trail (sled tree `mcp_audit`): every call it makes is recorded and
//! published on `hermes.audit.mcp`; what Hermes' own MCP server publishes on
//! `hermes.audit.mcp_server` and `hermes.audit.auth_denied` is recorded too.
//!
//! A server that fails to start is reported loudly (an error log and `status = "failed"` in
//! the catalog, which `hermes demo`/`serve`/`mcp status` print) — never silently.

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;
use bytes::Bytes;

use super::adapter::{self, Incoming};
use super::{error_bytes, reply_bytes, ActorDeps};
use crate::bus::messages::{
    kinds, McpAuditReply, McpAuditRequest, McpCallReply, McpCallRequest, McpCatalog,
    McpPromptReply, McpPromptRequest, McpReadReply, McpReadRequest,
};
use crate::bus::subjects::{self, audit_kinds};
use crate::envelope::Envelope;
use crate::mcp::audit::{self, AuditLog, AuditRecord};
use crate::mcp::pool::McpPool;

pub struct McpBridge {
    deps: ActorDeps,
    pool: Arc<McpPool>,
    audit: Option<AuditLog>,
}

impl Actor for McpBridge {
    type Context = Context<Self>;

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        let pool = self.pool.clone();
        self.deps.io.spawn(async move { pool.shutdown().await });
    }
}

/// The subjects the bridge answers.
const SERVED: [&str; 5] = [
    subjects::MCP_CALL,
    subjects::MCP_CATALOG,
    subjects::MCP_READ,
    subjects::MCP_PROMPT,
    subjects::MCP_AUDIT,
];

impl McpBridge {
    /// Start every configured server (concurrently), then serve. `db` holds the audit tree
    /// (without one, calls are still published on `hermes.audit.mcp` but not stored).
    pub async fn start(
        deps: ActorDeps,
        db: Option<sled::Db>,
        arbiter: &ArbiterHandle,
    ) -> Result<(Addr<McpBridge>, McpCatalog), String> {
        let self_exe = std::env::current_exe()
            .map_err(|e| format!("cannot locate the hermes executable: {e}"))?;
        let configs = deps.config.mcp.servers.clone();
        // Spawning children and the handshakes are MCP I/O: they run on the I/O runtime.
        let pool = deps
            .io
            .spawn(async move { McpPool::start(&configs, &self_exe).await })
            .await
            .map_err(|e| e.to_string())?;
        let audit = match db.as_ref().map(AuditLog::open).transpose() {
            Ok(audit) => audit,
            Err(e) => return Err(e.to_string()),
        };
        let catalog = pool.catalog();
        let bridge = McpBridge {
            deps: deps.clone(),
            pool: pool.clone(),
            audit: audit.clone(),
        };
        let addr = McpBridge::start_in_arbiter(arbiter, |_| bridge);
        for subject in SERVED {
            adapter::serve(
                &deps.io,
                deps.bus.clone(),
                subject,
                Some(subjects::groups::MCP),
                addr.clone().recipient(),
            )
            .await
            .map_err(|e| e.to_string())?;
        }
        if let Some(audit) = audit {
            record_server_side_audit(&deps, audit).await?;
        }
        deps.io.spawn(announce_changes(deps.clone(), pool));
        Ok((addr, catalog))
    }
}

/// Publish the catalog on `hermes.mcp.changed` after every change.
async fn announce_changes(deps: ActorDeps, pool: Arc<McpPool>) {
    let mut changes = pool.changes();
    while changes.changed().await.is_ok() {
        let envelope = Envelope::new(kinds::MCP_CATALOG, pool.catalog());
        if let Err(e) =
            crate::bus::rpc::publish(deps.bus.as_ref(), subjects::MCP_CHANGED, &envelope).await
        {
            tracing::warn!(error = %e, "could not announce an MCP catalog change");
        }
    }
}

/// Store what Hermes' MCP server publishes on `hermes.audit.mcp_server` / `.auth_denied`.
async fn record_server_side_audit(deps: &ActorDeps, log: AuditLog) -> Result<(), String> {
    for kind in [audit_kinds::MCP_SERVER, audit_kinds::AUTH_DENIED] {
        let subject = subjects::audit(kind).map_err(|e| e.to_string())?;
        let mut sub = deps
            .bus
            .queue_subscribe(&subject, subjects::groups::MCP)
            .await
            .map_err(|e| e.to_string())?;
        let log = log.clone();
        deps.io.spawn(async move {
            while let Some(msg) = sub.next().await {
                match Envelope::decode_as::<AuditRecord>(&msg.payload, 1 << 20, kinds::AUDIT_EVENT)
                {
                    Ok(envelope) => {
                        if let Err(e) = log.record(&envelope.body) {
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

impl Handler<Incoming> for McpBridge {
    type Result = ResponseFuture<Option<Bytes>>;

    fn handle(&mut self, msg: Incoming, _ctx: &mut Self::Context) -> Self::Result {
        let pool = self.pool.clone();
        let deps = self.deps.clone();
        let audit = self.audit.clone();
        Box::pin(async move {
            let io = deps.io.clone();
            match io.spawn(answer(deps, pool, audit, msg)).await {
                Ok(reply) => reply,
                Err(e) => error_bytes("mcp_crashed", format!("the MCP bridge task failed: {e}")),
            }
        })
    }
}

/// Decode the request of `msg`'s subject, run it, audit it, encode the reply.
async fn answer(
    deps: ActorDeps,
    pool: Arc<McpPool>,
    audit: Option<AuditLog>,
    msg: Incoming,
) -> Option<Bytes> {
    let max = deps.config.engine.max_envelope_bytes;
    let ctx = CallContext {
        deps: &deps,
        audit: audit.as_ref(),
    };
    match msg.subject.as_str() {
        subjects::MCP_CATALOG => reply_bytes(&Envelope::new(kinds::MCP_CATALOG, pool.catalog())),
        subjects::MCP_AUDIT => {
            let request = match Envelope::decode_as::<McpAuditRequest>(
                &msg.payload,
                max,
                kinds::MCP_AUDIT_REQUEST,
            ) {
                Ok(r) => r,
                Err(e) => return error_bytes("bad_request", e.to_string()),
            };
            match audit.as_ref().map(|log| log.latest(request.body.limit)) {
                Some(Ok(records)) => reply_bytes(&Envelope::new(kinds::MCP_AUDIT, McpAuditReply { records })),
                Some(Err(e)) => error_bytes("audit_failed", e.to_string()),
                None => error_bytes("no_audit_store", "this MCP bridge runs without a data directory, so it keeps no audit records; run the bridge with a data directory"),
            }
        }
        subjects::MCP_READ => {
            let request =
                match Envelope::decode_as::<McpReadRequest>(&msg.payload, max, kinds::MCP_READ) {
                    Ok(r) => r,
                    Err(e) => return error_bytes("bad_request", e.to_string()),
                };
            let reply = ctx.read(&pool, request.body).await;
            reply_bytes(&Envelope::new(kinds::MCP_READ_RESULT, reply).in_trace(&request.trace_id))
        }
        subjects::MCP_PROMPT => {
            let request =
                match Envelope::decode_as::<McpPromptRequest>(&msg.payload, max, kinds::MCP_PROMPT)
                {
                    Ok(r) => r,
                    Err(e) => return error_bytes("bad_request", e.to_string()),
                };
            let reply = ctx.prompt(&pool, request.body).await;
            reply_bytes(&Envelope::new(kinds::MCP_PROMPT_RESULT, reply).in_trace(&request.trace_id))
        }
        _ => {
            let request =
                match Envelope::decode_as::<McpCallRequest>(&msg.payload, max, kinds::MCP_CALL) {
                    Ok(r) => r,
                    Err(e) => return error_bytes("bad_request", e.to_string()),
                };
            let reply = ctx.call(&pool, request.body).await;
            reply_bytes(&Envelope::new(kinds::MCP_RESULT, reply).in_trace(&request.trace_id))
        }
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
        let outcome = match pool.client(&body.server) {
            Ok((client, timeout)) => client
                .call_tool(&body.tool, body.arguments, timeout)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e),
        };
        let error = match &outcome {
            Ok(result) if result.is_error => Some(format!(
                "the tool reported an error: {}",
                first_line(&result.text)
            )),
            Ok(_) => None,
            Err(e) => Some(e.clone()),
        };
        self.audited(record.outcome(started, error)).await;
        match outcome {
            Ok(result) => McpCallReply {
                result: Some(result),
                error: None,
            },
            Err(e) => McpCallReply {
                result: None,
                error: Some(e),
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
            Ok((client, timeout)) => client
                .read_resource(&body.uri, timeout)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e),
        };
        self.audited(record.outcome(started, outcome.as_ref().err().cloned()))
            .await;
        match outcome {
            Ok(contents) => McpReadReply {
                contents,
                error: None,
            },
            Err(e) => McpReadReply {
                contents: Vec::new(),
                error: Some(e),
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
            Err(e) => Err(e),
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

    /// Store (when the bridge has a store) and publish on `hermes.audit.mcp`.
    async fn audited(&self, record: AuditRecord) {
        if let Some(log) = self.audit {
            if let Err(e) = log.record(&record) {
                tracing::warn!(error = %e, "could not store an MCP audit record");
            }
        }
        audit::publish(self.deps.bus.as_ref(), audit_kinds::MCP, &record).await;
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}
