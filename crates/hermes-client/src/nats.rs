//! The client over async-nats: the one file that names the NATS client crate, so an upgrade of
//! it touches nothing else. Connects with the options of the least-privilege config
//! (`config/nats/hermes.conf`): user and password, token, NKey seed or a credentials file, and
//! an inbox prefix of the caller's own, where a restricted user may receive replies.

use std::path::PathBuf;
use std::time::Duration;

use async_nats::{HeaderMap, RequestErrorKind};
use bytes::Bytes;
use futures::StreamExt;

use crate::transport::{Inbox, Incoming, Transport, TransportError};

/// How to authenticate to the NATS server; all optional.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// User and password.
    pub user: Option<(String, String)>,
    pub token: Option<String>,
    /// An NKey seed (`SU…`).
    pub nkey_seed: Option<String>,
    /// A `.creds` file (JWT and seed).
    pub credentials_file: Option<PathBuf>,
    /// Where replies arrive; defaults to `_INBOX.<user>` when a user is given (the shipped
    /// permissions let each user receive replies only there).
    pub inbox_prefix: Option<String>,
}

/// Why the connection failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot read the NATS credentials file {path}: {reason}")]
    CredentialsFile { path: PathBuf, reason: String },
    #[error("cannot connect to NATS at {url}: {reason}; is nats-server running there, and are the credentials right?")]
    Connect { url: String, reason: String },
}

/// A NATS connection as a [`Transport`].
#[derive(Clone)]
pub struct Nats {
    client: async_nats::Client,
}

impl Nats {
    /// Connect to `url` (`nats://host:port`, or several separated by commas).
    pub async fn connect(url: &str, options: &ConnectOptions) -> Result<Self, ConnectError> {
        let mut nats = async_nats::ConnectOptions::new().name("hermes-client");
        let mut inbox = options.inbox_prefix.clone();
        if let Some((user, password)) = &options.user {
            nats = nats.user_and_password(user.clone(), password.clone());
            inbox = inbox.or_else(|| Some(format!("_INBOX.{user}")));
        }
        if let Some(token) = &options.token {
            nats = nats.token(token.clone());
        }
        if let Some(seed) = &options.nkey_seed {
            nats = nats.nkey(seed.clone());
        }
        if let Some(path) = &options.credentials_file {
            nats =
                nats.credentials_file(path)
                    .await
                    .map_err(|e| ConnectError::CredentialsFile {
                        path: path.clone(),
                        reason: e.to_string(),
                    })?;
        }
        if let Some(prefix) = inbox {
            nats = nats.custom_inbox_prefix(prefix);
        }
        let servers: Vec<&str> = url.split(',').map(str::trim).collect();
        let client = nats
            .connect(servers.as_slice())
            .await
            .map_err(|e| ConnectError::Connect {
                url: url.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Self { client })
    }

    /// Talk over a connection opened elsewhere (the engine's, for `hermes send`).
    pub fn from_client(client: async_nats::Client) -> Self {
        Self { client }
    }
}

fn failed(action: &'static str, subject: &str, e: impl std::fmt::Display) -> TransportError {
    TransportError::Failed {
        action,
        subject: subject.to_string(),
        reason: e.to_string(),
    }
}

#[async_trait::async_trait]
impl Transport for Nats {
    async fn request(
        &self,
        subject: &str,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, TransportError> {
        let request = async_nats::Request::new()
            .payload(payload)
            .timeout(Some(timeout));
        match self.client.send_request(subject.to_string(), request).await {
            Ok(reply) => Ok(reply.payload),
            Err(e) => Err(match e.kind() {
                RequestErrorKind::NoResponders => TransportError::NoResponders {
                    subject: subject.to_string(),
                },
                RequestErrorKind::TimedOut => TransportError::Timeout {
                    subject: subject.to_string(),
                    after: timeout,
                },
                _ => failed("request", subject, e),
            }),
        }
    }

    async fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        msg_id: Option<&str>,
    ) -> Result<(), TransportError> {
        let sent = match msg_id {
            Some(id) => {
                let mut headers = HeaderMap::new();
                headers.insert("Nats-Msg-Id", id);
                self.client
                    .publish_with_headers(subject.to_string(), headers, payload)
                    .await
            }
            None => self.client.publish(subject.to_string(), payload).await,
        };
        sent.map_err(|e| failed("publish", subject, e))
    }

    async fn subscribe(&self, subject: &str, queue: Option<&str>) -> Result<Inbox, TransportError> {
        let subscriber = match queue {
            Some(group) => {
                self.client
                    .queue_subscribe(subject.to_string(), group.to_string())
                    .await
            }
            None => self.client.subscribe(subject.to_string()).await,
        }
        .map_err(|e| failed("subscribe", subject, e))?;
        Ok(Box::pin(subscriber.map(|m| Incoming {
            subject: m.subject.to_string(),
            reply: m.reply.map(|r| r.to_string()),
            payload: m.payload,
        })))
    }

    async fn flush(&self) -> Result<(), TransportError> {
        self.client
            .flush()
            .await
            .map_err(|e| failed("flush", "the connection", e))
    }
}
