//! MCP: the client the MCP-bridge uses to mount servers (behind [`McpClient`], so an rmcp
//! upgrade touches one file), and the small product-catalog server the demo mounts.

pub mod catalog_server;
pub mod client;

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool a server offers, as the server describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// The result of `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpToolResult {
    /// The server flagged the result as an error (`isError`).
    pub is_error: bool,
    /// Text content blocks joined by newlines.
    pub text: String,
    /// `structuredContent`, when the server sent it.
    #[serde(default)]
    pub structured: Option<Value>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    #[error("MCP server `{server}` could not be started: {reason}; check its command/args in [[mcp.servers]]")]
    Spawn { server: String, reason: String },
    #[error("MCP server `{server}` failed the handshake: {reason}")]
    Handshake { server: String, reason: String },
    #[error("MCP server `{server}` is not running (it exited or never started): {reason}")]
    Dead { server: String, reason: String },
    #[error("MCP server `{server}` did not answer `{method}` within {after:?}")]
    Timeout {
        server: String,
        method: String,
        after: Duration,
    },
    #[error("MCP server `{server}` answered `{method}` with an error: {reason}")]
    Protocol {
        server: String,
        method: String,
        reason: String,
    },
}

/// A connected MCP server.
#[async_trait]
pub trait McpClient: Send + Sync {
    /// The configured server name.
    fn server(&self) -> &str;
    async fn list_tools(&self) -> Result<Vec<McpTool>, McpError>;
    async fn call_tool(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<McpToolResult, McpError>;
    /// Close the session and stop the child process.
    async fn shutdown(&self);
}
