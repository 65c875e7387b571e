//! The MCP-bridge: mounts the MCP servers of `[[mcp.servers]]` and serves `hermes.mcp.call`
//! and `hermes.mcp.catalog` (queue `mcp`).
//!
//! It owns the client sessions. A server that fails to start is reported loudly (an error log
//! and `status = "failed"` in the catalog, which `hermes demo`/`serve` print) — never silently.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;

use super::adapter::{self, Incoming};
use super::{error_bytes, reply_bytes, ActorDeps};
use crate::bus::messages::{kinds, McpCallReply, McpCallRequest, McpCatalog, McpServerStatus};
use crate::bus::subjects;
use crate::envelope::Envelope;
use crate::mcp::{client, McpClient, McpTool};

struct Mounted {
    client: Option<Arc<dyn McpClient>>,
    error: Option<String>,
    tools: Vec<McpTool>,
    timeout: Duration,
}

pub struct McpBridge {
    deps: ActorDeps,
    servers: Arc<BTreeMap<String, Mounted>>,
}

impl Actor for McpBridge {
    type Context = Context<Self>;

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        let clients: Vec<_> = self
            .servers
            .values()
            .filter_map(|m| m.client.clone())
            .collect();
        self.deps.io.spawn(async move {
            for c in clients {
                c.shutdown().await;
            }
        });
    }
}

impl McpBridge {
    /// Start every configured server (concurrently), list their tools, then serve.
    pub async fn start(
        deps: ActorDeps,
        arbiter: &ArbiterHandle,
    ) -> Result<(Addr<McpBridge>, McpCatalog), String> {
        let self_exe = std::env::current_exe()
            .map_err(|e| format!("cannot locate the hermes executable: {e}"))?;
        let configs = deps.config.mcp.servers.clone();
        let timeouts: BTreeMap<String, u64> = configs
            .iter()
            .map(|s| (s.name.clone(), s.timeout_secs))
            .collect();
        // Spawning children and the handshakes are MCP I/O: they run on the I/O runtime.
        let servers = deps
            .io
            .spawn(async move {
                let mut servers = BTreeMap::new();
                for (name, result) in client::connect_all(&configs, &self_exe).await {
                    let timeout = timeouts.get(&name).copied().unwrap_or(30);
                    let mounted = match result {
                        Ok(c) => match c.list_tools().await {
                            Ok(tools) => Mounted {
                                client: Some(c),
                                error: None,
                                tools,
                                timeout: Duration::from_secs(timeout),
                            },
                            Err(e) => failed(e.to_string(), timeout),
                        },
                        Err(e) => failed(e.to_string(), timeout),
                    };
                    match &mounted.error {
                        Some(e) => {
                            tracing::error!(server = %name, error = %e, "MCP server failed to start")
                        }
                        None => {
                            tracing::info!(server = %name, tools = mounted.tools.len(), "MCP server mounted")
                        }
                    }
                    servers.insert(name, mounted);
                }
                servers
            })
            .await
            .map_err(|e| e.to_string())?;
        let bridge = McpBridge {
            deps: deps.clone(),
            servers: Arc::new(servers),
        };
        let catalog = bridge.catalog();
        let addr = McpBridge::start_in_arbiter(arbiter, |_| bridge);
        for subject in [subjects::MCP_CALL, subjects::MCP_CATALOG] {
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
        Ok((addr, catalog))
    }

    fn catalog(&self) -> McpCatalog {
        McpCatalog {
            servers: self
                .servers
                .iter()
                .map(|(name, m)| McpServerStatus {
                    name: name.clone(),
                    status: if m.client.is_some() {
                        "ready"
                    } else {
                        "failed"
                    }
                    .into(),
                    error: m.error.clone(),
                    tools: m.tools.clone(),
                    timeout_secs: m.timeout.as_secs(),
                })
                .collect(),
        }
    }
}

fn failed(error: String, timeout: u64) -> Mounted {
    Mounted {
        client: None,
        error: Some(error),
        tools: Vec::new(),
        timeout: Duration::from_secs(timeout),
    }
}

impl Handler<Incoming> for McpBridge {
    type Result = ResponseFuture<Option<Bytes>>;

    fn handle(&mut self, msg: Incoming, _ctx: &mut Self::Context) -> Self::Result {
        if msg.subject == subjects::MCP_CATALOG {
            let reply = reply_bytes(&Envelope::new(kinds::MCP_CATALOG, self.catalog()));
            return Box::pin(async move { reply });
        }
        let servers = self.servers.clone();
        let io = self.deps.io.clone();
        let max = self.deps.config.engine.max_envelope_bytes;
        Box::pin(async move {
            let request =
                match Envelope::decode_as::<McpCallRequest>(&msg.payload, max, kinds::MCP_CALL) {
                    Ok(r) => r,
                    Err(e) => return error_bytes("bad_request", e.to_string()),
                };
            let body = request.body;
            let reply = match servers.get(&body.server) {
                None => McpCallReply {
                    result: None,
                    error: Some(format!(
                        "no MCP server named `{}` is mounted; mounted: {}",
                        body.server,
                        servers.keys().cloned().collect::<Vec<_>>().join(", ")
                    )),
                },
                Some(Mounted {
                    client: None,
                    error,
                    ..
                }) => McpCallReply {
                    result: None,
                    error: Some(format!(
                        "MCP server `{}` is not running: {}",
                        body.server,
                        error.clone().unwrap_or_default()
                    )),
                },
                Some(Mounted {
                    client: Some(c),
                    timeout,
                    ..
                }) => {
                    let c = c.clone();
                    let timeout = *timeout;
                    let call =
                        io.spawn(
                            async move { c.call_tool(&body.tool, body.arguments, timeout).await },
                        );
                    match call.await {
                        Ok(Ok(result)) => McpCallReply {
                            result: Some(result),
                            error: None,
                        },
                        Ok(Err(e)) => McpCallReply {
                            result: None,
                            error: Some(e.to_string()),
                        },
                        Err(e) => McpCallReply {
                            result: None,
                            error: Some(format!("MCP call crashed: {e}")),
                        },
                    }
                }
            };
            reply_bytes(&Envelope::new(kinds::MCP_RESULT, reply).in_trace(&request.trace_id))
        })
    }
}
