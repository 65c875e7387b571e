//! Connecting to a Streamable HTTP MCP server (`[[mcp.servers]] url = …`): headers from the
//! config (values or environment variables, so secrets stay out of files), OAuth tokens when
//! the server uses OAuth ([`super::oauth_http`]), the handshake under the server's timeout
//! (in 2025-11-25, until the server has answered the standalone stream too), and a
//! [`Link::Http`] that reports the session's failure.

use std::collections::HashMap;
use std::time::Duration;

use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ClientServiceExt;

use super::handler::{lifecycle, Notifier};
use super::link::{HttpLink, Link};
use super::oauth_http::OAuthHttp;
use super::{ConnectOptions, RmcpClient};
use crate::config::McpServerConfig;
use crate::mcp::oauth::TokenSource;
use crate::mcp::McpError;

/// How long a 2025-11-25 connection waits for the server to answer its standalone stream
/// before the first request (see [`super::oauth_http::StandaloneStream`]).
const STANDALONE_STREAM_WAIT: Duration = Duration::from_secs(5);

impl RmcpClient {
    /// Open `url` with Streamable HTTP and complete the handshake within `config.timeout_secs`.
    pub async fn connect_http(config: &McpServerConfig, url: &str) -> Result<Self, McpError> {
        Self::connect_http_with(config, url, ConnectOptions::default()).await
    }

    /// [`RmcpClient::connect_http`], with someone acting for the user: logging in again
    /// mid-session (a wider scope on `insufficient_scope`, a server that moved to another
    /// authorization server) and answering the server's questions.
    pub async fn connect_http_with(
        config: &McpServerConfig,
        url: &str,
        options: ConnectOptions,
    ) -> Result<Self, McpError> {
        let ConnectOptions {
            reauthorize,
            elicitor,
        } = options;
        let headers = headers(config)?;
        let mut transport_config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
            .custom_headers(headers)
            .reinit_on_expired_session(true);
        if let Some(token) = bearer(config)? {
            transport_config = transport_config.auth_header(token);
        }
        let unauthorised = |error: crate::mcp::oauth::OAuthError| McpError::Handshake {
            server: config.name.clone(),
            reason: error.to_string(),
        };
        let reading = config.clone();
        let tokens = tokio::task::spawn_blocking(move || {
            TokenSource::for_server_with(&reading, reauthorize)
        })
        .await
        .map_err(|e| McpError::Handshake {
            server: config.name.clone(),
            reason: format!("reading its OAuth tokens failed: {e}"),
        })?
        .map_err(unauthorised)?;
        if let Some(tokens) = &tokens {
            // Fail with the fix (log in, set the secret) before the handshake hides it.
            tokens.bearer().await.map_err(unauthorised)?;
        }
        let http = OAuthHttp::new(&config.name, tokens);
        let standalone = http.standalone_stream();
        let transport = StreamableHttpClientTransport::with_client(http, transport_config);
        let timeout = Duration::from_secs(config.timeout_secs.max(1));
        let (notifier, changed) = Notifier::new(elicitor);
        let handshake_failed = |reason: String| McpError::Handshake {
            server: config.name.clone(),
            reason: format!(
                "{reason}; check that `{url}` is a Streamable HTTP MCP endpoint (often ending in \
                 `/mcp`) and that its headers in [[mcp.servers]] authorise us"
            ),
        };
        let session = match tokio::time::timeout(
            timeout,
            notifier.serve_with_lifecycle(transport, lifecycle(config.protocol)),
        )
        .await
        {
            Ok(Ok(session)) => session,
            Ok(Err(error)) => return Err(handshake_failed(format!("`{url}`: {error}"))),
            Err(_) => {
                return Err(handshake_failed(format!(
                    "`{url}` did not answer `initialize` within {timeout:?}"
                )))
            }
        };
        let handshake_era = session
            .peer_info()
            .is_some_and(|info| info.protocol_version.has_initialize());
        if handshake_era
            && !standalone
                .answered_within(STANDALONE_STREAM_WAIT.min(timeout))
                .await
        {
            tracing::debug!(server = %config.name, %url,
                "the server has not answered the standalone stream yet; going on without it");
        }
        tracing::info!(server = %config.name, %url, "MCP HTTP server connected");
        Ok(Self::ready(
            config,
            url.to_owned(),
            session,
            Link::Http(HttpLink::new(url)),
            changed,
        ))
    }
}

/// `Authorization` from the config, without the `Bearer ` prefix (rmcp adds it).
fn bearer(config: &McpServerConfig) -> Result<Option<String>, McpError> {
    let all = resolved_headers(config)?;
    Ok(all
        .into_iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        .map(|(_, value)| {
            value
                .strip_prefix("Bearer ")
                .map(str::to_owned)
                .unwrap_or(value)
        }))
}

/// Every configured header except `Authorization`, as HTTP header values.
fn headers(
    config: &McpServerConfig,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, McpError> {
    let mut out = HashMap::new();
    for (name, value) in resolved_headers(config)? {
        if name.eq_ignore_ascii_case("authorization") {
            continue;
        }
        let invalid = |what: &str| McpError::Spawn {
            server: config.name.clone(),
            reason: format!("header `{name}` has an invalid {what}; fix [[mcp.servers]] headers"),
        };
        let header_name =
            http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid("name"))?;
        let header_value = http::HeaderValue::from_str(&value).map_err(|_| invalid("value"))?;
        out.insert(header_name, header_value);
    }
    Ok(out)
}

/// `headers` plus `headers_env` (header name → environment variable holding its value).
fn resolved_headers(config: &McpServerConfig) -> Result<Vec<(String, String)>, McpError> {
    let mut all: Vec<(String, String)> = config
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    for (name, variable) in &config.headers_env {
        let value = std::env::var(variable).map_err(|_| McpError::Spawn {
            server: config.name.clone(),
            reason: format!(
                "header `{name}` comes from the environment variable `{variable}`, which is not \
                 set; export it before starting hermes"
            ),
        })?;
        all.push((name.clone(), value));
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> McpServerConfig {
        McpServerConfig {
            name: "remote".into(),
            url: Some("http://127.0.0.1:1/mcp".into()),
            ..Default::default()
        }
    }

    #[test]
    fn authorization_goes_to_the_bearer_and_other_headers_stay_headers() {
        let mut config = config();
        config
            .headers
            .insert("Authorization".into(), "Bearer s3cret".into());
        config.headers.insert("X-Tenant".into(), "acme".into());
        assert_eq!(bearer(&config).unwrap().as_deref(), Some("s3cret"));
        let headers = headers(&config).unwrap();
        assert_eq!(headers.len(), 1);
        assert_eq!(headers[&http::HeaderName::from_static("x-tenant")], "acme");
    }

    #[test]
    fn header_from_a_missing_environment_variable_is_a_clear_error() {
        let mut config = config();
        config.headers_env.insert(
            "Authorization".into(),
            "HERMES_TEST_SURELY_UNSET_VARIABLE".into(),
        );
        let error = bearer(&config).unwrap_err().to_string();
        assert!(
            error.contains("HERMES_TEST_SURELY_UNSET_VARIABLE") && error.contains("not set"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn unreachable_url_is_a_handshake_error_naming_it() {
        let mut config = config();
        config.timeout_secs = 2;
        let error = RmcpClient::connect_http(&config, "http://127.0.0.1:1/mcp")
            .await
            .unwrap_err();
        assert!(
            matches!(&error, McpError::Handshake { reason, .. } if reason.contains("127.0.0.1:1/mcp")),
            "{error:?}"
        );
    }
}
