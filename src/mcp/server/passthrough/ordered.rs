//! [`Ordered`]: the passthrough's transport towards the mounted server. It takes the
//! server's notifications off the wire itself and queues them for
//! [`Routes::relay`](super::relay::Routes::relay), in the order they arrived and before the
//! answer that follows them is handed on. (rmcp would hand each notification to its own task,
//! so progress 50 and 100 could reach the client the other way round, or after the answer.)

use std::sync::Arc;

use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::sync::mpsc;

use super::relay::Routes;

/// A transport that queues the notifications the client relays.
pub(super) struct Ordered<T> {
    inner: T,
    routes: Arc<Routes>,
    queue: mpsc::UnboundedSender<ServerNotification>,
}

impl<T> Ordered<T> {
    /// Wrap `inner`; the queue's other end goes to [`Routes::relay`].
    pub(super) fn new(
        inner: T,
        routes: Arc<Routes>,
    ) -> (Self, mpsc::UnboundedReceiver<ServerNotification>) {
        let (queue, taken) = mpsc::unbounded_channel();
        (
            Self {
                inner,
                routes,
                queue,
            },
            taken,
        )
    }
}

/// Whether a notification is one the client hears from Hermes.
fn relayed(notification: &ServerNotification) -> bool {
    matches!(
        notification,
        ServerNotification::ProgressNotification(_)
            | ServerNotification::LoggingMessageNotification(_)
            | ServerNotification::ResourceUpdatedNotification(_)
            | ServerNotification::ResourceListChangedNotification(_)
            | ServerNotification::ToolListChangedNotification(_)
            | ServerNotification::PromptListChangedNotification(_)
            | ServerNotification::TaskStatusNotification(_)
    )
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Ordered<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await?;
            match message {
                JsonRpcMessage::Notification(notification)
                    if relayed(&notification.notification) =>
                {
                    self.routes.taken();
                    if self.queue.send(notification.notification).is_err() {
                        // The relay ended with the client's session; nothing to send to.
                        self.routes.dropped();
                    }
                }
                other => return Some(other),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}
