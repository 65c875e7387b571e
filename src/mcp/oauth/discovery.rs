//! Finding a protected MCP server's authorization server: the `WWW-Authenticate` challenge of
//! its 401 (`resource_metadata`, `scope`, `error`), its protected-resource metadata (RFC 9728;
//! from the challenge, else the well-known URIs), and the authorization server's metadata
//! (RFC 8414, else OpenID Connect discovery).

use serde::{Deserialize, Serialize};

use super::OAuthError;

/// The parameters of a `Bearer` challenge.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Challenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
}

/// Parse `Bearer realm="x", error="insufficient_scope", scope="a b", resource_metadata="…"`.
pub fn parse_challenge(header: &str) -> Challenge {
    let mut challenge = Challenge::default();
    let rest = header.trim();
    let rest = match rest.split_once(char::is_whitespace) {
        Some((scheme, params)) if scheme.eq_ignore_ascii_case("bearer") => params,
        _ => return challenge,
    };
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek().copied() {
                if c == ',' || c.is_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        match key.trim().to_ascii_lowercase().as_str() {
            "resource_metadata" => challenge.resource_metadata = Some(value),
            "scope" => challenge.scope = Some(value),
            "error" => challenge.error = Some(value),
            _ => {}
        }
    }
    challenge
}

/// RFC 9728 protected-resource metadata (the fields Hermes uses).
#[derive(Debug, Clone, Deserialize)]
pub struct ResourceMetadata {
    pub resource: String,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    #[serde(default)]
    pub scopes_supported: Vec<String>,
}

/// RFC 8414 authorization server metadata (the fields Hermes uses).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuthServerMetadata {
    pub issuer: String,
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub code_challenge_methods_supported: Vec<String>,
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// The token endpoint's client authentication methods (`client_secret_basic`, …).
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Vec<String>,
    /// RFC 9207: every authorization response carries `iss`.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
}

/// What discovery found for one MCP server.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The canonical resource (RFC 8707 `resource` parameter).
    pub resource: String,
    pub metadata: AuthServerMetadata,
    /// The scope the server asked for in its challenge, else the ones it supports.
    pub scope: String,
}

/// Probe `mcp_url` without a token and follow its challenge to the authorization server.
pub async fn discover(
    http: &reqwest::Client,
    server: &str,
    mcp_url: &str,
) -> Result<Discovered, OAuthError> {
    let challenge = probe(http, mcp_url).await;
    discover_with(http, server, mcp_url, challenge.as_ref()).await
}

/// Discovery from a challenge already received (or the well-known URIs without one).
pub async fn discover_with(
    http: &reqwest::Client,
    server: &str,
    mcp_url: &str,
    challenge: Option<&Challenge>,
) -> Result<Discovered, OAuthError> {
    let failed = |reason: String| OAuthError::Discovery {
        server: server.to_owned(),
        reason,
    };
    let mut candidates = Vec::new();
    if let Some(url) = challenge.and_then(|c| c.resource_metadata.clone()) {
        candidates.push(url);
    }
    candidates.extend(well_known(mcp_url, "oauth-protected-resource").map_err(&failed)?);
    let resource: ResourceMetadata = first_json(http, &candidates).await.map_err(&failed)?;
    if !covers(&resource.resource, mcp_url) {
        return Err(failed(format!(
            "its protected-resource metadata is for `{}`, not `{mcp_url}` (RFC 9728 §3.3); \
             Hermes will not send tokens for one resource to another",
            resource.resource
        )));
    }
    let issuer = resource.authorization_servers.first().ok_or_else(|| {
        failed("its protected-resource metadata names no authorization_servers".to_owned())
    })?;
    // An issuer with a path has its metadata under that path only (RFC 8414 §3.1): the root's
    // would be another issuer's.
    let mut as_candidates =
        issuer_well_known(issuer, "oauth-authorization-server").map_err(&failed)?;
    as_candidates.extend(issuer_well_known(issuer, "openid-configuration").map_err(&failed)?);
    as_candidates.push(format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    ));
    let metadata: AuthServerMetadata = first_json(http, &as_candidates).await.map_err(&failed)?;
    if metadata.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
        return Err(failed(format!(
            "the authorization server metadata found for `{issuer}` names the issuer `{}` \
             (RFC 8414 §3.3 requires them to be the same)",
            metadata.issuer
        )));
    }
    let scope = challenge
        .and_then(|c| c.scope.clone())
        .unwrap_or_else(|| resource.scopes_supported.join(" "));
    Ok(Discovered {
        resource: resource.resource,
        metadata,
        scope,
    })
}

/// Whether the resource identifier `resource` covers the endpoint `mcp_url`: the same origin,
/// and a path that is the endpoint's or a parent of it.
fn covers(resource: &str, mcp_url: &str) -> bool {
    let (Ok(resource), Ok(endpoint)) = (url::Url::parse(resource), url::Url::parse(mcp_url)) else {
        return false;
    };
    if resource.origin() != endpoint.origin() {
        return false;
    }
    let parent = resource.path().trim_end_matches('/');
    let path = endpoint.path().trim_end_matches('/');
    path == parent || path.starts_with(&format!("{parent}/"))
}

/// An unauthenticated `ping` to the MCP endpoint; the challenge of its 401, if any.
async fn probe(http: &reqwest::Client, mcp_url: &str) -> Option<Challenge> {
    let response = http
        .post(mcp_url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":"hermes-oauth-probe","method":"ping"}"#)
        .send()
        .await
        .ok()?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return None;
    }
    let header = response.headers().get("www-authenticate")?.to_str().ok()?;
    Some(parse_challenge(header))
}

/// The well-known URIs of `url` for `suffix`: path-inserted first (RFC 8414 §3 / RFC 9728
/// §3.1), then at the root.
fn well_known(url: &str, suffix: &str) -> Result<Vec<String>, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let origin = parsed.origin().ascii_serialization();
    let path = parsed.path().trim_end_matches('/');
    let mut out = Vec::new();
    if !path.is_empty() {
        out.push(format!("{origin}/.well-known/{suffix}{path}"));
    }
    out.push(format!("{origin}/.well-known/{suffix}"));
    Ok(out)
}

/// [`well_known`] for an authorization server's issuer: path-inserted only when it has a path.
fn issuer_well_known(issuer: &str, suffix: &str) -> Result<Vec<String>, String> {
    let mut out = well_known(issuer, suffix)?;
    if out.len() > 1 {
        out.truncate(1);
    }
    Ok(out)
}

/// The first of `urls` that answers 200 with the expected JSON.
async fn first_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    urls: &[String],
) -> Result<T, String> {
    let mut tried = Vec::new();
    for url in urls {
        match http
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
        {
            Ok(response) if response.status().is_success() => match response.json::<T>().await {
                Ok(value) => return Ok(value),
                Err(e) => tried.push(format!("{url}: {e}")),
            },
            Ok(response) => tried.push(format!("{url}: HTTP {}", response.status())),
            Err(e) => tried.push(format!("{url}: {e}")),
        }
    }
    Err(format!("no metadata found (tried {})", tried.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_parameters_are_read_quoted_or_not() {
        let c = parse_challenge(
            r#"Bearer error="insufficient_scope", scope="mcp:read mcp:admin", resource_metadata="http://x/.well-known/oauth-protected-resource/mcp""#,
        );
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scope.as_deref(), Some("mcp:read mcp:admin"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://x/.well-known/oauth-protected-resource/mcp")
        );
        let bare = parse_challenge("Bearer realm=mcp,error=invalid_token");
        assert_eq!(bare.error.as_deref(), Some("invalid_token"));
        assert_eq!(parse_challenge("Basic realm=x"), Challenge::default());
    }

    #[test]
    fn resource_metadata_must_cover_the_endpoint() {
        assert!(covers("https://mcp.example/mcp", "https://mcp.example/mcp"));
        assert!(covers("https://mcp.example/", "https://mcp.example/mcp"));
        assert!(!covers(
            "https://mcp.example/mcp",
            "https://mcp.example/mcpx"
        ));
        assert!(!covers(
            "https://evil.example/mcp",
            "https://mcp.example/mcp"
        ));
        assert!(!covers("http://mcp.example/mcp", "https://mcp.example/mcp"));
    }

    #[test]
    fn well_known_uris_insert_the_path_then_fall_back_to_the_root() {
        assert_eq!(
            well_known("https://mcp.example/v1/mcp", "oauth-protected-resource").unwrap(),
            vec![
                "https://mcp.example/.well-known/oauth-protected-resource/v1/mcp".to_owned(),
                "https://mcp.example/.well-known/oauth-protected-resource".to_owned(),
            ]
        );
        assert_eq!(
            well_known("https://as.example", "oauth-authorization-server").unwrap(),
            vec!["https://as.example/.well-known/oauth-authorization-server".to_owned()]
        );
    }

    #[test]
    fn an_issuer_with_a_path_is_looked_up_under_its_path_only() {
        assert_eq!(
            issuer_well_known("https://as.example/tenant1", "oauth-authorization-server").unwrap(),
            vec!["https://as.example/.well-known/oauth-authorization-server/tenant1".to_owned()]
        );
        assert_eq!(
            issuer_well_known("https://as.example", "openid-configuration").unwrap(),
            vec!["https://as.example/.well-known/openid-configuration".to_owned()]
        );
    }
}
