//! A Streamable HTTP MCP server for tests (2026-07-28) whose tool `greet` asks the user who
//! is asking before it answers: the first call gets an `input_required` result with one form
//! question and a `requestState`; the call made again with the answer (and that state
//! echoed) greets by name, or says it was declined. It records each round's answers.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InputRequiredResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};

/// The state the server hands out with its question and expects back.
pub const STATE: &str = "greet-round-1";

/// The server; clones share what it saw.
#[derive(Clone, Default)]
pub struct AskingServer {
    /// Each call's `inputResponses` (`null` for a first round).
    seen: Arc<Mutex<Vec<Value>>>,
}

impl AskingServer {
    /// Serve on a free loopback port; returns `http://127.0.0.1:<port>/mcp`.
    pub async fn serve(&self) -> String {
        crate::common::dynamic_mcp::serve_http(self.clone()).await
    }

    /// Every call's answers, in order (`null`: the call that was asked).
    pub fn seen(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }
}

fn question() -> InputRequiredResult {
    serde_json::from_value(json!({
        "resultType": "input_required",
        "inputRequests": {
            "who": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "Who is asking?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string", "default": "Ada"}},
                        "required": ["name"]
                    }
                }
            }
        },
        "requestState": STATE
    }))
    .expect("a valid input_required result")
}

impl ServerHandler for AskingServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {}});
        let tool = Tool::new(
            "greet",
            "Greet whoever is asking (asks their name first)",
            Arc::new(schema.as_object().unwrap().clone()),
        );
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let answers = serde_json::to_value(&request.input_responses).unwrap();
        self.seen.lock().unwrap().push(answers.clone());
        let Some(answer) = answers.get("who") else {
            return Ok(question().into());
        };
        if request.request_state.as_deref() != Some(STATE) {
            return Err(ErrorData::invalid_params(
                "the request state did not come back unchanged",
                None,
            ));
        }
        let text = match answer["action"].as_str() {
            Some("accept") => format!("Hello, {}!", answer["content"]["name"].as_str().unwrap()),
            Some("decline") => "greeting declined".to_owned(),
            other => format!("greeting ended: {other:?}"),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}
