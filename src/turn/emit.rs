//! A turn's events: every event of a turn goes out through its [`Emitter`], to the ports.

use std::sync::Arc;

use super::ports::TurnPorts;
use crate::bus::events::EventScope;
use crate::protocol::TurnEvent;
use crate::store::sessions::SessionMeta;

/// Publishes one session's events for one trace; publishing failures are logged by the ports,
/// never fatal to the turn.
pub struct Emitter {
    ports: Arc<dyn TurnPorts>,
    scope: EventScope,
}

impl Emitter {
    pub fn new(ports: Arc<dyn TurnPorts>, meta: &SessionMeta, trace_id: &str) -> Self {
        Self {
            ports,
            scope: EventScope {
                agent: meta.agent.clone(),
                session: meta.session.clone(),
                user: Some(meta.user.clone()),
                trace_id: trace_id.to_string(),
            },
        }
    }

    /// Who the turn's requests and events are for.
    pub fn scope(&self) -> &EventScope {
        &self.scope
    }

    pub async fn emit(&self, event: TurnEvent) {
        self.ports.emit(&self.scope, event).await;
    }
}
