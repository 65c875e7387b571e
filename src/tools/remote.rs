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

/// `session_search`: the user's past conversations, searched by the session service over
/// `hermes.sessions.search` (the session layer owns the messages).
pub struct SessionSearchTool {
    /// `None` when the registry is built only to list or lint definitions.
    bus: Option<SharedBus>,
}

impl SessionSearchTool {
    pub const NAME: &'static str = "session_search";

    pub fn new(bus: Option<SharedBus>) -> Self {
        Self { bus }
    }
}

#[async_trait]
impl Tool for SessionSearchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: Self::NAME.into(),
            description: "Search the user's earlier conversations (all sessions, full history, \
                Chinese or English). Use it when the user refers to something said before that \
                is not in the current context. Do not use it for facts about the world. \
                Parameters: query (keywords), limit (1-10, default 5). Returns {hits: [{session, \
                role, ts, text, score}]} best first; an empty list when nothing matches."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "keywords to look for"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 10, "description": "most hits, default 5"},
                    "_user": {"type": "string"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(10)
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        use crate::bus::messages::{SessionSearchReply, SessionSearchRequest};
        let user = arguments
            .get("_user")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ToolError::new(ToolErrorCode::ExecutionFailed, "no user to search for")
            })?;
        let request = Envelope::new(
            kinds::SESSIONS_SEARCH,
            SessionSearchRequest {
                user: user.to_string(),
                query: arguments["query"].as_str().unwrap_or_default().to_string(),
                limit: arguments.get("limit").and_then(Value::as_u64).unwrap_or(5) as usize,
            },
        );
        let bus = self.bus.as_ref().ok_or_else(|| {
            ToolError::new(ToolErrorCode::Unavailable, "session search has no bus here")
        })?;
        let reply: Envelope<SessionSearchReply> = rpc::call(
            bus.as_ref(),
            subjects::SESSIONS_SEARCH,
            &request,
            kinds::SESSIONS_FOUND,
            Duration::from_secs(10),
        )
        .await
        .map_err(|e| ToolError::new(ToolErrorCode::Unavailable, format!("session search: {e}")))?;
        Ok(serde_json::json!({ "hits": reply.body.hits }))
    }
}
