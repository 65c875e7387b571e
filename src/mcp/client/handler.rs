//! The client side of an rmcp session: what we announce in `initialize` (name `hermes`,
//! protocol 2025-11-25, the newest with the handshake, and the tasks extension), the
//! `list_changed` notifications we turn into a counter the MCP-bridge watches to re-list a
//! server, and the `notifications/tasks` we pass on to whoever follows a task.

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, TaskStatusNotificationParams,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::{broadcast, watch};

use super::CLIENT_NAME;
use crate::mcp::McpTaskState;

/// Our `ClientHandler`: announces Hermes, counts `list_changed` notifications and passes
/// task states on.
#[derive(Debug, Clone)]
pub(super) struct Notifier {
    changed: watch::Sender<u64>,
    tasks: broadcast::Sender<McpTaskState>,
}

/// What the client hears from the server through its [`Notifier`].
#[derive(Debug)]
pub(super) struct Heard {
    pub changed: watch::Receiver<u64>,
    pub tasks: broadcast::Sender<McpTaskState>,
}

impl Notifier {
    pub fn new() -> (Self, Heard) {
        let (changed, receiver) = watch::channel(0);
        let (tasks, _) = broadcast::channel(super::tasks::UPDATES_BUFFER);
        (
            Self {
                changed,
                tasks: tasks.clone(),
            },
            Heard {
                changed: receiver,
                tasks,
            },
        )
    }

    fn bump(&self, what: &str) {
        tracing::info!(list = what, "MCP server announced a list change");
        self.changed.send_modify(|count| *count += 1);
    }
}

/// What we announce in `initialize`.
pub(super) fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
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

    async fn on_task_status(
        &self,
        params: TaskStatusNotificationParams,
        _context: NotificationContext<RoleClient>,
    ) {
        // Nobody following is fine: the follower asks `tasks/get` when it starts.
        let _ = self.tasks.send(super::tasks::detailed(params.task));
    }
}
