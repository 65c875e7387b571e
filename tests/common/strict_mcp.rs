//! A Streamable HTTP MCP server with one tool, `book_table {date, people}`, that checks its
//! arguments itself and refuses wrong ones the way MCP servers do: a JSON-RPC error `-32602`
//! (invalid params) whose message says what is wrong — not a tool result.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

/// What the server answers to a date that is not `YYYY-MM-DD`.
pub fn refusal(date: &str) -> String {
    format!("`date` must be a day written YYYY-MM-DD, got `{date}`")
}

#[derive(Clone, Default)]
struct Strict;

impl ServerHandler for Strict {
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
            "properties": {
                "date": {"type": "string", "description": "the day to book"},
                "people": {"type": "integer"}
            },
            "required": ["date", "people"]
        });
        let tool = Tool::new(
            "book_table".to_owned(),
            "Book a table for a day.",
            Arc::new(schema.as_object().unwrap().clone()),
        );
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let date = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("date"))
            .and_then(|d| d.as_str())
            .unwrap_or_default()
            .to_string();
        let well_formed = date.len() == 10
            && date.chars().enumerate().all(|(i, c)| {
                if i == 4 || i == 7 {
                    c == '-'
                } else {
                    c.is_ascii_digit()
                }
            });
        if !well_formed {
            return Err(ErrorData::invalid_params(refusal(&date), None));
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("booked {date}"))]).into())
    }
}

/// Serve on a free loopback port (on the current tokio runtime); returns
/// `http://127.0.0.1:<port>/mcp`.
pub async fn start() -> String {
    super::dynamic_mcp::serve_http(Strict).await
}
