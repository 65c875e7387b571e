//! [`TokenSource`]: the access token of one MCP server while Hermes talks to it. It takes the
//! saved login tokens (or asks for client credentials), refreshes them before they expire or
//! when the server rejects them, and on `insufficient_scope` asks for the wider scope
//! (client credentials) or tells the user to log in again with it. Renewed login tokens are
//! saved back to the owner-only store.

use std::sync::Arc;

use chrono::Utc;

use super::discovery::discover;
use super::grants::{ClientAuth, TokenEndpoint, TokenResponse};
use super::token_store::{StoredTokens, TokenStore, BY_CLIENT_CREDENTIALS, BY_LOGIN};
use super::{OAuthError, Reauthorize};
use crate::config::{McpOAuthConfig, McpServerConfig};

/// A token expiring within this is renewed before use.
const EXPIRY_MARGIN_SECS: i64 = 30;

/// The OAuth state of a server, for `hermes mcp status`.
#[derive(Debug, Clone, PartialEq)]
pub enum AuthState {
    /// Headless: the client credentials grant with this client id.
    ClientCredentials { client_id: String },
    /// Tokens from `hermes mcp login` are saved.
    LoggedIn {
        scope: String,
        expires_at: Option<chrono::DateTime<Utc>>,
        refreshable: bool,
    },
    /// OAuth is configured but nobody logged in yet.
    NeedsLogin,
}

impl std::fmt::Display for AuthState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthState::ClientCredentials { client_id } => {
                write!(f, "oauth client credentials (client `{client_id}`)")
            }
            AuthState::LoggedIn {
                scope,
                expires_at,
                refreshable,
            } => {
                write!(f, "oauth logged in (scope `{scope}`")?;
                if let Some(at) = expires_at {
                    write!(
                        f,
                        ", access token until {}",
                        at.format("%Y-%m-%d %H:%M:%S UTC")
                    )?;
                }
                if *refreshable {
                    f.write_str(", refreshed automatically")?;
                }
                f.write_str(")")
            }
            AuthState::NeedsLogin => f.write_str("oauth needs `hermes mcp login`"),
        }
    }
}

impl AuthState {
    /// The state of `config`'s server; `None` when it does not use OAuth (as far as Hermes
    /// knows before asking it).
    pub fn of(config: &McpServerConfig) -> Result<Option<Self>, OAuthError> {
        if config.url.is_none() {
            return Ok(None);
        }
        if let Some(
            oauth @ McpOAuthConfig {
                client_id: Some(client_id),
                ..
            },
        ) = &config.oauth
        {
            if oauth.headless() {
                return Ok(Some(AuthState::ClientCredentials {
                    client_id: client_id.clone(),
                }));
            }
        }
        let saved = match &config.oauth_store {
            Some(dir) => TokenStore::new(dir.clone()).load(&config.name)?,
            None => None,
        };
        Ok(match (saved, &config.oauth) {
            (Some(tokens), _) => Some(AuthState::LoggedIn {
                scope: tokens.scope,
                expires_at: tokens.expires_at,
                refreshable: tokens.refresh_token.is_some(),
            }),
            (None, Some(_)) => Some(AuthState::NeedsLogin),
            (None, None) => None,
        })
    }
}

/// Access tokens for one MCP server.
#[derive(Debug)]
pub struct TokenSource {
    server: String,
    url: String,
    oauth: McpOAuthConfig,
    store: Option<TokenStore>,
    http: reqwest::Client,
    current: tokio::sync::Mutex<Option<StoredTokens>>,
    /// Who can log in again mid-session (a wider scope, a moved authorization server).
    reauthorize: Option<Reauthorize>,
}

impl TokenSource {
    /// A source for a `url` server with [mcp.servers.oauth] or saved login tokens.
    pub fn for_server(config: &McpServerConfig) -> Result<Option<Arc<Self>>, OAuthError> {
        Self::for_server_with(config, None)
    }

    /// [`TokenSource::for_server`], with someone who can log in again mid-session.
    pub fn for_server_with(
        config: &McpServerConfig,
        reauthorize: Option<Reauthorize>,
    ) -> Result<Option<Arc<Self>>, OAuthError> {
        let Some(url) = &config.url else {
            return Ok(None);
        };
        let store = config.oauth_store.clone().map(TokenStore::new);
        let saved = match &store {
            Some(store) => store.load(&config.name)?,
            None => None,
        };
        if config.oauth.is_none() && saved.is_none() {
            return Ok(None);
        }
        let oauth = config.oauth.clone().unwrap_or_default();
        let saved = saved.filter(|_| !oauth.headless());
        Ok(Some(Arc::new(Self {
            server: config.name.clone(),
            url: url.clone(),
            oauth,
            store,
            http: reqwest::Client::new(),
            current: tokio::sync::Mutex::new(saved),
            reauthorize,
        })))
    }

    /// A valid access token: the current one, or a renewed one.
    pub async fn bearer(&self) -> Result<String, OAuthError> {
        let mut current = self.current.lock().await;
        if let Some(tokens) = current.as_ref() {
            if !tokens.expired(margin()) {
                return Ok(tokens.access_token.clone());
            }
        }
        self.renew(&mut current, None).await
    }

    /// The server answered 401 to `rejected`: renew it (unless another request already did).
    pub async fn rejected(&self, rejected: &str) -> Result<String, OAuthError> {
        let mut current = self.current.lock().await;
        if let Some(tokens) = current.as_ref() {
            if tokens.access_token != rejected {
                return Ok(tokens.access_token.clone());
            }
        }
        if self.adopt_newer_login(&mut current).await {
            if let Some(tokens) = current.as_ref().filter(|t| !t.expired(margin())) {
                return Ok(tokens.access_token.clone());
            }
        }
        if self.authorization_server_moved(current.as_ref()).await {
            tracing::info!(server = %self.server, "the MCP server names another authorization server now; its login is void");
            *current = None;
        }
        tracing::info!(server = %self.server, "MCP server rejected the access token; renewing it");
        self.renew(&mut current, None).await
    }

    /// The server answered 403 `insufficient_scope` naming `needed`: with client credentials,
    /// ask for the wider scope; after a login, the user must authorise it.
    pub async fn step_up(&self, needed: Option<&str>) -> Result<String, OAuthError> {
        let mut current = self.current.lock().await;
        let needed = needed.unwrap_or_default();
        if self.adopt_newer_login(&mut current).await {
            if let Some(tokens) = current.as_ref().filter(|t| {
                let held: Vec<&str> = t.scope.split_whitespace().collect();
                needed.split_whitespace().all(|s| held.contains(&s))
            }) {
                return Ok(tokens.access_token.clone());
            }
        }
        let held = current
            .as_ref()
            .map(|t| t.scope.clone())
            .unwrap_or_else(|| self.oauth.scopes.join(" "));
        let wider = union(&held, needed);
        if !self.oauth.headless() {
            let Some(reauthorize) = &self.reauthorize else {
                return Err(OAuthError::StepUpNeeded {
                    server: self.server.clone(),
                    scope: wider,
                });
            };
            tracing::info!(server = %self.server, scope = %wider, "MCP server needs a wider scope; logging in again for it");
            let tokens = reauthorize.login(wider).await?;
            let token = tokens.access_token.clone();
            self.keep(&mut current, tokens).await?;
            return Ok(token);
        }
        tracing::info!(server = %self.server, scope = %wider, "MCP server needs a wider scope; asking for it");
        self.renew(&mut current, Some(wider)).await
    }

    /// Adopt the tokens a `hermes mcp login` saved since this source read them (a login while
    /// `hermes serve` runs). True when it did.
    async fn adopt_newer_login(&self, current: &mut Option<StoredTokens>) -> bool {
        let Some(store) = self.store.clone().filter(|_| !self.oauth.headless()) else {
            return false;
        };
        let server = self.server.clone();
        let saved = match tokio::task::spawn_blocking(move || store.load(&server)).await {
            Ok(Ok(Some(saved))) => saved,
            _ => return false,
        };
        if current
            .as_ref()
            .is_some_and(|held| held.access_token == saved.access_token)
        {
            return false;
        }
        tracing::info!(server = %self.server, "using the tokens of a newer `hermes mcp login`");
        *current = Some(saved);
        true
    }

    /// Refresh (when a refresh token is held and no wider scope is asked), else client
    /// credentials, else the user must log in.
    async fn renew(
        &self,
        current: &mut Option<StoredTokens>,
        scope: Option<String>,
    ) -> Result<String, OAuthError> {
        if scope.is_none() {
            if let Some(tokens) = current.as_ref().filter(|t| t.refresh_token.is_some()) {
                match self.refresh(tokens).await {
                    Ok(renewed) => {
                        let token = renewed.access_token.clone();
                        self.keep(current, renewed).await?;
                        return Ok(token);
                    }
                    Err(error) => {
                        tracing::warn!(server = %self.server, %error, "refreshing the MCP access token failed");
                    }
                }
            }
        }
        if let Some(client) = self.configured_client()? {
            let renewed = self
                .client_credentials(current.as_ref(), &client, scope)
                .await?;
            let token = renewed.access_token.clone();
            *current = Some(renewed);
            return Ok(token);
        }
        if let Some(reauthorize) = &self.reauthorize {
            let scope = scope.unwrap_or_else(|| self.oauth.scopes.join(" "));
            let tokens = reauthorize.login(scope).await?;
            let token = tokens.access_token.clone();
            self.keep(current, tokens).await?;
            return Ok(token);
        }
        Err(OAuthError::LoginNeeded {
            server: self.server.clone(),
        })
    }

    /// Whether the server's protected-resource metadata now names an authorization server
    /// other than the one `held` came from (SEP-2352): its tokens, refresh token and client
    /// registration are then not to be used there. A discovery that fails says no.
    async fn authorization_server_moved(&self, held: Option<&StoredTokens>) -> bool {
        let Some(held) = held.filter(|t| t.obtained_by == BY_LOGIN) else {
            return false;
        };
        match discover(&self.http, &self.server, &self.url).await {
            Ok(found) => found.metadata.token_endpoint != held.token_endpoint,
            Err(_) => false,
        }
    }

    async fn refresh(&self, tokens: &StoredTokens) -> Result<StoredTokens, OAuthError> {
        let refresh_token = tokens.refresh_token.clone().unwrap_or_default();
        let client = ClientAuth::new(tokens.client_id.clone(), tokens.client_secret.clone());
        let response = TokenEndpoint {
            http: &self.http,
            server: &self.server,
            url: &tokens.token_endpoint,
            client: &client,
            resource: &tokens.resource,
        }
        .refresh(&refresh_token)
        .await?;
        tracing::info!(server = %self.server, "MCP access token refreshed");
        let mut renewed = merge(tokens.clone(), response);
        if renewed.refresh_token.is_none() {
            renewed.refresh_token = tokens.refresh_token.clone();
        }
        Ok(renewed)
    }

    async fn client_credentials(
        &self,
        known: Option<&StoredTokens>,
        client: &ClientAuth,
        scope: Option<String>,
    ) -> Result<StoredTokens, OAuthError> {
        let (token_endpoint, resource, discovered_scope) = match known {
            Some(t) => (
                t.token_endpoint.clone(),
                t.resource.clone(),
                t.scope.clone(),
            ),
            None => {
                let found = discover(&self.http, &self.server, &self.url).await?;
                (found.metadata.token_endpoint, found.resource, found.scope)
            }
        };
        let scope = scope.unwrap_or_else(|| {
            if self.oauth.scopes.is_empty() {
                discovered_scope
            } else {
                self.oauth.scopes.join(" ")
            }
        });
        let response = TokenEndpoint {
            http: &self.http,
            server: &self.server,
            url: &token_endpoint,
            client,
            resource: &resource,
        }
        .client_credentials(&scope)
        .await?;
        tracing::info!(server = %self.server, %scope, "MCP access token obtained with client credentials");
        let base = StoredTokens {
            access_token: String::new(),
            refresh_token: None,
            expires_at: None,
            scope,
            token_endpoint,
            client_id: client.id.clone(),
            client_secret: None,
            resource,
            obtained_by: BY_CLIENT_CREDENTIALS.to_owned(),
        };
        Ok(merge(base, response))
    }

    /// Keep renewed tokens in memory, and login tokens on disk too.
    async fn keep(
        &self,
        current: &mut Option<StoredTokens>,
        tokens: StoredTokens,
    ) -> Result<(), OAuthError> {
        if let (Some(store), true) = (&self.store, tokens.obtained_by == BY_LOGIN) {
            let (store, name, saved) = (store.clone(), self.server.clone(), tokens.clone());
            tokio::task::spawn_blocking(move || store.save(&name, &saved))
                .await
                .map_err(|e| OAuthError::Store {
                    path: self.server.clone(),
                    reason: e.to_string(),
                })??;
        }
        *current = Some(tokens);
        Ok(())
    }

    /// The configured client of the client credentials grant, if configured.
    fn configured_client(&self) -> Result<Option<ClientAuth>, OAuthError> {
        if !self.oauth.headless() {
            return Ok(None);
        }
        let config_error = |reason: String| OAuthError::Config {
            server: self.server.clone(),
            reason,
        };
        let variable = self.oauth.client_secret_env.as_ref().ok_or_else(|| {
            config_error(
                "grant = \"client_credentials\" needs client_secret_env (and client_id)".to_owned(),
            )
        })?;
        let id = self.oauth.client_id.clone().ok_or_else(|| {
            config_error("client_secret_env is set but client_id is not; set both".to_owned())
        })?;
        let secret = secret_from_env(&self.server, variable)?;
        Ok(Some(ClientAuth::new(id, Some(secret))))
    }
}

/// The client secret held by the environment variable `variable`.
pub(super) fn secret_from_env(server: &str, variable: &str) -> Result<String, OAuthError> {
    std::env::var(variable).map_err(|_| OAuthError::Config {
        server: server.to_owned(),
        reason: format!(
            "the client secret comes from the environment variable `{variable}`, which is not \
             set; export it before starting hermes"
        ),
    })
}

fn margin() -> chrono::Duration {
    chrono::Duration::seconds(EXPIRY_MARGIN_SECS)
}

/// `base` with what the token endpoint answered.
fn merge(mut base: StoredTokens, response: TokenResponse) -> StoredTokens {
    base.access_token = response.access_token;
    base.expires_at = response
        .expires_in
        .map(|secs| Utc::now() + chrono::Duration::seconds(secs.min(i64::MAX as u64) as i64));
    if response.refresh_token.is_some() {
        base.refresh_token = response.refresh_token;
    }
    if let Some(scope) = response.scope {
        base.scope = scope;
    }
    base
}

/// The scopes of `held` and `needed`, without repeats, in order.
fn union(held: &str, needed: &str) -> String {
    let mut scopes: Vec<&str> = Vec::new();
    for scope in held.split_whitespace().chain(needed.split_whitespace()) {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    scopes.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_up_scope_keeps_what_is_held_and_adds_what_is_needed() {
        assert_eq!(
            union("mcp:read", "mcp:read mcp:admin"),
            "mcp:read mcp:admin"
        );
        assert_eq!(union("", "a"), "a");
    }

    #[test]
    fn a_server_without_oauth_or_saved_tokens_has_no_source_and_no_state() {
        let config = McpServerConfig {
            name: "plain".into(),
            url: Some("http://127.0.0.1:1/mcp".into()),
            ..Default::default()
        };
        assert!(TokenSource::for_server(&config).unwrap().is_none());
        assert_eq!(AuthState::of(&config).unwrap(), None);
    }

    fn saved(access: &str, scope: &str) -> StoredTokens {
        StoredTokens {
            access_token: access.into(),
            refresh_token: None,
            expires_at: Some(Utc::now() + chrono::Duration::seconds(3600)),
            scope: scope.into(),
            token_endpoint: "http://127.0.0.1:1/token".into(),
            client_id: "c".into(),
            client_secret: None,
            resource: "http://127.0.0.1:1/mcp".into(),
            obtained_by: BY_LOGIN.into(),
        }
    }

    #[test]
    fn a_login_while_running_is_picked_up_on_rejection_and_on_step_up() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().to_path_buf());
        store.save("remote", &saved("narrow", "mcp:read")).unwrap();
        let config = McpServerConfig {
            name: "remote".into(),
            url: Some("http://127.0.0.1:1/mcp".into()),
            oauth_store: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let source = TokenSource::for_server(&config).unwrap().unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        assert_eq!(runtime.block_on(source.bearer()).unwrap(), "narrow");
        let error = runtime
            .block_on(source.step_up(Some("mcp:read mcp:admin")))
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("hermes mcp login remote --scope \"mcp:read mcp:admin\""),
            "{error}"
        );
        // The user logs in again with the wider scope while this source runs.
        store
            .save("remote", &saved("wide", "mcp:read mcp:admin"))
            .unwrap();
        assert_eq!(
            runtime
                .block_on(source.step_up(Some("mcp:read mcp:admin")))
                .unwrap(),
            "wide"
        );
        store.save("remote", &saved("newest", "mcp:read")).unwrap();
        assert_eq!(runtime.block_on(source.rejected("wide")).unwrap(), "newest");
    }

    #[test]
    fn configured_oauth_without_a_login_needs_one() {
        let dir = tempfile::tempdir().unwrap();
        let config = McpServerConfig {
            name: "remote".into(),
            url: Some("http://127.0.0.1:1/mcp".into()),
            oauth: Some(McpOAuthConfig::default()),
            oauth_store: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        assert_eq!(AuthState::of(&config).unwrap(), Some(AuthState::NeedsLogin));
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let source = TokenSource::for_server(&config).unwrap().unwrap();
        let error = runtime.block_on(source.bearer()).unwrap_err();
        assert!(
            error.to_string().contains("hermes mcp login remote"),
            "{error}"
        );
    }
}
