//! Publishing a session's turn events on `hermes.out.<agent>.<session>`.

use crate::bus::{rpc, SharedBus};
use crate::protocol::envelope::Envelope;
use crate::protocol::subjects;
use crate::protocol::{kinds, TurnEvent};
use crate::store::sessions::SessionMeta;

/// Publishes one session's events; publishing failures are logged, never fatal to the turn.
pub struct Emitter {
    bus: SharedBus,
    subject: Option<String>,
    agent: String,
    session: String,
    user: String,
    trace_id: String,
}

impl Emitter {
    pub fn new(bus: SharedBus, meta: &SessionMeta, trace_id: &str) -> Self {
        Self {
            bus,
            subject: subjects::outbound(&meta.agent, &meta.session).ok(),
            agent: meta.agent.clone(),
            session: meta.session.clone(),
            user: meta.user.clone(),
            trace_id: trace_id.to_string(),
        }
    }

    pub async fn emit(&self, event: TurnEvent) {
        let Some(subject) = &self.subject else {
            return;
        };
        let env = Envelope::new(kinds::TURN_EVENT, event)
            .for_session(&self.agent, &self.session, Some(&self.user))
            .in_trace(&self.trace_id);
        if let Err(e) = rpc::publish(self.bus.as_ref(), subject, &env).await {
            tracing::warn!(subject, error = %e, "turn event not published");
        }
    }
}
