//! Dynamic client registration (RFC 7591): when no client_id is configured and the
//! authorization server offers a `registration_endpoint`, `hermes mcp login` registers a
//! public client for its loopback redirect.

use serde::Deserialize;
use serde_json::json;

use super::grants::ClientAuth;
use super::OAuthError;

#[derive(Deserialize)]
struct Registered {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
}

/// Register Hermes for `redirect_uri` at `endpoint`.
pub async fn register(
    http: &reqwest::Client,
    server: &str,
    endpoint: &str,
    redirect_uri: &str,
    scope: &str,
) -> Result<ClientAuth, OAuthError> {
    let failed = |reason: String| OAuthError::Registration {
        server: server.to_owned(),
        reason,
    };
    let mut body = json!({
        "client_name": "Hermes",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        // A loopback redirect makes Hermes a native application (SEP-837, OIDC registration).
        "application_type": "native",
    });
    if !scope.is_empty() {
        body["scope"] = json!(scope);
    }
    let response = http
        .post(endpoint)
        .json(&body)
        .send()
        .await
        .map_err(|e| failed(format!("`{endpoint}` could not be reached: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        return Err(failed(format!("`{endpoint}` answered HTTP {status}")));
    }
    let registered: Registered = response.json().await.map_err(|e| {
        failed(format!(
            "`{endpoint}` answered something other than a client: {e}"
        ))
    })?;
    Ok(ClientAuth::new(
        registered.client_id,
        registered.client_secret,
    ))
}
