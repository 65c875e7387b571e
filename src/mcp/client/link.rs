//! What keeps a client's connection alive, and how we learn it died: the child process of a
//! stdio server, or the HTTP session of a Streamable HTTP server (marked failed when a request
//! cannot reach the server).

use std::time::Duration;

use tokio::sync::watch;

use super::process::ChildProcess;

/// How often an HTTP link checks whether rmcp closed its transport.
const HTTP_POLL: Duration = Duration::from_millis(250);

#[derive(Debug)]
pub(super) enum Link {
    Child(ChildProcess),
    Http(HttpLink),
}

/// An HTTP session's health: failed once a request could not reach the server.
#[derive(Debug)]
pub(super) struct HttpLink {
    pub url: String,
    failed: watch::Sender<Option<String>>,
}

impl HttpLink {
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            failed: watch::channel(None).0,
        }
    }
}

impl Link {
    pub fn pid(&self) -> Option<u32> {
        match self {
            Link::Child(process) => process.pid(),
            Link::Http(_) => None,
        }
    }

    /// Why the link is unusable, if it is.
    pub fn dead_reason(&self) -> Option<String> {
        match self {
            Link::Child(process) => process.exit_reason(),
            Link::Http(http) => http.failed.borrow().clone(),
        }
    }

    /// Mark the link dead (an HTTP request could not reach the server).
    pub fn fail(&self, reason: &str) {
        if let Link::Http(http) = self {
            http.failed.send_if_modified(|failed| {
                if failed.is_none() {
                    *failed = Some(reason.to_owned());
                    true
                } else {
                    false
                }
            });
        }
    }

    /// Resolves once the link is dead; `transport_closed` reports whether rmcp closed the
    /// session's transport (the only sign an idle HTTP link gives).
    pub async fn died(&self, transport_closed: impl Fn() -> bool) -> String {
        match self {
            Link::Child(process) => process.exited().await,
            Link::Http(http) => {
                let mut failed = http.failed.subscribe();
                loop {
                    if let Some(reason) = failed.borrow_and_update().clone() {
                        return reason;
                    }
                    if transport_closed() {
                        return format!("the HTTP session with {} closed", http.url);
                    }
                    let _ = tokio::time::timeout(HTTP_POLL, failed.changed()).await;
                }
            }
        }
    }

    /// After the transport reported an error: the best reason we can give, waiting up to
    /// `settle` for a child's exit status.
    pub async fn reason_after_transport_error(&self, error: &str, settle: Duration) -> String {
        match self {
            Link::Child(process) => match process.exited_within(settle).await {
                Some(reason) => reason,
                None => format!("the connection closed ({error})"),
            },
            Link::Http(http) => {
                let reason = format!("{} is unreachable ({error})", http.url);
                self.fail(&reason);
                reason
            }
        }
    }
}
