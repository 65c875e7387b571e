//! `hermes mcp login <server>`: the authorization code flow with PKCE. Discover the
//! authorization server, find a client id (configured, else dynamic registration), listen on
//! a loopback port, show the authorization URL, take the redirect's code (checking `state`),
//! exchange it and save the tokens owner-only.

use std::time::Duration;

use chrono::Utc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::discovery::discover;
use super::grants::{ClientAuth, TokenEndpoint};
use super::pkce::{authorization_url, random_token, AuthorizationRequest, Pkce};
use super::registration::register;
use super::source::secret_from_env;
use super::token_store::{StoredTokens, TokenStore, BY_LOGIN};
use super::OAuthError;
use crate::config::McpServerConfig;

/// How long the login waits for the browser to come back.
pub const LOGIN_WAIT: Duration = Duration::from_secs(300);

/// Options of one login.
#[derive(Clone, Default)]
pub struct LoginOptions {
    /// Scopes asked for besides the configured ones.
    pub extra_scopes: Vec<String>,
    /// Loopback port for the redirect (overrides the config; 0 = any).
    pub port: Option<u16>,
    /// The secret of the configured (pre-registered, confidential) client when it does not
    /// come from `client_secret_env`.
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for LoginOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginOptions")
            .field("extra_scopes", &self.extra_scopes)
            .field("port", &self.port)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Run the whole login for `config`'s server; `show_url` gets the authorization URL.
pub async fn login(
    config: &McpServerConfig,
    store: &TokenStore,
    options: &LoginOptions,
    show_url: impl FnOnce(&str),
) -> Result<StoredTokens, OAuthError> {
    let server = config.name.as_str();
    let failed = |reason: String| OAuthError::Login {
        server: server.to_owned(),
        reason,
    };
    let url = config
        .url
        .as_deref()
        .ok_or_else(|| failed("it is a stdio server; only `url` servers use OAuth".to_owned()))?;
    let oauth = config.oauth.clone().unwrap_or_default();
    if oauth.headless() {
        return Err(failed(
            "it is configured for the client credentials grant, which needs no login; set \
             [mcp.servers.oauth] grant = \"login\" to log in as a confidential client"
                .to_owned(),
        ));
    }
    let secret = match (&options.client_secret, &oauth.client_secret_env) {
        (Some(secret), _) => Some(secret.clone()),
        (None, Some(variable)) => Some(secret_from_env(server, variable)?),
        (None, None) => None,
    };
    let http = reqwest::Client::new();
    let found = discover(&http, server, url).await?;
    let authorize = found
        .metadata
        .authorization_endpoint
        .clone()
        .ok_or_else(|| {
            failed("its authorization server has no authorization_endpoint".to_owned())
        })?;
    if !found
        .metadata
        .code_challenge_methods_supported
        .iter()
        .any(|m| m == "S256")
    {
        return Err(failed(
            "its authorization server does not announce PKCE (S256) support, which OAuth 2.1 \
             requires"
                .to_owned(),
        ));
    }
    let scope = requested_scope(&oauth.scopes, &options.extra_scopes, &found.scope);
    let port = options.port.unwrap_or(oauth.redirect_port);
    let listener = TcpListener::bind(("127.0.0.1", port)).await.map_err(|e| {
        failed(format!(
            "cannot listen on 127.0.0.1:{port} for the redirect: {e}"
        ))
    })?;
    let local = listener
        .local_addr()
        .map_err(|e| failed(format!("loopback listener: {e}")))?;
    let redirect_uri = format!("http://127.0.0.1:{}/callback", local.port());
    // The order of the MCP authorization spec: a pre-registered client, else a client ID
    // metadata document where the server accepts one, else dynamic registration.
    let metadata_document = oauth
        .client_metadata_url
        .clone()
        .filter(|_| found.metadata.client_id_metadata_document_supported);
    let client = match (&oauth.client_id, metadata_document) {
        (Some(id), _) => ClientAuth::new(id.clone(), secret),
        (None, Some(document)) => ClientAuth::new(document, None),
        (None, None) => match &found.metadata.registration_endpoint {
            Some(endpoint) => register(&http, server, endpoint, &redirect_uri, &scope).await?,
            None if found.metadata.client_id_metadata_document_supported => {
                return Err(failed(
                    "no client_id is configured and the authorization server offers no \
                         dynamic registration but accepts client ID metadata documents: publish \
                         one (redirect_uris [\"http://127.0.0.1/callback\"]) at an https URL and \
                         set [mcp.servers.oauth] client_metadata_url to that URL"
                        .to_owned(),
                ))
            }
            None => {
                return Err(failed(
                    "no client_id is configured and the authorization server offers no \
                         dynamic registration; register Hermes there and set \
                         [mcp.servers.oauth] client_id"
                        .to_owned(),
                ))
            }
        },
    }
    .for_methods(&found.metadata.token_endpoint_auth_methods_supported);
    let pkce = Pkce::new();
    let state = random_token();
    let link = authorization_url(&AuthorizationRequest {
        endpoint: &authorize,
        client_id: &client.id,
        redirect_uri: &redirect_uri,
        scope: &scope,
        state: &state,
        challenge: &pkce.challenge,
        resource: &found.resource,
    })
    .map_err(|e| {
        failed(format!(
            "authorization_endpoint `{authorize}` is not a URL: {e}"
        ))
    })?;
    show_url(&link);
    let issuer = Issuer {
        recorded: &found.metadata.issuer,
        always_sent: found
            .metadata
            .authorization_response_iss_parameter_supported,
    };
    let code = tokio::time::timeout(LOGIN_WAIT, wait_for_code(&listener, &state, &issuer))
        .await
        .map_err(|_| {
            failed(format!(
                "no browser came back to {redirect_uri} within {LOGIN_WAIT:?}; run the login again"
            ))
        })?
        .map_err(failed)?;
    let endpoint = TokenEndpoint {
        http: &http,
        server,
        url: &found.metadata.token_endpoint,
        client: &client,
        resource: &found.resource,
    };
    let response = endpoint
        .authorization_code(&code, &pkce.verifier, &redirect_uri)
        .await?;
    let tokens = StoredTokens {
        access_token: response.access_token,
        refresh_token: response.refresh_token,
        expires_at: response
            .expires_in
            .map(|secs| Utc::now() + chrono::Duration::seconds(secs.min(i64::MAX as u64) as i64)),
        scope: response.scope.unwrap_or(scope),
        token_endpoint: found.metadata.token_endpoint.clone(),
        client_id: client.id,
        client_secret: client.secret,
        resource: found.resource,
        obtained_by: BY_LOGIN.to_owned(),
    };
    let (saving, to_save) = (store.clone(), tokens.clone());
    let name = server.to_owned();
    tokio::task::spawn_blocking(move || saving.save(&name, &to_save))
        .await
        .map_err(|e| failed(format!("saving the tokens: {e}")))??;
    tracing::info!(server, scope = %tokens.scope, "MCP OAuth login complete");
    Ok(tokens)
}

/// Configured and extra scopes; when there are none, what the server asked for.
fn requested_scope(configured: &[String], extra: &[String], discovered: &str) -> String {
    let mut scopes: Vec<String> = Vec::new();
    for scope in configured
        .iter()
        .chain(extra)
        .flat_map(|s| s.split_whitespace())
    {
        if !scopes.iter().any(|s| s == scope) {
            scopes.push(scope.to_owned());
        }
    }
    if scopes.is_empty() {
        discovered.to_owned()
    } else {
        scopes.join(" ")
    }
}

/// The authorization server's issuer, against which a redirect's `iss` is checked (RFC 9207).
struct Issuer<'a> {
    recorded: &'a str,
    /// The server announced `authorization_response_iss_parameter_supported`.
    always_sent: bool,
}

/// Answer requests on the loopback listener until one brings `code` with our `state`.
async fn wait_for_code(
    listener: &TcpListener,
    state: &str,
    issuer: &Issuer<'_>,
) -> Result<String, String> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| format!("loopback listener failed: {e}"))?;
        let mut head = Vec::new();
        let mut buffer = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buffer[..n]),
            }
        }
        let text = String::from_utf8_lossy(&head);
        let target = text
            .lines()
            .next()
            .and_then(|line| line.split_whitespace().nth(1))
            .unwrap_or("/");
        let answer = redirect_answer(target, state, issuer);
        let (status, page) = match &answer {
            Some(Ok(_)) => ("200 OK", "Hermes is authorised. You can close this tab."),
            Some(Err(_)) => (
                "400 Bad Request",
                "Hermes was not authorised; see the terminal.",
            ),
            None => ("404 Not Found", "Not the login callback."),
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
            page.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
        if let Some(answer) = answer {
            return answer;
        }
    }
}

/// What a request to the loopback listener says: `None` when it is not the callback.
fn redirect_answer(
    target: &str,
    state: &str,
    issuer: &Issuer<'_>,
) -> Option<Result<String, String>> {
    let url = url::Url::parse(&format!("http://127.0.0.1{target}")).ok()?;
    if url.path() != "/callback" {
        return None;
    }
    let pairs: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
    if pairs.get("state").map(String::as_str) != Some(state) {
        return Some(Err(
            "the redirect's `state` does not match this login (another login, or a forged \
             redirect); run the login again"
                .to_owned(),
        ));
    }
    // RFC 9207 §2.4: a present `iss` must be the issuer exactly (no normalisation); a missing
    // one is refused only from a server that said it always sends it. Either way a mix-up
    // (a response from another authorization server) stops here.
    match pairs.get("iss") {
        Some(iss) if iss != issuer.recorded => {
            return Some(Err(format!(
                "the redirect came from the issuer `{iss}`, not `{}` (a mix-up or a forged \
                 redirect, RFC 9207); run the login again",
                issuer.recorded
            )))
        }
        None if issuer.always_sent => {
            return Some(Err(format!(
                "the redirect carries no `iss` although `{}` announces it always sends one \
                 (RFC 9207); run the login again",
                issuer.recorded
            )))
        }
        _ => {}
    }
    if let Some(error) = pairs.get("error") {
        let description = pairs.get("error_description").cloned().unwrap_or_default();
        return Some(Err(format!(
            "the authorization server refused: `{error}` {description}"
        )));
    }
    Some(
        pairs
            .get("code")
            .cloned()
            .ok_or_else(|| "the redirect carried no code".to_owned()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_joins_configured_and_extra_without_repeats_else_takes_the_servers() {
        assert_eq!(
            requested_scope(&["a b".into()], &["b c".into()], "x"),
            "a b c"
        );
        assert_eq!(requested_scope(&[], &[], "mcp:read"), "mcp:read");
    }

    const QUIET: Issuer<'static> = Issuer {
        recorded: "https://as.example",
        always_sent: false,
    };

    #[test]
    fn redirect_with_a_foreign_state_is_refused() {
        assert_eq!(
            redirect_answer("/callback?code=c&state=mine", "mine", &QUIET),
            Some(Ok("c".to_owned()))
        );
        assert!(matches!(
            redirect_answer("/callback?code=c&state=theirs", "mine", &QUIET),
            Some(Err(_))
        ));
        assert_eq!(redirect_answer("/favicon.ico", "mine", &QUIET), None);
    }

    #[test]
    fn redirect_iss_must_be_the_issuer_exactly_and_present_when_announced() {
        let exact = "/callback?code=c&state=s&iss=https%3A%2F%2Fas.example";
        let slash = "/callback?code=c&state=s&iss=https%3A%2F%2Fas.example%2F";
        let none = "/callback?code=c&state=s";
        let announced = Issuer {
            always_sent: true,
            ..QUIET
        };
        assert_eq!(
            redirect_answer(exact, "s", &announced),
            Some(Ok("c".into()))
        );
        assert!(matches!(
            redirect_answer(slash, "s", &announced),
            Some(Err(_))
        ));
        assert!(matches!(redirect_answer(slash, "s", &QUIET), Some(Err(_))));
        assert!(matches!(
            redirect_answer(none, "s", &announced),
            Some(Err(_))
        ));
        assert_eq!(redirect_answer(none, "s", &QUIET), Some(Ok("c".into())));
    }
}
