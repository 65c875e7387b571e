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
    let (listener, addr) = loopback().await;
    let service = mcp_service(handler);
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

/// A listener on a free loopback port, and its address.
async fn loopback() -> (tokio::net::TcpListener, std::net::SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// rmcp's Streamable HTTP service for `handler`, a fresh handler per session.
fn mcp_service<H: ServerHandler + Clone + Send + Sync + 'static>(
    handler: H,
) -> StreamableHttpService<H, LocalSessionManager> {
    StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    )
}

/// What a [`serve_http_with_slow_stream`] server saw, in order: `"GET answered"` when it
/// answered a standalone-stream GET (after the delay), `"POST"` for each POST it received.
pub type Seen = Arc<Mutex<Vec<&'static str>>>;

/// [`serve_http`], answering each GET only after `delay` — a server slow to open the
/// standalone stream — and recording what it saw.
pub async fn serve_http_with_slow_stream<H>(
    handler: H,
    delay: std::time::Duration,
) -> (String, Seen)
where
    H: ServerHandler + Clone + Send + Sync + 'static,
{
    use hyper::service::Service as _;
    let (listener, addr) = loopback().await;
    let service = mcp_service(handler);
    let seen = Seen::default();
    let recording = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let inner = hyper_util::service::TowerToHyperService::new(service.clone());
            let seen = recording.clone();
            let slow = hyper::service::service_fn(move |request: hyper::Request<_>| {
                let (inner, seen) = (inner.clone(), seen.clone());
                async move {
                    let get = request.method() == hyper::Method::GET;
                    if get {
                        tokio::time::sleep(delay).await;
                    } else if request.method() == hyper::Method::POST {
                        seen.lock().unwrap().push("POST");
                    }
                    let response = inner.call(request).await;
                    if get {
                        seen.lock().unwrap().push("GET answered");
                    }
                    response
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), slow)
                    .await;
            });
        }
    });
    (format!("http://{addr}/mcp"), seen)
}

/// [`start`], with the standalone stream answered only after `delay`.
pub async fn start_with_slow_stream(delay: std::time::Duration) -> (String, Seen) {
    serve_http_with_slow_stream(Growing::default(), delay).await
}
