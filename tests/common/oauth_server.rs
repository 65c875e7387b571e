//! A local OAuth 2.1 authorization server in front of a real MCP server, for the OAuth client
//! tests. One hyper server on a free loopback port serves:
//! - `/mcp`: a Streamable HTTP MCP server (rmcp) with `whoami` and `admin_report`, protected:
//!   without a valid bearer it answers 401 with `WWW-Authenticate: Bearer resource_metadata=…`;
//!   `admin_report` needs the scope `mcp:admin` (else 403 `insufficient_scope`);
//! - RFC 9728 protected-resource metadata at `/.well-known/oauth-protected-resource/mcp`;
//! - RFC 8414 metadata at `/.well-known/oauth-authorization-server`;
//! - `/register` (RFC 7591), `/authorize` (checks the client, redirect URI, PKCE S256 and the
//!   resource, redirects with a code), `/token` (authorization_code with the PKCE verifier,
//!   refresh_token with rotation, client_credentials with HTTP Basic; a client registered
//!   with a secret must authenticate with it, HTTP Basic, on every grant).
//!
//! Every token it issues is recorded, so tests can look for them where they must not be.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

type Body = BoxBody<Bytes, Infallible>;

/// The text `whoami` answers.
pub const WHOAMI: &str = "you reached the protected server";
pub const READ: &str = "mcp:read";
pub const ADMIN: &str = "mcp:admin";

#[derive(Clone)]
struct Protected;

fn tool(name: &str) -> Tool {
    let schema = json!({"type": "object"}).as_object().unwrap().clone();
    Tool::new(name.to_owned(), "protected test tool", Arc::new(schema))
}

impl ServerHandler for Protected {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            tool("whoami"),
            tool("admin_report"),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = match request.name.as_ref() {
            "whoami" => WHOAMI.to_owned(),
            _ => "admin report: 3 incidents".to_owned(),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

struct Client {
    secret: Option<String>,
    redirect_uris: Vec<String>,
}

struct Code {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    scope: String,
}

/// What the server knows and did.
#[derive(Default)]
pub struct State {
    clients: HashMap<String, Client>,
    codes: HashMap<String, Code>,
    /// access token → (scope, still valid)
    access: HashMap<String, (String, bool)>,
    /// refresh token → (client id, scope)
    refresh: HashMap<String, (String, String)>,
    /// `grant_type (scope)` of each token issued, in order.
    pub grants: Vec<String>,
    /// Every token and code issued.
    pub issued: Vec<String>,
    /// (tool, scope of the token) of each tools/call let through.
    pub calls: Vec<(String, String)>,
    /// How many requests to `/mcp` were answered 401.
    pub rejected: usize,
    /// `expires_in` of the access tokens issued (default 3600 s).
    pub expires_in: Option<u64>,
    counter: u64,
}

impl State {
    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        let value = format!(
            "{prefix}-{}-{}",
            self.counter,
            uuid::Uuid::new_v4().simple()
        );
        self.issued.push(value.clone());
        value
    }

    fn issue(&mut self, grant: &str, client_id: &str, scope: &str, refresh: bool) -> Value {
        let access = self.fresh("at");
        self.access.insert(access.clone(), (scope.to_owned(), true));
        self.grants.push(format!("{grant} ({scope})"));
        let mut body = json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.expires_in.unwrap_or(3600),
            "scope": scope,
        });
        if refresh {
            let token = self.fresh("rt");
            self.refresh
                .insert(token.clone(), (client_id.to_owned(), scope.to_owned()));
            body["refresh_token"] = json!(token);
        }
        body
    }
}

/// A running authorization server + protected MCP server; stops when dropped.
pub struct OAuthServer {
    pub base: String,
    pub state: Arc<Mutex<State>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl OAuthServer {
    /// Start on a free loopback port (on the current tokio runtime).
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let mcp = StreamableHttpService::new(
            || Ok(Protected),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let (shared, origin) = (state.clone(), base.clone());
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (state, origin, mcp) = (shared.clone(), origin.clone(), mcp.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let (state, origin, mcp) = (state.clone(), origin.clone(), mcp.clone());
                        async move { Ok::<_, Infallible>(route(request, &state, &origin, &mcp).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            base,
            state,
            accept,
        }
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// Register a client (a confidential one with `secret`).
    pub fn add_client(&self, id: &str, secret: Option<&str>) {
        self.state.lock().unwrap().clients.insert(
            id.to_owned(),
            Client {
                secret: secret.map(str::to_owned),
                redirect_uris: Vec::new(),
            },
        );
    }

    /// Revoke every access token issued so far (as if they had expired).
    pub fn expire_access_tokens(&self) {
        for (_, valid) in self.state.lock().unwrap().access.values_mut() {
            *valid = false;
        }
    }

    pub fn grants(&self) -> Vec<String> {
        self.state.lock().unwrap().grants.clone()
    }

    pub fn issued(&self) -> Vec<String> {
        self.state.lock().unwrap().issued.clone()
    }

    /// Issue access tokens valid for `secs` from now on.
    pub fn set_expires_in(&self, secs: u64) {
        self.state.lock().unwrap().expires_in = Some(secs);
    }

    /// How many requests to `/mcp` were answered 401.
    pub fn rejected(&self) -> usize {
        self.state.lock().unwrap().rejected
    }

    pub fn calls(&self) -> Vec<(String, String)> {
        self.state.lock().unwrap().calls.clone()
    }
}

fn json_response(status: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap()
}

fn challenge(status: u16, origin: &str, error: Option<&str>, scope: &str) -> Response<Body> {
    let mut value =
        format!("Bearer resource_metadata=\"{origin}/.well-known/oauth-protected-resource/mcp\", scope=\"{scope}\"");
    if let Some(error) = error {
        value.push_str(&format!(", error=\"{error}\""));
    }
    Response::builder()
        .status(status)
        .header("www-authenticate", value)
        .body(Full::new(Bytes::new()).boxed())
        .unwrap()
}

fn oauth_error(error: &str) -> Response<Body> {
    json_response(400, &json!({"error": error}))
}

fn query(uri: &hyper::Uri) -> HashMap<String, String> {
    url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

async fn route(
    request: Request<Incoming>,
    state: &Mutex<State>,
    origin: &str,
    mcp: &StreamableHttpService<Protected, LocalSessionManager>,
) -> Response<Body> {
    let path = request.uri().path().to_owned();
    match path.as_str() {
        "/.well-known/oauth-protected-resource/mcp" => json_response(
            200,
            &json!({
                "resource": format!("{origin}/mcp"),
                "authorization_servers": [origin],
                "scopes_supported": [READ, ADMIN],
                "bearer_methods_supported": ["header"],
            }),
        ),
        "/.well-known/oauth-authorization-server" => json_response(
            200,
            &json!({
                "issuer": origin,
                "authorization_endpoint": format!("{origin}/authorize"),
                "token_endpoint": format!("{origin}/token"),
                "registration_endpoint": format!("{origin}/register"),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
                "code_challenge_methods_supported": ["S256"],
                "scopes_supported": [READ, ADMIN],
            }),
        ),
        "/register" => register(request, state).await,
        "/authorize" => authorize(request.uri(), state, origin),
        "/token" => token(request, state, origin).await,
        "/mcp" => protected(request, state, origin, mcp).await,
        _ => json_response(404, &json!({"error": "not_found"})),
    }
}

async fn register(request: Request<Incoming>, state: &Mutex<State>) -> Response<Body> {
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let Ok(asked) = serde_json::from_slice::<Value>(&body) else {
        return oauth_error("invalid_client_metadata");
    };
    let redirect_uris: Vec<String> = asked["redirect_uris"]
        .as_array()
        .map(|uris| {
            uris.iter()
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if redirect_uris.is_empty() {
        return oauth_error("invalid_redirect_uri");
    }
    let mut state = state.lock().unwrap();
    state.counter += 1;
    let id = format!("dyn-{}", state.counter);
    state.clients.insert(
        id.clone(),
        Client {
            secret: None,
            redirect_uris: redirect_uris.clone(),
        },
    );
    json_response(
        201,
        &json!({"client_id": id, "redirect_uris": redirect_uris}),
    )
}

fn authorize(uri: &hyper::Uri, state: &Mutex<State>, origin: &str) -> Response<Body> {
    let q = query(uri);
    let get = |k: &str| q.get(k).cloned().unwrap_or_default();
    let mut state = state.lock().unwrap();
    let Some(client) = state.clients.get(&get("client_id")) else {
        return oauth_error("unauthorized_client");
    };
    let redirect_uri = get("redirect_uri");
    let registered = client.redirect_uris.contains(&redirect_uri)
        || (client.redirect_uris.is_empty() && redirect_uri.starts_with("http://127.0.0.1:"));
    if !registered {
        return oauth_error("invalid_redirect_uri");
    }
    if get("response_type") != "code"
        || get("code_challenge_method") != "S256"
        || get("code_challenge").len() < 43
        || get("resource") != format!("{origin}/mcp")
    {
        return oauth_error("invalid_request");
    }
    let code = state.fresh("code");
    state.codes.insert(
        code.clone(),
        Code {
            client_id: get("client_id"),
            redirect_uri: redirect_uri.clone(),
            challenge: get("code_challenge"),
            scope: get("scope"),
        },
    );
    let mut location = url::Url::parse(&redirect_uri).unwrap();
    location
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &get("state"));
    Response::builder()
        .status(302)
        .header("location", location.as_str())
        .body(Full::new(Bytes::new()).boxed())
        .unwrap()
}

fn basic_client(request: &Request<Incoming>) -> Option<(String, String)> {
    let value = request.headers().get("authorization")?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    Some((id.to_owned(), secret.to_owned()))
}

async fn token(request: Request<Incoming>, state: &Mutex<State>, origin: &str) -> Response<Body> {
    let basic = basic_client(&request);
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    let get = |k: &str| form.get(k).cloned().unwrap_or_default();
    if get("resource") != format!("{origin}/mcp") {
        return oauth_error("invalid_target");
    }
    let mut state = state.lock().unwrap();
    // A client with a secret (confidential) authenticates with HTTP Basic; a public one names
    // itself in the form. The grants below then check that the code or refresh token is its.
    let client_id = match &basic {
        Some((id, secret)) => {
            let known = state.clients.get(id).and_then(|c| c.secret.clone());
            if known.as_deref() != Some(secret.as_str()) {
                return json_response(401, &json!({"error": "invalid_client"}));
            }
            id.clone()
        }
        None => {
            let id = get("client_id");
            if state.clients.get(&id).is_some_and(|c| c.secret.is_some()) {
                return json_response(401, &json!({"error": "invalid_client"}));
            }
            id
        }
    };
    match get("grant_type").as_str() {
        "authorization_code" => {
            let Some(code) = state.codes.remove(&get("code")) else {
                return oauth_error("invalid_grant");
            };
            let verified = URL_SAFE_NO_PAD.encode(Sha256::digest(get("code_verifier").as_bytes()))
                == code.challenge;
            if !verified || code.client_id != client_id || code.redirect_uri != get("redirect_uri")
            {
                return oauth_error("invalid_grant");
            }
            let body = state.issue("authorization_code", &code.client_id, &code.scope, true);
            json_response(200, &body)
        }
        "refresh_token" => {
            let Some((owner, scope)) = state.refresh.remove(&get("refresh_token")) else {
                return oauth_error("invalid_grant");
            };
            if owner != client_id {
                return oauth_error("invalid_grant");
            }
            let body = state.issue("refresh_token", &owner, &scope, true);
            json_response(200, &body)
        }
        "client_credentials" => {
            let Some((id, secret)) = basic else {
                return oauth_error("invalid_client");
            };
            let known = state.clients.get(&id).and_then(|c| c.secret.clone());
            if known.as_deref() != Some(secret.as_str()) {
                return json_response(401, &json!({"error": "invalid_client"}));
            }
            let scope = get("scope");
            if scope.split_whitespace().any(|s| s != READ && s != ADMIN) {
                return oauth_error("invalid_scope");
            }
            let body = state.issue("client_credentials", &id, &scope, false);
            json_response(200, &body)
        }
        _ => oauth_error("unsupported_grant_type"),
    }
}

async fn protected(
    request: Request<Incoming>,
    state: &Mutex<State>,
    origin: &str,
    mcp: &StreamableHttpService<Protected, LocalSessionManager>,
) -> Response<Body> {
    let bearer = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let scope = {
        let mut state = state.lock().unwrap();
        match bearer.as_ref().and_then(|t| state.access.get(t)).cloned() {
            Some((scope, true)) => scope,
            Some((_, false)) => {
                state.rejected += 1;
                return challenge(401, origin, Some("invalid_token"), READ);
            }
            None => {
                state.rejected += 1;
                return challenge(401, origin, None, READ);
            }
        }
    };
    if !scope.split_whitespace().any(|s| s == READ) {
        return challenge(403, origin, Some("insufficient_scope"), READ);
    }
    let (parts, body) = request.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    if let Ok(message) = serde_json::from_slice::<Value>(&body) {
        if message["method"] == "tools/call" {
            let tool = message["params"]["name"].as_str().unwrap_or("").to_owned();
            if tool == "admin_report" && !scope.split_whitespace().any(|s| s == ADMIN) {
                return challenge(
                    403,
                    origin,
                    Some("insufficient_scope"),
                    &format!("{READ} {ADMIN}"),
                );
            }
            state.lock().unwrap().calls.push((tool, scope));
        }
    }
    mcp.handle(Request::from_parts(parts, Full::new(body)))
        .await
}
