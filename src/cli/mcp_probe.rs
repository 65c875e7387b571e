//! `hermes mcp probe URL`: a small MCP client over Streamable HTTP — connect, list the tools,
//! call one — and the client side of the MCP conformance suite, which appends the URL and
//! names the scenario in `MCP_CONFORMANCE_SCENARIO` (the revision to speak in
//! `MCP_CONFORMANCE_PROTOCOL_VERSION`; its `MCP_CONFORMANCE_CONTEXT` may hold a pre-registered
//! client and the tool calls to make).
//!
//! It goes through Hermes' own MCP client and OAuth code: a server behind OAuth is logged in
//! to as `hermes mcp login` does (discovery, registration, PKCE, the token exchange), except
//! that nobody opens the authorization URL in a browser — the probe fetches it and follows the
//! redirect to its loopback listener — and the tokens live in a directory that is removed
//! afterwards.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::{json, Value};

use hermes::config::{McpOAuthConfig, McpRevision, McpServerConfig, OAuthGrant};
use hermes::mcp::client::{ConnectOptions, RmcpClient};
use hermes::mcp::elicit::{AcceptDefaults, Elicitor};
use hermes::mcp::oauth::discovery::discover;
use hermes::mcp::oauth::login::{login, LoginOptions};
use hermes::mcp::oauth::token_store::TokenStore;
use hermes::mcp::oauth::Reauthorize;
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
    /// Call every tool the server lists, with arguments made from each schema's defaults,
    /// examples or placeholders of the declared type: a smoke test of a whole server.
    #[arg(long, conflicts_with = "call")]
    call_each: bool,
    /// Answer the server's questions (elicitation, `input_required`) by accepting each form
    /// with the defaults its schema declares; without it, Hermes announces no elicitation.
    #[arg(long)]
    accept_defaults: bool,
    /// The https URL of a client ID metadata document to offer as the client id when the
    /// server asks for OAuth and its authorization server accepts such documents.
    #[arg(long)]
    client_metadata_url: Option<String>,
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
    let context = conformance_context();
    let calls = match (&args.call, scenario.as_str()) {
        (Some(tool), _) => Calls::These(vec![(
            tool.clone(),
            serde_json::from_str::<Value>(&args.args).context("--args is not JSON")?,
        )]),
        _ if args.call_each => Calls::Each,
        _ if context.get("toolCalls").is_some() => Calls::These(context_calls(&context)?),
        (None, "tools_call") => Calls::These(vec![("add_numbers".into(), json!({"a": 5, "b": 3}))]),
        (None, "sse-retry") => Calls::These(vec![("test_reconnection".into(), json!({}))]),
        // The scenario checks which of the tools it lists a client keeps (SEP-2243); the
        // others' tools ask questions, whose answers they check (SEP-1034, SEP-2322).
        (
            None,
            "http-invalid-tool-headers"
            | "elicitation-sep1034-client-defaults"
            | "sep-2322-client-request-state",
        ) => Calls::Each,
        // SEP-1613 / SEP-2106: the schema comes back as the client read it.
        (None, "json-schema-2020-12-preservation") => Calls::EchoSchema {
            echo: "json_schema_echo".into(),
            of: "json_schema_2020_12_tool".into(),
        },
        // The authorization scenarios check what a call carries, whatever the tool.
        (None, auth) if auth.starts_with("auth/") => {
            Calls::These(vec![(FIRST_TOOL.into(), json!({}))])
        }
        (None, _) => Calls::These(Vec::new()),
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
    let first = session(&config, &args, &calls, None).await;
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
    let text = |key: &str| context.get(key).and_then(Value::as_str).map(str::to_owned);
    config.oauth = Some(McpOAuthConfig {
        client_id: text("client_id"),
        client_metadata_url: args.client_metadata_url.clone(),
        grant: Some(OAuthGrant::Login),
        ..McpOAuthConfig::default()
    });
    config.oauth_store = Some(token_dir.path().to_path_buf());
    let store = TokenStore::new(token_dir.path().to_path_buf());
    let options = LoginOptions {
        client_secret: text("client_secret"),
        ..LoginOptions::default()
    };
    login(&config, &store, &options, |link| {
        authorize_headless(link.to_owned())
    })
    .await?;
    // The probe stands in for the person at the browser, so it can log in again mid-session:
    // for a wider scope, or at the authorization server the server moved to.
    let again = {
        let (config, store) = (config.clone(), store.clone());
        Reauthorize::new(move |scope: String| {
            let (config, store) = (config.clone(), store.clone());
            let options = LoginOptions {
                extra_scopes: vec![scope],
                ..options.clone()
            };
            async move {
                login(&config, &store, &options, |link| {
                    authorize_headless(link.to_owned())
                })
                .await
            }
        })
    };
    session(&config, &args, &calls, Some(again)).await
}

/// The calls a probe makes after listing the tools.
enum Calls {
    /// These tools (`-`: the first listed) with these arguments, in order.
    These(Vec<(String, Value)>),
    /// Every tool listed, with arguments from its schema.
    Each,
    /// `echo` with `{"schema": <the input schema of `of`, as Hermes read it>}`: shows whether
    /// Hermes keeps a tool's schema intact (the schema a model is given).
    EchoSchema { echo: String, of: String },
}

/// Connect, list the tools, make `calls` and disconnect. With several calls, one that fails
/// is reported and the rest are still made; the probe fails if any did.
async fn session(
    config: &McpServerConfig,
    args: &ProbeArgs,
    calls: &Calls,
    reauthorize: Option<Reauthorize>,
) -> anyhow::Result<()> {
    let client = connect(config, args, reauthorize).await?;
    let tools = client.list_tools().await?;
    println!(
        "tools: {}",
        tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let calls: Vec<(String, Value)> = match calls {
        Calls::Each => tools
            .iter()
            .map(|t| (t.name.clone(), example_arguments(&t.input_schema)))
            .collect(),
        Calls::EchoSchema { echo, of } => tools
            .iter()
            .find(|t| &t.name == of)
            .map(|t| (echo.clone(), json!({"schema": t.input_schema})))
            .into_iter()
            .collect(),
        Calls::These(calls) => calls
            .iter()
            .filter_map(|(tool, arguments)| match tool.as_str() {
                FIRST_TOOL => tools.first().map(|t| (t.name.clone(), arguments.clone())),
                _ => Some((tool.clone(), arguments.clone())),
            })
            .collect(),
    };
    let mut failed = None;
    for (tool, arguments) in calls {
        match client
            .call_tool(&tool, arguments, Duration::from_secs(20))
            .await
        {
            Ok(result) => println!("{tool}: {}", result.text),
            Err(error) if failed.is_none() => {
                eprintln!("{tool}: {error}");
                failed = Some(anyhow::Error::from(error).context(format!("calling `{tool}`")));
            }
            Err(error) => eprintln!("{tool}: {error}"),
        }
    }
    client.shutdown().await;
    failed.map_or(Ok(()), Err)
}

/// The conformance suite's context for the scenario (`MCP_CONFORMANCE_CONTEXT`), else `{}`.
fn conformance_context() -> Value {
    std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}))
}

/// The context's `toolCalls`: `[{"name": …, "arguments": {…}}, …]`.
fn context_calls(context: &Value) -> anyhow::Result<Vec<(String, Value)>> {
    let calls = context["toolCalls"]
        .as_array()
        .context("MCP_CONFORMANCE_CONTEXT: toolCalls is not a list")?;
    calls
        .iter()
        .map(|call| {
            let name = call["name"]
                .as_str()
                .context("MCP_CONFORMANCE_CONTEXT: a tool call without a name")?;
            let arguments = call.get("arguments").cloned().unwrap_or_else(|| json!({}));
            Ok((name.to_owned(), arguments))
        })
        .collect()
}

/// Arguments for a tool from its input schema: each required property's `default`, first
/// example, first enum value, else a placeholder of its type.
fn example_arguments(schema: &Value) -> Value {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    let mut arguments = serde_json::Map::new();
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        let property = properties
            .and_then(|p| p.get(name))
            .cloned()
            .unwrap_or_default();
        arguments.insert(name.to_owned(), example_value(&property));
    }
    Value::Object(arguments)
}

fn example_value(property: &Value) -> Value {
    if let Some(value) = property.get("default") {
        return value.clone();
    }
    for list in ["examples", "enum"] {
        if let Some(first) = property
            .get(list)
            .and_then(Value::as_array)
            .and_then(|l| l.first())
        {
            return first.clone();
        }
    }
    match property.get("type").and_then(Value::as_str) {
        Some("integer" | "number") => json!(1),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some("object") => example_arguments(property),
        Some("null") => Value::Null,
        _ => json!("example"),
    }
}

/// Connect, retrying for `--wait` seconds while nothing listens at the URL yet.
async fn connect(
    config: &McpServerConfig,
    args: &ProbeArgs,
    reauthorize: Option<Reauthorize>,
) -> anyhow::Result<RmcpClient> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.wait);
    loop {
        let options = ConnectOptions {
            reauthorize: reauthorize.clone(),
            elicitor: args
                .accept_defaults
                .then(|| Arc::new(AcceptDefaults) as Arc<dyn Elicitor>),
        };
        match RmcpClient::connect_http_with(config, &args.url, options).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_each_fills_required_arguments_from_defaults_examples_enums_then_types() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "default": "eu"},
                "level": {"type": "string", "enum": ["low", "high"]},
                "count": {"type": "integer", "examples": [7]},
                "flag": {"type": "boolean"},
                "note": {"type": "string"},
                "optional": {"type": "string"}
            },
            "required": ["region", "level", "count", "flag", "note"]
        });
        assert_eq!(
            example_arguments(&schema),
            json!({"region": "eu", "level": "low", "count": 7, "flag": true, "note": "example"})
        );
    }

    #[test]
    fn context_tool_calls_are_read_in_order_and_a_nameless_one_is_an_error() {
        let context = json!({"toolCalls": [
            {"name": "a", "arguments": {"x": 1}},
            {"name": "b"}
        ]});
        let calls = context_calls(&context).unwrap();
        assert_eq!(calls[0], ("a".to_owned(), json!({"x": 1})));
        assert_eq!(calls[1], ("b".to_owned(), json!({})));
        assert!(context_calls(&json!({"toolCalls": [{"arguments": {}}]})).is_err());
    }
}
