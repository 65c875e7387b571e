//! OAuth 2.1 for remote MCP servers, client side: discovery from the server's 401
//! ([`discovery`]: RFC 9728 protected-resource metadata → RFC 8414 / OIDC authorization server
//! metadata), the PKCE login of `hermes mcp login` ([`login`], [`pkce`]), dynamic client
//! registration ([`registration`], RFC 7591), the token endpoint's grants ([`grants`]), the
//! owner-only token files ([`token_store`]) and [`TokenSource`], which hands the MCP client a
//! valid access token: refreshed when expired or rejected, re-requested with a wider scope on
//! `insufficient_scope` (client credentials). Tokens never reach logs: every type holding one
//! redacts it in `Debug`, and no error message carries one.

pub mod discovery;
pub mod grants;
pub mod login;
pub mod pkce;
mod reauthorize;
pub mod registration;
mod source;
pub mod token_store;

pub use reauthorize::Reauthorize;
pub use source::{AuthState, TokenSource};

/// What went wrong getting or keeping an OAuth token for an MCP server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    #[error(
        "MCP server `{server}` requires an OAuth login: run `hermes mcp login {server}`, or for a \
         headless deployment configure client credentials in [mcp.servers.oauth] \
         (client_id, client_secret_env)"
    )]
    LoginNeeded { server: String },
    #[error(
        "MCP server `{server}` requires the wider scope `{scope}`: run \
         `hermes mcp login {server} --scope \"{scope}\"` to authorise it"
    )]
    StepUpNeeded { server: String, scope: String },
    #[error(
        "OAuth discovery for MCP server `{server}` failed: {reason}; check its url and that it \
         publishes protected-resource metadata (RFC 9728)"
    )]
    Discovery { server: String, reason: String },
    #[error(
        "the authorization server of MCP server `{server}` refused the {grant} grant: {reason}"
    )]
    Grant {
        server: String,
        grant: &'static str,
        reason: String,
    },
    #[error("dynamic client registration at `{server}`'s authorization server failed: {reason}; register a client there and set [mcp.servers.oauth] client_id")]
    Registration { server: String, reason: String },
    #[error("OAuth token file `{path}`: {reason}; check the data directory's permissions")]
    Store { path: String, reason: String },
    #[error("`hermes mcp login {server}` failed: {reason}")]
    Login { server: String, reason: String },
    #[error("[mcp.servers.oauth] of `{server}`: {reason}")]
    Config { server: String, reason: String },
}
