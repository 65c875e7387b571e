//! Tools whose work happens elsewhere on the bus: an MCP server's tool, reached through the
//! MCP-bridge on `hermes.mcp.call`. The tool-executor registers one per mounted MCP tool, so
//! MCP tools get the same whitelist, validation and timeouts as built-ins.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{Tool, ToolError, ToolErrorCode};
use crate::bus::messages::{kinds, McpCallReply, McpCallRequest};
use crate::bus::{rpc, subjects, SharedBus};
use crate::envelope::Envelope;
use crate::llm::ToolSpec;
use crate::mcp::McpTool;

/// Separates server and tool in an MCP tool's Hermes name: `<server>__<tool>`.
pub const MCP_SEPARATOR: &str = "__";

/// An MCP server's tool as a Hermes tool.
pub struct McpProxyTool {
    spec: ToolSpec,
    server: String,
    tool: String,
    timeout: Duration,
    bus: SharedBus,
}

impl McpProxyTool {
    /// `None` when the combined name cannot be a subject token (the tool is then skipped).
    pub fn new(server: &str, tool: &McpTool, timeout: Duration, bus: SharedBus) -> Option<Self> {
        let name = format!("{server}{MCP_SEPARATOR}{}", tool.name);
        subjects::check_id("tool", &name).ok()?;
        let mut schema = tool.input_schema.clone();
        if !schema.is_object() {
            schema = serde_json::json!({"type": "object"});
        }
        Some(Self {
            spec: ToolSpec {
                name,
                description: format!("[MCP server `{server}`] {}", tool.description),
                input_schema: schema,
            },
            server: server.to_string(),
            tool: tool.name.clone(),
            timeout,
            bus,
        })
    }
}

#[async_trait]
impl Tool for McpProxyTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn call(&self, mut arguments: Value) -> Result<Value, ToolError> {
        if let Some(obj) = arguments.as_object_mut() {
            obj.retain(|k, _| !k.starts_with('_'));
        }
        let request = Envelope::new(
            kinds::MCP_CALL,
            McpCallRequest {
                server: self.server.clone(),
                tool: self.tool.clone(),
                arguments,
            },
        );
        let reply: Envelope<McpCallReply> = rpc::call(
            self.bus.as_ref(),
            subjects::MCP_CALL,
            &request,
            kinds::MCP_RESULT,
            self.timeout + Duration::from_secs(2),
        )
        .await
        .map_err(|e| {
            ToolError::new(ToolErrorCode::Unavailable, format!("MCP bridge: {e}"))
                .with_hint("the MCP bridge is not reachable; tell the user the tool is unavailable")
        })?;
        match (reply.body.result, reply.body.error) {
            (Some(r), _) if r.is_error => Err(ToolError::new(
                ToolErrorCode::ExecutionFailed,
                format!("MCP tool `{}` reported an error: {}", self.tool, r.text),
            )),
            (Some(r), _) => Ok(r.structured.unwrap_or_else(|| {
                serde_json::from_str::<Value>(&r.text)
                    .unwrap_or_else(|_| serde_json::json!({ "text": r.text }))
            })),
            (None, Some(e)) => Err(ToolError::new(ToolErrorCode::Unavailable, e)
                .with_hint("the MCP server is down; do not retry at once, tell the user")),
            (None, None) => Err(ToolError::new(
                ToolErrorCode::Unavailable,
                "MCP bridge answered with neither a result nor an error",
            )),
        }
    }
}
