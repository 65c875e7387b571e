//! `[mcp]`: the MCP servers the MCP-bridge mounts (`[[mcp.servers]]`) and Hermes' own MCP
//! server (`[mcp.server]`: transports, tokens, roles and principals).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// Servers the MCP-bridge mounts (`[[mcp.servers]]`).
    #[serde(default)]
    pub servers: Vec<McpServerConfig>,
    /// Hermes' own MCP server (`[mcp.server]`).
    #[serde(default)]
    pub server: McpHostConfig,
}

/// One MCP server to mount: either a `command` (stdio child) or a `url` (Streamable HTTP).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Prefix of its tools: `<name>__<tool>`. Letters, digits, `_`, `-`.
    pub name: String,
    /// Program to start; `self` means this hermes executable. Empty when `url` is set.
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Streamable HTTP endpoint, e.g. `http://127.0.0.1:3001/mcp` (instead of `command`).
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers sent with every request (`url` servers).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// HTTP headers whose value is read from an environment variable: header → variable.
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
    /// Timeout of one call to this server, seconds.
    #[serde(default = "default_mcp_timeout")]
    pub timeout_secs: u64,
    /// Which MCP revision to speak: `auto` (the default: the 2026-07-28 revision through
    /// `server/discover` when the server offers it, else the 2025-11-25 handshake),
    /// `2026-07-28` or `2025-11-25` to pin one.
    #[serde(default)]
    pub protocol: McpRevision,
    /// OAuth 2.1 for a `url` server behind an authorization server (`[mcp.servers.oauth]`).
    /// Without it, a server that answers 401 still works after `hermes mcp login <name>`.
    #[serde(default)]
    pub oauth: Option<McpOAuthConfig>,
    /// Where OAuth tokens of this server are kept (`<data_dir>/mcp-oauth`); set by the engine.
    #[serde(skip)]
    pub oauth_store: Option<std::path::PathBuf>,
}

/// How Hermes obtains OAuth tokens for one MCP server. With `client_secret_env` it uses the
/// client credentials grant (headless) unless `grant = "login"`; without, the tokens of
/// `hermes mcp login <name>`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpOAuthConfig {
    /// The client id registered at the authorization server (for a client ID metadata
    /// document: its https URL). None = a client ID metadata document (`client_metadata_url`)
    /// where the authorization server accepts one, else dynamic client registration at login.
    #[serde(default)]
    pub client_id: Option<String>,
    /// Environment variable holding the client secret: the client credentials grant, or with
    /// `grant = "login"` a confidential client logging in with the authorization code flow.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// `login` (the authorization code flow of `hermes mcp login`) or `client_credentials`
    /// (headless). Default: `client_credentials` when `client_secret_env` is set, else `login`.
    #[serde(default)]
    pub grant: Option<OAuthGrant>,
    /// The https URL of a client ID metadata document published for Hermes, offered as its
    /// client id to authorization servers that announce support for them (no `client_id` set).
    #[serde(default)]
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for; none = those the server names in its challenge or metadata.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Loopback port `hermes mcp login` listens on for the redirect; 0 = any free port.
    #[serde(default)]
    pub redirect_port: u16,
}

/// The OAuth grant Hermes uses for one MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    /// A person authorises Hermes once (`hermes mcp login`); refresh tokens keep it going.
    Login,
    /// The client authenticates as itself, with no person and nothing on disk.
    ClientCredentials,
}

impl McpOAuthConfig {
    /// Whether tokens come from the client credentials grant (else from a login).
    pub fn headless(&self) -> bool {
        match self.grant {
            Some(grant) => grant == OAuthGrant::ClientCredentials,
            None => self.client_secret_env.is_some(),
        }
    }
}

/// The MCP revision a mounted server is spoken to in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum McpRevision {
    /// Discover, and fall back to the handshake for a server that does not know discovery.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// The stateless revision: `server/discover`, no `initialize`, no session.
    #[serde(rename = "2026-07-28")]
    Stateless2026,
    /// The `initialize` handshake of 2025-11-25.
    #[serde(rename = "2025-11-25")]
    Handshake2025,
}

impl Default for McpServerConfig {
    fn default() -> Self {
        Self {
            name: String::new(),
            command: String::new(),
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            headers_env: BTreeMap::new(),
            timeout_secs: default_mcp_timeout(),
            protocol: McpRevision::Auto,
            oauth: None,
            oauth_store: None,
        }
    }
}

/// Hermes' own MCP server (`[mcp.server]`): where it listens and who may do what.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpHostConfig {
    /// Streamable HTTP listen address while `hermes serve` runs (path `/mcp`); none = off.
    #[serde(default)]
    pub http_listen: Option<String>,
    /// Host names accepted in `Host` besides loopback ones (DNS-rebinding protection).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted in `Origin` besides loopback ones (e.g. `https://app.example:443`);
    /// others are refused.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Hermes tools also offered over MCP (forwarded to `hermes.tool.<name>`). A mounted
    /// server's tools are named `<server>__<tool>`; `*` matches any run of characters
    /// (`catalog__*`), so Hermes is a gateway for them.
    #[serde(default)]
    pub expose_tools: Vec<String>,
    /// Agents offered as MCP tools (one tool per agent, named as the agent): a call starts a
    /// turn for the caller's user, answered at once as a task to a client that negotiated
    /// the tasks extension.
    #[serde(default)]
    pub expose_agents: Vec<String>,
    /// Longest a call to an exposed agent waits for the answer when the client did not
    /// negotiate tasks, seconds; default 600. Then it answers that the agent is still working.
    #[serde(default)]
    pub agent_call_timeout_secs: Option<u64>,
    /// One mounted server ([[mcp.servers]] name) served through this server under its own
    /// names: its tools, resources, resource templates, prompts, completions, logging level
    /// and subscriptions, beside Hermes' memory, behind these tokens, roles and the audit.
    /// Each client session gets its own session with that server, so the server's
    /// notifications and its sampling and elicitation requests reach the client.
    #[serde(default)]
    pub passthrough: Option<String>,
    /// Bearer tokens and the principal each one stands for.
    #[serde(default)]
    pub tokens: Vec<McpTokenConfig>,
    /// What each role may do.
    #[serde(default)]
    pub roles: BTreeMap<String, McpRoleConfig>,
    /// The principal of HTTP requests without a token; none = such requests are refused.
    /// Only honoured when `http_listen` is a loopback address.
    #[serde(default)]
    pub anonymous: Option<McpPrincipalConfig>,
}

/// A bearer token (from an environment variable, or its sha256 in hex) and its principal.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpTokenConfig {
    pub user: String,
    #[serde(default)]
    pub roles: Vec<String>,
    /// Environment variable holding the token.
    #[serde(default)]
    pub token_env: Option<String>,
    /// Lower-case hex sha256 of the token (`printf %s TOKEN | sha256sum`).
    #[serde(default)]
    pub token_sha256: Option<String>,
}

/// A role: the MCP tools it may call (`*` = all) and the shared memory namespaces it may use
/// for any user.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpRoleConfig {
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub namespaces: Vec<String>,
}

/// A principal named in config.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpPrincipalConfig {
    pub user: String,
    #[serde(default)]
    pub roles: Vec<String>,
}

fn default_mcp_timeout() -> u64 {
    30
}

#[cfg(test)]
mod oauth_grant_tests {
    use super::*;

    #[test]
    fn a_secret_means_client_credentials_unless_the_grant_says_login() {
        let secret = McpOAuthConfig {
            client_id: Some("c".into()),
            client_secret_env: Some("S".into()),
            ..McpOAuthConfig::default()
        };
        assert!(secret.headless());
        let login = McpOAuthConfig {
            grant: Some(OAuthGrant::Login),
            ..secret.clone()
        };
        assert!(!login.headless());
        assert!(!McpOAuthConfig::default().headless());
        let parsed: McpOAuthConfig = toml::from_str("grant = \"client_credentials\"").unwrap();
        assert_eq!(parsed.grant, Some(OAuthGrant::ClientCredentials));
    }
}
