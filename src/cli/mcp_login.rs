//! `hermes mcp login <server>` / `hermes mcp logout <server>`: authorise Hermes at a remote
//! MCP server's OAuth authorization server once (PKCE, loopback redirect), keep the tokens
//! owner-only in the data directory, and the `auth` line of `hermes mcp status`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use hermes::config::{Config, McpServerConfig};
use hermes::mcp::oauth::login::{login, LoginOptions};
use hermes::mcp::oauth::token_store::{store_dir, TokenStore};
use hermes::mcp::oauth::AuthState;

use super::runtime::io_runtime;

#[derive(Args)]
#[command(after_long_help = LOGIN_HELP)]
pub struct LoginArgs {
    /// The `name` of the `[[mcp.servers]]` entry (a `url` server).
    pub server: String,
    /// A scope to ask for besides `[mcp.servers.oauth] scopes` (repeatable; e.g. the wider
    /// scope a server asked for in an `insufficient_scope` error).
    #[arg(long = "scope", value_name = "SCOPE")]
    pub scopes: Vec<String>,
    /// Loopback port for the browser's redirect (default `[mcp.servers.oauth] redirect_port`,
    /// else any free port).
    #[arg(long)]
    pub port: Option<u16>,
    /// Data directory holding the tokens (default `[engine] data_dir`).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

const LOGIN_HELP: &str = "\
How it works:
  1. Hermes asks the server without a token; its 401 names its protected-resource metadata
     (RFC 9728), which names the authorization server (RFC 8414 / OpenID discovery).
  2. Without [mcp.servers.oauth] client_id, Hermes registers itself (dynamic client
     registration, RFC 7591) when the authorization server offers it. A client_id that is an
     https URL works as a client ID metadata document.
  3. Hermes prints a URL and listens on 127.0.0.1 for the redirect: open the URL in a browser
     on this machine, sign in and approve. The code is exchanged with PKCE (S256).
  4. The tokens are saved in <data_dir>/mcp-oauth/<server>.json (owner-only, 0600). Hermes
     refreshes the access token by itself; log in again only when the refresh token expires
     or the server asks for a wider scope (the error says which: pass it with --scope).

Headless deployments use client credentials instead, with no login:

  [[mcp.servers]]
  name = \"remote\"
  url = \"https://mcp.example.com/mcp\"
  [mcp.servers.oauth]
  client_id = \"hermes-prod\"
  client_secret_env = \"REMOTE_MCP_CLIENT_SECRET\"
  scopes = [\"mcp:read\"]

Example:
  hermes mcp login remote
  hermes mcp status          # remote ... auth: oauth logged in (scope `mcp:read`, ...)";

#[derive(Args)]
pub struct LogoutArgs {
    /// The `name` of the `[[mcp.servers]]` entry.
    pub server: String,
    /// Data directory holding the tokens (default `[engine] data_dir`).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

fn server_config(
    config: &Config,
    server: &str,
    data_dir: Option<&PathBuf>,
) -> anyhow::Result<McpServerConfig> {
    let mut found =
        config
            .mcp
            .servers
            .iter()
            .find(|s| s.name == server)
            .cloned()
            .with_context(|| {
                let names: Vec<_> = config.mcp.servers.iter().map(|s| s.name.as_str()).collect();
                format!(
                "no [[mcp.servers]] entry is named `{server}` (configured: {}); add one with its \
                 url",
                if names.is_empty() { "none".to_owned() } else { names.join(", ") }
            )
            })?;
    if found.url.is_none() {
        anyhow::bail!(
            "MCP server `{server}` is a stdio server (command); only `url` servers use OAuth"
        );
    }
    let data_dir = data_dir.unwrap_or(&config.engine.data_dir);
    found.oauth_store = Some(store_dir(data_dir));
    Ok(found)
}

pub fn run_login(config: &Config, args: LoginArgs) -> anyhow::Result<()> {
    let server = server_config(config, &args.server, args.data_dir.as_ref())?;
    let store = TokenStore::new(server.oauth_store.clone().unwrap_or_default());
    let options = LoginOptions {
        extra_scopes: args.scopes,
        port: args.port,
        client_secret: None,
    };
    let tokens = io_runtime()?.block_on(login(&server, &store, &options, |url| {
        println!(
            "Open this URL in a browser on this machine to authorise Hermes for `{}`:\n\n{url}\n\n\
             Waiting for the browser to come back…",
            args.server
        );
        let _ = std::io::stdout().flush();
    }))?;
    println!(
        "Logged in to `{}` (scope `{}`); tokens saved owner-only in {}",
        args.server,
        tokens.scope,
        store.path(&args.server).display()
    );
    Ok(())
}

pub fn run_logout(config: &Config, args: LogoutArgs) -> anyhow::Result<()> {
    let server = server_config(config, &args.server, args.data_dir.as_ref())?;
    let store = TokenStore::new(server.oauth_store.clone().unwrap_or_default());
    store.remove(&args.server)?;
    println!("Forgot the OAuth tokens of `{}`", args.server);
    Ok(())
}

/// `auth: …` per OAuth server of `config`, for `hermes mcp status`.
pub fn auth_states(config: &Config) -> Vec<(String, String)> {
    let dir = store_dir(&config.engine.data_dir);
    config
        .mcp
        .servers
        .iter()
        .filter_map(|server| {
            let mut server = server.clone();
            server.oauth_store = Some(dir.clone());
            match AuthState::of(&server) {
                Ok(Some(state)) => Some((server.name, state.to_string())),
                Ok(None) => None,
                Err(error) => Some((server.name, error.to_string())),
            }
        })
        .collect()
}
