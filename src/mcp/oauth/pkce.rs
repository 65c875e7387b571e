//! PKCE (RFC 7636, S256) and the random `state`, and the authorization request URL.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

/// A code verifier and its S256 challenge.
pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pkce { .. }")
    }
}

impl Pkce {
    pub fn new() -> Self {
        let verifier = random_token();
        let challenge = s256(&verifier);
        Self {
            verifier,
            challenge,
        }
    }
}

impl Default for Pkce {
    fn default() -> Self {
        Self::new()
    }
}

/// `BASE64URL(SHA256(verifier))`.
pub fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// 32 random bytes (two v4 UUIDs from the OS generator), base64url: 43 characters.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    URL_SAFE_NO_PAD.encode(bytes)
}

/// What goes into the authorization request.
pub struct AuthorizationRequest<'a> {
    pub endpoint: &'a str,
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub scope: &'a str,
    pub state: &'a str,
    pub challenge: &'a str,
    pub resource: &'a str,
}

/// The URL the user opens in a browser.
pub fn authorization_url(request: &AuthorizationRequest<'_>) -> Result<String, url::ParseError> {
    let mut url = url::Url::parse(request.endpoint)?;
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", request.client_id)
            .append_pair("redirect_uri", request.redirect_uri)
            .append_pair("state", request.state)
            .append_pair("code_challenge", request.challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", request.resource);
        if !request.scope.is_empty() {
            query.append_pair("scope", request.scope);
        }
    }
    Ok(url.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s256_matches_the_rfc_7636_example() {
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn verifiers_are_long_enough_and_differ() {
        let (a, b) = (Pkce::new(), Pkce::new());
        assert!(a.verifier.len() >= 43, "{}", a.verifier.len());
        assert_ne!(a.verifier, b.verifier);
        assert_eq!(a.challenge, s256(&a.verifier));
    }

    #[test]
    fn authorization_url_carries_pkce_state_resource_and_scope() {
        let url = authorization_url(&AuthorizationRequest {
            endpoint: "https://as.example/authorize",
            client_id: "hermes",
            redirect_uri: "http://127.0.0.1:9/callback",
            scope: "mcp:read mcp:write",
            state: "st",
            challenge: "ch",
            resource: "https://mcp.example/mcp",
        })
        .unwrap();
        let parsed = url::Url::parse(&url).unwrap();
        let pairs: std::collections::HashMap<_, _> = parsed.query_pairs().into_owned().collect();
        assert_eq!(pairs["code_challenge_method"], "S256");
        assert_eq!(pairs["scope"], "mcp:read mcp:write");
        assert_eq!(pairs["resource"], "https://mcp.example/mcp");
        assert_eq!(pairs["redirect_uri"], "http://127.0.0.1:9/callback");
    }
}
