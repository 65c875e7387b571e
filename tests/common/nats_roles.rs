//! The shipped least-privilege deployment for tests: nats-server running
//! `config/nats/hermes.conf` from the repository (passwords from its environment), each role's
//! credential as `hermes serve` takes it from the environment, and raw NATS clients that
//! record what the server refused them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::nats_server::NatsServer;

/// Every user of the shipped configuration and the variable holding its password there.
pub const USERS: [(&str, &str); 10] = [
    ("hermes-session", "HERMES_SESSION_PASSWORD"),
    ("hermes-planner", "HERMES_PLANNER_PASSWORD"),
    ("hermes-tools", "HERMES_TOOLS_PASSWORD"),
    ("hermes-mcp", "HERMES_MCP_PASSWORD"),
    ("hermes-memory", "HERMES_MEMORY_PASSWORD"),
    ("hermes-ops", "HERMES_OPS_PASSWORD"),
    ("hermes-backup", "HERMES_BACKUP_PASSWORD"),
    ("shop", "SHOP_PASSWORD"),
    ("alice", "ALICE_PASSWORD"),
    ("worker-word-count", "WORKER_WORD_COUNT_PASSWORD"),
];

pub fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The test password of `user`.
pub fn password(user: &str) -> String {
    format!("test-password-of-{user}")
}

/// nats-server with the shipped permissions, as they are in the repository.
pub fn start_server() -> NatsServer {
    let env: Vec<(String, String)> = USERS
        .iter()
        .map(|(user, var)| ((*var).to_string(), password(user)))
        .collect();
    NatsServer::start_with_config(&repo_file("config/nats/hermes.conf"), &env)
}

/// What a Hermes process running as `user` has in its environment: its credential and its
/// identity (the user's own name, as the shipped configuration expects).
pub fn role_env(user: &str) -> Vec<(String, String)> {
    vec![
        ("HERMES_NATS_USER".into(), user.into()),
        ("HERMES_NATS_PASSWORD".into(), password(user)),
        ("HERMES_NATS_IDENTITY".into(), user.into()),
    ]
}

/// A plain async-nats client of one user (its inboxes under `_INBOX.<user>`), keeping the
/// errors the server sent it.
pub struct RawClient {
    pub client: async_nats::Client,
    pub user: String,
    errors: Arc<Mutex<Vec<String>>>,
}

const REFUSAL_WAIT: Duration = Duration::from_secs(5);

impl RawClient {
    pub async fn connect(url: &str, user: &str) -> Self {
        let errors = Arc::new(Mutex::new(Vec::new()));
        let seen = errors.clone();
        let client =
            async_nats::ConnectOptions::with_user_and_password(user.into(), password(user))
                .custom_inbox_prefix(format!("_INBOX.{user}"))
                .event_callback(move |event| {
                    if let async_nats::Event::ServerError(e) = event {
                        seen.lock().unwrap().push(e.to_string());
                    }
                    async {}
                })
                .connect(url)
                .await
                .unwrap_or_else(|e| panic!("{user} connects: {e}"));
        Self {
            client,
            user: user.into(),
            errors,
        }
    }

    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap().clone()
    }

    /// Wait until the server said it refused `what` (`Publish to`, `Subscription to`)
    /// `subject`.
    async fn refused(&self, what: &str, subject: &str) {
        let needle = format!("Permissions Violation for {what} \"{subject}\"");
        let deadline = Instant::now() + REFUSAL_WAIT;
        while Instant::now() < deadline {
            if self.errors().iter().any(|e| e.contains(&needle)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "the server did not refuse {} `{what} {subject}`; it said: {:?}",
            self.user,
            self.errors()
        );
    }

    /// Publish on `subject` and see the server refuse it.
    pub async fn publish_is_refused(&self, subject: &str) {
        self.client
            .publish(subject.to_string(), "{}".into())
            .await
            .unwrap();
        self.client.flush().await.unwrap();
        self.refused("Publish to", subject).await;
    }

    /// Subscribe to `subject` and see the server refuse it; the subscription is returned so
    /// a caller can show nothing arrives on it.
    pub async fn subscribe_is_refused(&self, subject: &str) -> async_nats::Subscriber {
        let subscription = self.client.subscribe(subject.to_string()).await.unwrap();
        self.client.flush().await.unwrap();
        self.refused("Subscription to", subject).await;
        subscription
    }

    /// No refusal mentions `subject`.
    pub fn never_refused(&self, subject: &str) {
        let quoted = format!("\"{subject}\"");
        let errors = self.errors();
        assert!(
            !errors.iter().any(|e| e.contains(&quoted)),
            "{} was refused `{subject}`: {errors:?}",
            self.user
        );
    }
}
