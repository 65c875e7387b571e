//! A turn's events: every event of a turn goes out through its [`Emitter`], to the ports,
//! after the acknowledgement of the turn's message and together with the events near it
//! ([`super::ack`]).

use std::sync::Arc;

use super::ack::AckSlot;
use super::ports::TurnPorts;
use super::TurnEnv;
use crate::bus::events::EventScope;
use crate::protocol::TurnEvent;
use crate::store::sessions::SessionMeta;

/// Publishes one session's events for one trace; publishing failures are logged by the ports,
/// never fatal to the turn.
pub struct Emitter {
    ports: Arc<dyn TurnPorts>,
    scope: EventScope,
    ack: AckSlot,
}

impl Emitter {
    pub fn new(env: &TurnEnv, meta: &SessionMeta, trace_id: &str) -> Self {
        Self {
            ports: env.ports.clone(),
            ack: env.ack.clone(),
            scope: scope_of(env, meta, trace_id),
        }
    }

    /// Who the turn's requests and events are for.
    pub fn scope(&self) -> &EventScope {
        &self.scope
    }

    /// Publish `event` with the events after it (within [`super::ack::EVENTS_WITHIN`] or at
    /// the next [`Emitter::flush`]), after the acknowledgement of the turn's message if that
    /// is still on its way.
    pub async fn emit(&self, event: TurnEvent) {
        self.ack.emit(&self.ports, &self.scope, event).await;
    }

    /// Send the events held now: the turn answered, paused or failed, and nothing follows
    /// them soon.
    pub async fn flush(&self) {
        self.ack.flush(self.ports.as_ref()).await;
    }
}

/// The session `meta` and its user, in trace `trace_id`: whom a turn's events and requests
/// are for.
pub(super) fn scope_of(env: &TurnEnv, meta: &SessionMeta, trace_id: &str) -> EventScope {
    EventScope {
        agent: meta.agent.clone(),
        session: meta.session.clone(),
        user: Some(meta.user.clone()),
        trace_id: trace_id.to_string(),
        reader: crate::config::publishers::reader_of(&env.config.bus.publishers, Some(&meta.user)),
    }
}
