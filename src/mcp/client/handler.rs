//! The client side of an rmcp session: what we announce (name `hermes`, the tasks extension;
//! 2026-07-28 through `server/discover`, else the 2025-11-25 handshake — see [`lifecycle`]),
//! the `list_changed` notifications we turn into a counter the MCP-bridge watches to re-list a
//! server (in 2026-07-28 they arrive on a `subscriptions/listen` stream we open, see
//! [`Notifier::listen_for_list_changes`]), and the `notifications/tasks` we pass on to
//! whoever follows a task.

use rmcp::model::FormElicitationCapability;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, TaskStatusNotificationParams,
};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationCapability};
use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ClientLifecycleMode, ErrorData, Peer, RoleClient};
use std::sync::Arc;
use tokio::sync::{broadcast, watch};

use super::{input, CLIENT_NAME};
use crate::config::McpRevision;
use crate::mcp::elicit::{Answer, Elicitor};
use crate::mcp::McpTaskState;

/// Our `ClientHandler`: announces Hermes, counts `list_changed` notifications and passes
/// task states on.
#[derive(Debug, Clone)]
pub(super) struct Notifier {
    changed: watch::Sender<u64>,
    tasks: broadcast::Sender<McpTaskState>,
    /// Who answers the server's `elicitation/create`; none = no elicitation announced.
    elicitor: Option<Arc<dyn Elicitor>>,
}

/// What the client hears from the server through its [`Notifier`].
#[derive(Debug)]
pub(super) struct Heard {
    pub changed: watch::Receiver<u64>,
    pub tasks: broadcast::Sender<McpTaskState>,
    /// Counts what a 2026-07-28 server's `subscriptions/listen` stream brings.
    pub notifier: Notifier,
    /// Who answers the server's questions (`input_required` results too).
    pub elicitor: Option<Arc<dyn Elicitor>>,
}

impl Notifier {
    pub fn new(elicitor: Option<Arc<dyn Elicitor>>) -> (Self, Heard) {
        let (changed, receiver) = watch::channel(0);
        let (tasks, _) = broadcast::channel(super::tasks::UPDATES_BUFFER);
        let notifier = Self {
            changed,
            tasks: tasks.clone(),
            elicitor: elicitor.clone(),
        };
        (
            notifier.clone(),
            Heard {
                changed: receiver,
                tasks,
                notifier,
                elicitor,
            },
        )
    }

    /// In the 2026-07-28 revision a server sends list changes only on a `subscriptions/listen`
    /// stream the client opens: open one for tools, resources and prompts, and count what
    /// arrives as the handshake era's notifications are counted. Ends with the session; a
    /// server that refuses the stream is logged and its lists are read at connect only.
    pub fn listen_for_list_changes(self, server: String, peer: Peer<RoleClient>) {
        tokio::spawn(async move {
            let filter = SubscriptionFilter::builder()
                .tools_list_changed()
                .resources_list_changed()
                .prompts_list_changed()
                .build();
            let mut subscription = match peer.listen(filter).await {
                Ok(subscription) => subscription,
                Err(error) => {
                    tracing::warn!(%server, %error, "the MCP server refused subscriptions/listen; its lists are read at connect only");
                    return;
                }
            };
            loop {
                match subscription.next().await {
                    Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                        self.bump("tools");
                    }
                    Ok(Some(ServerNotification::ResourceListChangedNotification(_))) => {
                        self.bump("resources");
                    }
                    Ok(Some(ServerNotification::PromptListChangedNotification(_))) => {
                        self.bump("prompts");
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => return,
                    Err(error) => {
                        tracing::debug!(%server, %error, "the MCP list-change stream ended");
                        return;
                    }
                }
            }
        });
    }

    fn bump(&self, what: &str) {
        tracing::info!(list = what, "MCP server announced a list change");
        self.changed.send_modify(|count| *count += 1);
    }
}

/// What we announce in `initialize`: the tasks extension, and form elicitation when someone
/// answers questions.
pub(super) fn client_config(elicits: bool) -> ClientConfig {
    let mut capabilities = ClientCapabilities::builder().enable_tasks().build();
    if elicits {
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        capabilities.elicitation = Some(elicitation);
    }
    ClientConfig::new(
        capabilities,
        Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

/// How the connection starts for a server configured with `revision`: `auto` probes with
/// `server/discover` and falls back to the handshake for a server that answers it as an
/// unknown method (rmcp waits up to 10 s for a server that does not answer at all).
pub(super) fn lifecycle(revision: McpRevision) -> ClientLifecycleMode {
    match revision {
        McpRevision::Auto => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
        McpRevision::Stateless2026 => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        McpRevision::Handshake2025 => ClientLifecycleMode::Initialize,
    }
}

impl ClientHandler for Notifier {
    fn get_info(&self) -> ClientConfig {
        client_config(self.elicitor.is_some())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let answer = match &self.elicitor {
            Some(elicitor) => elicitor.answer(input::question(&request)).await,
            None => Answer::Decline,
        };
        Ok(input::result(answer))
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

#[cfg(test)]
mod tests {
    use super::client_config;
    use rmcp::model::ProtocolVersion;

    #[test]
    fn client_announces_hermes_on_the_handshake_protocol() {
        let config = client_config(false);
        assert!(config.capabilities.elicitation.is_none());
        assert!(client_config(true).capabilities.elicitation.is_some());
        assert_eq!(config.client_info.name, "hermes");
        assert_eq!(
            config.protocol_version,
            ProtocolVersion::LATEST_WITH_INITIALIZE
        );
        assert_eq!(config.protocol_version.as_str(), "2025-11-25");
    }
}
