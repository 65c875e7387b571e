//! A Streamable HTTP MCP server with one write tool, `record {entry}`, that counts how often
//! each entry was recorded: the fault runs read it to count write tools executed twice. It
//! answers with the entry itself, so the bench model's answer names it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

/// How many times each entry was recorded.
pub type Counts = Arc<Mutex<HashMap<String, usize>>>;

#[derive(Clone, Default)]
struct Ledger {
    counts: Counts,
}

impl ServerHandler for Ledger {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"entry": {"type": "string", "description": "what to record"}},
            "required": ["entry"]
        });
        let tool = Tool::new(
            "record".to_owned(),
            "Record an entry in the ledger (a write: each call adds one line).",
            Arc::new(schema.as_object().unwrap().clone()),
        );
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let entry = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("entry"))
            .and_then(|e| e.as_str())
            .unwrap_or_default()
            .to_string();
        *self
            .counts
            .lock()
            .unwrap()
            .entry(entry.clone())
            .or_default() += 1;
        Ok(CallToolResult::success(vec![ContentBlock::text(entry)]).into())
    }
}

/// Serve on a free loopback port (on the current tokio runtime); returns
/// `http://127.0.0.1:<port>/mcp` and the counts.
pub async fn start() -> (String, Counts) {
    let state = Ledger::default();
    let counts = state.counts.clone();
    (super::dynamic_mcp::serve_http(state).await, counts)
}
