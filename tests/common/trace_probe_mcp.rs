//! A Streamable HTTP MCP server with one read-only tool, `lookup {sku}`, that remembers the
//! `_meta.traceparent` of every `tools/call` it receives — what a traced MCP server would
//! continue its own trace from.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, RequestParamsMeta, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

/// The `traceparent` of each call, in order (`None` for a call without one).
pub type Seen = Arc<Mutex<Vec<Option<String>>>>;

#[derive(Clone, Default)]
struct Probe {
    seen: Seen,
}

impl ServerHandler for Probe {
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
            "properties": {"sku": {"type": "string", "description": "the product's sku"}},
            "required": ["sku"]
        });
        let tool = Tool::new(
            "lookup".to_owned(),
            "Look a product up by sku.",
            Arc::new(schema.as_object().unwrap().clone()),
        )
        .annotate(ToolAnnotations::new().read_only(true));
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let traceparent = ctx
            .meta
            .get_traceparent()
            .or(request.traceparent())
            .map(str::to_string);
        self.seen.lock().unwrap().push(traceparent);
        Ok(CallToolResult::success(vec![ContentBlock::text("in stock: 3")]).into())
    }
}

/// Serve on a free loopback port (on the current tokio runtime); returns
/// `http://127.0.0.1:<port>/mcp` and what the calls carried.
pub async fn start() -> (String, Seen) {
    let probe = Probe::default();
    let seen = probe.seen.clone();
    (super::dynamic_mcp::serve_http(probe).await, seen)
}
