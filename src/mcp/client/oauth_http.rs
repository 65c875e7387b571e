//! [`OAuthHttp`]: rmcp's reqwest Streamable HTTP client with OAuth around it. Each request
//! carries the [`TokenSource`]'s access token; a 401 renews the token once and retries, a 403
//! `insufficient_scope` steps the scope up once and retries. A 401 from a server without
//! OAuth, or an authorization Hermes cannot obtain by itself, becomes an error telling the
//! user what to run. The token is only ever put in the `Authorization` header. It also tells
//! when the session's standalone stream has been answered ([`StandaloneStream`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use crate::mcp::oauth::{OAuthError, TokenSource};

type HttpError = StreamableHttpError<reqwest::Error>;

/// The HTTP client of one Streamable HTTP server.
#[derive(Clone)]
pub(super) struct OAuthHttp {
    inner: reqwest::Client,
    server: Arc<str>,
    tokens: Option<Arc<TokenSource>>,
    standalone: StandaloneStream,
}

/// Whether the server has answered the session's standalone stream: the GET that rmcp opens
/// after a 2025-11-25 handshake, on which the server sends requests and notifications of its
/// own. A server may drop what it sends before that stream exists (the TypeScript SDK does),
/// so a question asked during our first call could be lost; the connection waits for it.
#[derive(Clone, Default)]
pub(super) struct StandaloneStream(Arc<tokio::sync::watch::Sender<bool>>);

impl StandaloneStream {
    fn answered(&self) {
        self.0.send_replace(true);
    }

    /// True once the server answered the stream's GET (with a stream, a refusal or an error),
    /// false if it has not within `limit`.
    pub(super) async fn answered_within(&self, limit: Duration) -> bool {
        let mut answered = self.0.subscribe();
        let waited = tokio::time::timeout(limit, answered.wait_for(|yes| *yes)).await;
        matches!(waited, Ok(Ok(_)))
    }
}

impl OAuthHttp {
    pub(super) fn new(server: &str, tokens: Option<Arc<TokenSource>>) -> Self {
        Self {
            inner: reqwest::Client::new(),
            server: server.into(),
            tokens,
            standalone: StandaloneStream::default(),
        }
    }

    pub(super) fn standalone_stream(&self) -> StandaloneStream {
        self.standalone.clone()
    }

    /// Run `call` with the current token, renewing it after a 401 and widening its scope
    /// after a 403 `insufficient_scope`, once each.
    async fn authorised<T, F, Fut>(
        &self,
        static_token: Option<String>,
        call: F,
    ) -> Result<T, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, HttpError>>,
    {
        let Some(tokens) = &self.tokens else {
            return match call(static_token).await {
                Err(StreamableHttpError::AuthRequired(_)) => {
                    Err(unauthorised(OAuthError::LoginNeeded {
                        server: self.server.to_string(),
                    }))
                }
                other => other,
            };
        };
        let token = tokens.bearer().await.map_err(unauthorised)?;
        let retry = match call(Some(token.clone())).await {
            Err(StreamableHttpError::AuthRequired(_)) => {
                tokens.rejected(&token).await.map_err(unauthorised)?
            }
            Err(StreamableHttpError::InsufficientScope(challenge)) => tokens
                .step_up(challenge.required_scope.as_deref())
                .await
                .map_err(unauthorised)?,
            other => return other,
        };
        match call(Some(retry)).await {
            Err(StreamableHttpError::AuthRequired(_)) => {
                Err(unauthorised(OAuthError::LoginNeeded {
                    server: self.server.to_string(),
                }))
            }
            Err(StreamableHttpError::InsufficientScope(challenge)) => {
                Err(unauthorised(OAuthError::StepUpNeeded {
                    server: self.server.to_string(),
                    scope: challenge.required_scope.unwrap_or_default(),
                }))
            }
            other => other,
        }
    }
}

impl OAuthHttp {
    /// Open a GET stream through [`Self::authorised`]; one without `Last-Event-ID` is the
    /// standalone stream, whose answer (a stream, a refusal or an error) is noted.
    async fn open_stream<F, Fut>(
        &self,
        standalone: bool,
        auth_token: Option<String>,
        open: F,
    ) -> Result<BoxStream<'static, Result<sse_stream::Sse, SseError>>, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<
            Output = Result<BoxStream<'static, Result<sse_stream::Sse, SseError>>, HttpError>,
        >,
    {
        let stream = self.authorised(auth_token, open).await;
        if standalone {
            self.standalone.answered();
        }
        stream
    }
}

/// An authorization failure as the transport reports it (the message reaches the user).
fn unauthorised(error: OAuthError) -> HttpError {
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(error.to_string()))
}

impl StreamableHttpClient for OAuthHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_token,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.authorised(auth_token, |token| {
            let (uri, message, session_id, headers) = (
                uri.clone(),
                message.clone(),
                session_id.clone(),
                custom_headers.clone(),
            );
            async move {
                self.inner
                    .post_message_with_response_limits(
                        uri, message, session_id, token, headers, limits,
                    )
                    .await
            }
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.authorised(auth_token, |token| {
            let (uri, session_id, headers) =
                (uri.clone(), session_id.clone(), custom_headers.clone());
            async move {
                self.inner
                    .delete_session(uri, session_id, token, headers)
                    .await
            }
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<sse_stream::Sse, SseError>>, HttpError> {
        self.open_stream(last_event_id.is_none(), auth_token, |token| {
            let (uri, session_id, last_event_id, headers) = (
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                custom_headers.clone(),
            );
            async move {
                self.inner
                    .get_stream(uri, session_id, last_event_id, token, headers)
                    .await
            }
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<sse_stream::Sse, SseError>>, HttpError> {
        self.open_stream(last_event_id.is_none(), auth_token, |token| {
            let (uri, session_id, last_event_id, headers) = (
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                custom_headers.clone(),
            );
            async move {
                self.inner
                    .get_stream_with_max_sse_event_size(
                        uri,
                        session_id,
                        last_event_id,
                        token,
                        headers,
                        max_sse_event_size,
                    )
                    .await
            }
        })
        .await
    }
}
