//! A small Streamable HTTP MCP server for tests whose tool list changes on demand: it starts
//! with `grow`, and each call of `grow` adds a tool `extra_<n>` and sends
//! `notifications/tools/list_changed`.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};

#[derive(Clone, Default)]
struct Growing {
    extra: Arc<Mutex<u32>>,
}

fn tool(name: &str) -> Tool {
    Tool::new(
        name.to_owned(),
        "test tool",
        Arc::new(
            serde_json::json!({"type": "object"})
                .as_object()
                .unwrap()
                .clone(),
        ),
    )
}

impl ServerHandler for Growing {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let extra = *self.extra.lock().unwrap();
        let mut tools = vec![tool("grow")];
        tools.extend((1..=extra).map(|n| tool(&format!("extra_{n}"))));
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = if request.name == "grow" {
            let n = {
                let mut extra = self.extra.lock().unwrap();
                *extra += 1;
                *extra
            };
            ctx.peer.notify_tool_list_changed().await.unwrap();
            format!("added extra_{n}")
        } else {
            format!("called {}", request.name)
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// Serve on a free loopback port; returns `http://127.0.0.1:<port>/mcp`.
pub async fn start() -> String {
    serve_http(Growing::default()).await
}

/// Serve `handler` over Streamable HTTP on a free loopback port (on the current tokio
/// runtime); returns `http://127.0.0.1:<port>/mcp`.
pub async fn serve_http<H: ServerHandler + Clone + Send + Sync + 'static>(handler: H) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = hyper_util::service::TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}/mcp")
}
