//! The product-catalog MCP server the demo mounts (`hermes mcp catalog-server`): an rmcp
//! server with the tools `search_products` and `get_product` over the embedded demo catalog.
//! [`serve_catalog`] runs it over any transport; [`run_stdio`] over this process's stdio.

mod catalog;

use std::sync::Arc;

use rmcp::{
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{Implementation, ServerCapabilities, ServerConfig},
    schemars,
    service::RunningService,
    tool, tool_handler, tool_router,
    transport::IntoTransport,
    Json, RoleServer, ServerHandler, ServiceExt,
};
use serde::{Deserialize, Serialize};

pub use catalog::{
    Catalog, CatalogError, Product, SearchQuery, SearchResult, DEFAULT_LIMIT, MAX_LIMIT,
};

use super::McpError;

/// The name the server gives in its `initialize` answer.
pub const SERVER_NAME: &str = "hermes-catalog";

/// Arguments of `get_product`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct GetProductArgs {
    /// The product's sku, as returned by `search_products` (e.g. "SONY-WH1000XM6").
    pub sku: String,
}

/// The MCP service: the catalog plus the rmcp tool router.
#[derive(Debug, Clone)]
pub struct CatalogServer {
    catalog: Arc<Catalog>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl CatalogServer {
    pub fn new(catalog: Catalog) -> Self {
        Self {
            catalog: Arc::new(catalog),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        name = "search_products",
        description = "Search the product catalog (headphones, phones, laptops; prices in yuan). \
            All filters are optional and combine with AND: brand (English or Chinese, e.g. \
            \"Sony\" or \"索尼\"), category, max_price_yuan (inclusive), query (text in the name \
            or highlights). Returns the newest releases first, at most `limit` (default 5).",
        annotations(
            title = "Search products",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    async fn search_products(
        &self,
        Parameters(query): Parameters<SearchQuery>,
    ) -> Result<Json<SearchResult>, String> {
        self.catalog
            .search(&query)
            .map(Json)
            .map_err(|error| error.to_string())
    }

    #[tool(
        name = "get_product",
        description = "Get one product of the catalog by its sku (from search_products).",
        annotations(title = "Get product", read_only_hint = true, open_world_hint = false)
    )]
    async fn get_product(
        &self,
        Parameters(args): Parameters<GetProductArgs>,
    ) -> Result<Json<Product>, String> {
        self.catalog
            .get(&args.sku)
            .cloned()
            .map(Json)
            .ok_or_else(|| {
                format!(
                    "unknown sku `{}`; call search_products to find valid skus",
                    args.sku
                )
            })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CatalogServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION"))
                    .with_title("Hermes demo product catalog"),
            )
            .with_instructions(
                "A demo product catalog with prices in yuan. Use search_products to find \
                 products (newest first) and get_product for one sku.",
            )
    }
}

/// Serve the embedded catalog over `transport`; returns once a client has initialized the
/// session (the service then runs in the background until the transport closes).
pub async fn serve_catalog<T, E, A>(
    transport: T,
) -> Result<RunningService<RoleServer, CatalogServer>, McpError>
where
    T: IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let catalog = Catalog::embedded().map_err(|error| McpError::Spawn {
        server: SERVER_NAME.to_owned(),
        reason: error.to_string(),
    })?;
    CatalogServer::new(catalog)
        .serve(transport)
        .await
        .map_err(|error| McpError::Handshake {
            server: SERVER_NAME.to_owned(),
            reason: format!(
                "no MCP client initialized a session ({error}); start this server from an MCP \
                 client, e.g. as a [[mcp.servers]] entry"
            ),
        })
}

/// Serve the catalog over this process's stdin/stdout until the client closes stdin.
pub async fn run_stdio() -> Result<(), McpError> {
    let running = serve_catalog(rmcp::transport::stdio_pipes()).await?;
    running
        .waiting()
        .await
        .map(|_quit_reason| ())
        .map_err(|error| McpError::Dead {
            server: SERVER_NAME.to_owned(),
            reason: format!("the server task failed: {error}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
    use serde_json::{json, Value};

    type Client = RunningService<rmcp::RoleClient, ClientConfig>;

    async fn connected() -> (Client, RunningService<RoleServer, CatalogServer>) {
        let (server_end, client_end) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(serve_catalog(server_end));
        let client_config = ClientConfig::new(
            Default::default(),
            Implementation::new("catalog-test", "0.0.0"),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        let client = client_config.serve(client_end).await.unwrap();
        let server = server.await.unwrap().unwrap();
        (client, server)
    }

    fn arguments(value: Value) -> rmcp::model::JsonObject {
        value.as_object().cloned().unwrap()
    }

    #[tokio::test]
    async fn client_sees_both_tools_with_descriptions_and_schemas() {
        let (client, server) = connected().await;
        let info = client.peer_info().unwrap();
        assert_eq!(info.server_info.as_ref().unwrap().name, SERVER_NAME);
        assert_eq!(
            info.protocol_version,
            ProtocolVersion::LATEST_WITH_INITIALIZE
        );

        let mut tools = client.list_all_tools().await.unwrap();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, vec!["get_product", "search_products"]);
        for tool in &tools {
            assert!(tool.description.as_deref().is_some_and(|d| d.len() > 20));
            assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
        }
        let search = &tools[1];
        let properties = search.input_schema["properties"].as_object().unwrap();
        let mut keys: Vec<_> = properties.keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            vec!["brand", "category", "limit", "max_price_yuan", "query"]
        );
        assert!(search.output_schema.is_some());
        client.cancel().await.unwrap();
        server.cancel().await.unwrap();
    }

    #[tokio::test]
    async fn search_for_sony_headphones_under_5000_returns_newest_first() {
        let (client, server) = connected().await;
        let result = client
            .call_tool(
                CallToolRequestParams::new("search_products").with_arguments(arguments(json!({
                    "brand": "索尼", "category": "headphones", "max_price_yuan": 5000
                }))),
            )
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(false));
        let structured = result.structured_content.clone().unwrap();
        let skus: Vec<_> = structured["products"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["sku"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            skus,
            vec![
                "SONY-WF1000XM6",
                "SONY-WH1000XM6",
                "SONY-LINKBUDSFIT",
                "SONY-ULTWEAR",
                "SONY-WH1000XM5"
            ]
        );
        let text = &result.content[0].as_text().unwrap().text;
        let from_text: Value = serde_json::from_str(text).unwrap();
        assert_eq!(from_text, structured);
        client.cancel().await.unwrap();
        server.cancel().await.unwrap();
    }

    #[tokio::test]
    async fn unknown_sku_is_a_tool_error_result() {
        let (client, server) = connected().await;
        let result = client
            .call_tool(
                CallToolRequestParams::new("get_product")
                    .with_arguments(arguments(json!({"sku": "NOPE-1"}))),
            )
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(true));
        let text = &result.content[0].as_text().unwrap().text;
        assert!(text.contains("unknown sku `NOPE-1`"), "{text}");

        let found = client
            .call_tool(
                CallToolRequestParams::new("get_product")
                    .with_arguments(arguments(json!({"sku": "SONY-MDRZ1R"}))),
            )
            .await
            .unwrap();
        assert_eq!(found.is_error, Some(false));
        assert_eq!(
            found.structured_content.unwrap()["price_yuan"],
            json!(13999)
        );
        client.cancel().await.unwrap();
        server.cancel().await.unwrap();
    }

    #[tokio::test]
    async fn invalid_search_arguments_are_reported_not_ignored() {
        let (client, server) = connected().await;
        let zero = client
            .call_tool(
                CallToolRequestParams::new("search_products")
                    .with_arguments(arguments(json!({"limit": 0}))),
            )
            .await
            .unwrap();
        assert_eq!(zero.is_error, Some(true));
        assert!(zero.content[0]
            .as_text()
            .unwrap()
            .text
            .contains("limit must be between 1 and 50"));
        let unknown_field = client
            .call_tool(
                CallToolRequestParams::new("search_products")
                    .with_arguments(arguments(json!({"colour": "red"}))),
            )
            .await
            .unwrap();
        assert_eq!(unknown_field.is_error, Some(true));
        let text = &unknown_field.content[0].as_text().unwrap().text;
        assert!(text.contains("unknown field `colour`"), "{text}");
        client.cancel().await.unwrap();
        server.cancel().await.unwrap();
    }
}
