//! `hermes mcp probe URL`: a small MCP client over Streamable HTTP — connect, list the tools,
//! call one — and the client side of the MCP conformance suite, which appends the URL and
//! names the scenario in `MCP_CONFORMANCE_SCENARIO` (the revision to speak in
//! `MCP_CONFORMANCE_PROTOCOL_VERSION`, a pre-registered client in `MCP_CONFORMANCE_CONTEXT`).
//!
//! It goes through Hermes' own MCP client and OAuth code: a server behind OAuth is logged in
//! to as `hermes mcp login` does (discovery, registration, PKCE, the token exchange), except
//! that nobody opens the authorization URL in a browser — the probe fetches it and follows the
//! redirect to its loopback listener — and the tokens live in a directory that is removed
//! afterwards.

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::{json, Value};

use hermes::config::{McpOAuthConfig, McpRevision, McpServerConfig};
use hermes::mcp::client::RmcpClient;
use hermes::mcp::oauth::discovery::discover;
use hermes::mcp::oauth::login::{login, LoginOptions};
use hermes::mcp::oauth::token_store::TokenStore;
use hermes::mcp::McpClient;

use super::runtime::io_runtime;

/// `--call` placeholder for "the first tool the server lists".
const FIRST_TOOL: &str = "-";

#[derive(Args)]
pub struct ProbeArgs {
    /// Tool to call after listing, `-` for the first one listed (default from
    /// MCP_CONFORMANCE_SCENARIO).
    #[arg(long)]
    call: Option<String>,
    /// Arguments of that call, as a JSON object.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Bearer token sent as `Authorization: Bearer …` (no OAuth login is tried then).
    #[arg(long, env = "HERMES_MCP_TOKEN")]
    token: Option<String>,
    /// The revision to speak: `2026-07-28`, `2025-11-25` or `auto` (default from
    /// MCP_CONFORMANCE_PROTOCOL_VERSION, else `auto`).
    #[arg(long)]
    protocol: Option<String>,
    /// Seconds to keep trying while the server is not up yet.
    #[arg(long, default_value_t = 10)]
    wait: u64,
    /// The server's Streamable HTTP URL.
    url: String,
}

pub fn run(args: ProbeArgs) -> anyhow::Result<()> {
    io_runtime()?.block_on(probe(args))
}

/// The conformance client: connect (logging in when the server asks for OAuth), list tools,
/// call the scenario's tool.
async fn probe(args: ProbeArgs) -> anyhow::Result<()> {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let (tool, arguments) = match (&args.call, scenario.as_str()) {
        (Some(tool), _) => (
            Some(tool.clone()),
            serde_json::from_str::<Value>(&args.args).context("--args is not JSON")?,
        ),
        (None, "tools_call") => (Some("add_numbers".to_owned()), json!({"a": 5, "b": 3})),
        (None, "sse-retry") => (Some("test_reconnection".to_owned()), json!({})),
        // The authorization scenarios check what a call carries, whatever the tool.
        (None, auth) if auth.starts_with("auth/") => (Some(FIRST_TOOL.to_owned()), json!({})),
        (None, _) => (None, Value::Null),
    };
    let protocol = args
        .protocol
        .clone()
        .or_else(|| std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").ok());
    let mut headers = std::collections::BTreeMap::new();
    if let Some(token) = &args.token {
        headers.insert("Authorization".to_string(), format!("Bearer {token}"));
    }
    let mut config = McpServerConfig {
        name: "probe".into(),
        url: Some(args.url.clone()),
        headers,
        timeout_secs: 20,
        protocol: revision(protocol.as_deref())?,
        ..Default::default()
    };
    // A server may ask for OAuth at connect (2026-07-28: its first request) or only after
    // the handshake (2025-11-25 servers that let `initialize` through): either way the
    // session is tried once as is, and again after a login if the server turns out to be
    // protected.
    let first = session(&config, &args, tool.as_deref(), &arguments).await;
    let refused = match first {
        Ok(()) => return Ok(()),
        Err(refused) if args.token.is_none() => refused,
        Err(refused) => return Err(refused),
    };
    let http = reqwest::Client::new();
    if discover(&http, &config.name, &args.url).await.is_err() {
        return Err(refused);
    }
    let token_dir = tempfile::tempdir().context("a directory for the probe's OAuth tokens")?;
    config.oauth = Some(McpOAuthConfig {
        client_id: pre_registered_client(),
        ..McpOAuthConfig::default()
    });
    config.oauth_store = Some(token_dir.path().to_path_buf());
    let store = TokenStore::new(token_dir.path().to_path_buf());
    login(&config, &store, &LoginOptions::default(), |link| {
        authorize_headless(link.to_owned())
    })
    .await?;
    session(&config, &args, tool.as_deref(), &arguments).await
}

/// Connect, list the tools, call `tool` (`-`: the first listed) and disconnect.
async fn session(
    config: &McpServerConfig,
    args: &ProbeArgs,
    tool: Option<&str>,
    arguments: &Value,
) -> anyhow::Result<()> {
    let client = connect(config, args).await?;
    let tools = client.list_tools().await?;
    println!(
        "tools: {}",
        tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let tool = match tool {
        Some(FIRST_TOOL) => tools.first().map(|t| t.name.clone()),
        other => other.map(str::to_owned),
    };
    if let Some(tool) = tool {
        let result = client
            .call_tool(&tool, arguments.clone(), Duration::from_secs(20))
            .await?;
        println!("{tool}: {}", result.text);
    }
    client.shutdown().await;
    Ok(())
}

/// Connect, retrying for `--wait` seconds while nothing listens at the URL yet.
async fn connect(config: &McpServerConfig, args: &ProbeArgs) -> anyhow::Result<RmcpClient> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.wait);
    loop {
        match RmcpClient::connect_http(config, &args.url).await {
            Ok(client) => return Ok(client),
            Err(e) if tokio::time::Instant::now() < deadline && is_refused(&e) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The revision named by `--protocol` / MCP_CONFORMANCE_PROTOCOL_VERSION: 2026-07-28 is the
/// stateless one, every dated revision before it the `initialize` handshake.
fn revision(named: Option<&str>) -> anyhow::Result<McpRevision> {
    Ok(match named {
        None | Some("auto") => McpRevision::Auto,
        Some("2026-07-28") => McpRevision::Stateless2026,
        Some(date) if date.len() == 10 && date < "2026-07-28" => McpRevision::Handshake2025,
        Some(other) => anyhow::bail!(
            "protocol `{other}` is not one Hermes speaks; use 2026-07-28, 2025-11-25 or auto"
        ),
    })
}

/// The client id the conformance suite pre-registered for the scenario, if any.
fn pre_registered_client() -> Option<String> {
    let context = std::env::var("MCP_CONFORMANCE_CONTEXT").ok()?;
    let context: Value = serde_json::from_str(&context).ok()?;
    context
        .get("client_id")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Stand in for the person at the browser: fetch the authorization URL and follow its
/// redirects, the last of which reaches the login's loopback listener with the code.
fn authorize_headless(link: String) {
    tokio::spawn(async move {
        if let Err(error) = reqwest::get(&link).await {
            eprintln!("probe: fetching the authorization URL failed: {error}");
        }
    });
}

/// A connection the server refused: it is not listening yet.
fn is_refused(error: &dyn std::error::Error) -> bool {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    let text = text.to_lowercase();
    text.contains("connection refused") || text.contains("error sending request")
}
