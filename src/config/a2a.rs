//! A2A (Agent2Agent 1.0): `[a2a]`, how this deployment serves its agents over A2A on the HTTP
//! listener (`hermes serve --http ADDR`), and `[agents.<name>] a2a = { … }`, which agents are
//! served and which agents live elsewhere and are reached over A2A.

use serde::{Deserialize, Serialize};

/// `[a2a]`: serving Hermes agents as A2A servers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aConfig {
    /// Serve every local agent, not only those with `a2a = { expose = true }`.
    #[serde(default)]
    pub expose_all: bool,
    /// The agent whose card is at `/.well-known/agent-card.json`; default: `assistant` when
    /// it is served, else the first served agent.
    #[serde(default)]
    pub default_agent: Option<String>,
    /// The base URL clients reach the HTTP listener at, written into Agent Cards (behind a
    /// proxy, e.g. `https://agents.example.com`); default `http://<listen address>`.
    #[serde(default)]
    pub public_url: Option<String>,
    /// Longest a blocking `SendMessage` waits for the task to end or ask for input, seconds;
    /// then it answers with the task as it is (still working: poll `GetTask`).
    #[serde(default = "default_blocking_secs")]
    pub blocking_timeout_secs: u64,
    /// Attempts to deliver one push notification (a webhook answering 2xx ends them).
    #[serde(default = "default_push_attempts")]
    pub push_attempts: u32,
    /// The wait before the second attempt, milliseconds; it doubles after each failure.
    #[serde(default = "default_push_backoff_ms")]
    pub push_backoff_ms: u64,
    /// Seconds one webhook call may take.
    #[serde(default = "default_push_timeout_secs")]
    pub push_timeout_secs: u64,
    /// Accept webhooks on loopback, private and link-local addresses (refused by default on a
    /// listener that is not loopback, against server-side request forgery).
    #[serde(default)]
    pub push_to_private: bool,
}

impl Default for A2aConfig {
    fn default() -> Self {
        Self {
            expose_all: false,
            default_agent: None,
            public_url: None,
            blocking_timeout_secs: default_blocking_secs(),
            push_attempts: default_push_attempts(),
            push_backoff_ms: default_push_backoff_ms(),
            push_timeout_secs: default_push_timeout_secs(),
            push_to_private: false,
        }
    }
}

/// `[agents.<name>] a2a = { … }`: serve this agent over A2A (`expose = true`), or reach an
/// agent that lives elsewhere (`card_url`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentA2aConfig {
    /// Serve this agent over A2A on the HTTP listener, at `/a2a/<name>`.
    #[serde(default)]
    pub expose: bool,
    /// The remote agent's Agent Card (`https://host/.well-known/agent-card.json`, or its base
    /// URL): this agent is not run here; delegating to it sends an A2A task there.
    #[serde(default)]
    pub card_url: Option<String>,
    /// Environment variable holding the bearer token sent to the remote agent.
    #[serde(default)]
    pub token_env: Option<String>,
}

fn default_blocking_secs() -> u64 {
    300
}

fn default_push_attempts() -> u32 {
    6
}

fn default_push_backoff_ms() -> u64 {
    500
}

fn default_push_timeout_secs() -> u64 {
    15
}
