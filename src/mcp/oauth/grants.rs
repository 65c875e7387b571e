//! The token endpoint: the authorization code (with its PKCE verifier), refresh token and
//! client credentials grants, each with the RFC 8707 `resource`. A client with a secret
//! authenticates with HTTP Basic (`client_secret_basic`), or in the form
//! (`client_secret_post`) where the server takes only that; a public client sends `client_id`.

use serde::Deserialize;

use super::OAuthError;

/// The client as the token endpoint knows it.
#[derive(Clone)]
pub struct ClientAuth {
    pub id: String,
    pub secret: Option<String>,
    /// Send the secret in the form (`client_secret_post`) instead of HTTP Basic: for an
    /// authorization server that accepts only that.
    pub secret_in_body: bool,
}

impl ClientAuth {
    /// A public client, or one with a secret sent with HTTP Basic.
    pub fn new(id: String, secret: Option<String>) -> Self {
        Self {
            id,
            secret,
            secret_in_body: false,
        }
    }

    /// This client, sending its secret the way an authorization server that supports only
    /// `methods` wants it.
    pub fn for_methods(mut self, methods: &[String]) -> Self {
        let has = |m: &str| methods.iter().any(|x| x == m);
        self.secret_in_body = has("client_secret_post") && !has("client_secret_basic");
        self
    }
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAuth")
            .field("id", &self.id)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// A successful token response (RFC 6749 §5.1).
#[derive(Clone, Deserialize)]
pub struct TokenResponse {
    pub access_token: String,
    #[serde(default)]
    pub expires_in: Option<u64>,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
}

/// The endpoint, the client and the server's name (for messages).
pub struct TokenEndpoint<'a> {
    pub http: &'a reqwest::Client,
    pub server: &'a str,
    pub url: &'a str,
    pub client: &'a ClientAuth,
    pub resource: &'a str,
}

impl TokenEndpoint<'_> {
    pub async fn authorization_code(
        &self,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<TokenResponse, OAuthError> {
        self.request(
            "authorization_code",
            &[
                ("code", code),
                ("code_verifier", verifier),
                ("redirect_uri", redirect_uri),
            ],
        )
        .await
    }

    pub async fn refresh(&self, refresh_token: &str) -> Result<TokenResponse, OAuthError> {
        self.request("refresh_token", &[("refresh_token", refresh_token)])
            .await
    }

    pub async fn client_credentials(&self, scope: &str) -> Result<TokenResponse, OAuthError> {
        let params: &[(&str, &str)] = if scope.is_empty() {
            &[]
        } else {
            &[("scope", scope)]
        };
        self.request("client_credentials", params).await
    }

    async fn request(
        &self,
        grant: &'static str,
        params: &[(&str, &str)],
    ) -> Result<TokenResponse, OAuthError> {
        let refused = |reason: String| OAuthError::Grant {
            server: self.server.to_owned(),
            grant,
            reason,
        };
        let mut request = self
            .http
            .post(self.url)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json");
        let body = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", grant);
            for (name, value) in params {
                form.append_pair(name, value);
            }
            form.append_pair("resource", self.resource);
            match &self.client.secret {
                Some(secret) if self.client.secret_in_body => {
                    form.append_pair("client_id", &self.client.id);
                    form.append_pair("client_secret", secret);
                }
                Some(secret) => request = request.basic_auth(&self.client.id, Some(secret)),
                None => {
                    form.append_pair("client_id", &self.client.id);
                }
            }
            form.finish()
        };
        let response = request
            .body(body)
            .send()
            .await
            .map_err(|e| refused(format!("`{}` could not be reached: {e}", self.url)))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| refused(format!("reading the answer of `{}`: {e}", self.url)))?;
        if !status.is_success() {
            return Err(refused(describe_error(status, &body)));
        }
        serde_json::from_slice(&body).map_err(|e| {
            refused(format!(
                "`{}` answered a token response Hermes cannot read: {e}",
                self.url
            ))
        })
    }
}

/// `error` and `error_description` of an error response (never the body itself, which a
/// broken server might fill with anything).
fn describe_error(status: reqwest::StatusCode, body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct ErrorBody {
        error: String,
        #[serde(default)]
        error_description: Option<String>,
    }
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => match e.error_description {
            Some(description) => format!("HTTP {status}, `{}`: {description}", e.error),
            None => format!("HTTP {status}, `{}`", e.error),
        },
        Err(_) => format!("HTTP {status}"),
    }
}
