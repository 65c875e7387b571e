//! The client side of an rmcp session: what we announce in `initialize` (name `hermes`,
//! protocol 2025-11-25, the newest with the handshake) and the `list_changed` notifications we
//! turn into a counter the MCP-bridge watches to re-list a server.

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::watch;

use super::CLIENT_NAME;

/// Our `ClientHandler`: announces Hermes and counts `list_changed` notifications.
#[derive(Debug, Clone)]
pub(super) struct Notifier {
    changed: watch::Sender<u64>,
}

impl Notifier {
    pub fn new() -> (Self, watch::Receiver<u64>) {
        let (changed, receiver) = watch::channel(0);
        (Self { changed }, receiver)
    }

    fn bump(&self, what: &str) {
        tracing::info!(list = what, "MCP server announced a list change");
        self.changed.send_modify(|count| *count += 1);
    }
}

/// What we announce in `initialize`.
pub(super) fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

impl ClientHandler for Notifier {
    fn get_info(&self) -> ClientConfig {
        client_config()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.bump("tools");
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.bump("resources");
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.bump("prompts");
    }
}
