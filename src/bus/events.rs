//! Publishing turn events on `hermes.out.<agent>.<session>.<reader>` — the one place that builds their
//! envelopes, for the turn, the planner's streamed deltas, the memory-extractor's
//! `memory.written` and the router's refusals.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use super::Bus;
use crate::protocol::envelope::Envelope;
use crate::protocol::subjects;
use crate::protocol::{TurnEvent, TurnEvents};

/// Whose events these are: the session, its user and the trace they belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventScope {
    pub agent: String,
    pub session: String,
    /// The session's user; `None` when the event answers a message that named none.
    pub user: Option<String>,
    pub trace_id: String,
    /// Who may read the events: the last token of their subject
    /// ([`crate::config::publishers::reader_of`]).
    pub reader: String,
}

/// Publish `event` for `scope`; a failure is logged, never fatal (events are a view).
/// The envelope id of a turn's `answer` event: always the same for one turn, so a subscriber
/// recognises the answer a session re-sends after a crash (it cannot know whether the first
/// copy left the dying process) and keeps one.
pub fn answer_event_id(turn_id: &str) -> String {
    format!("answer-{turn_id}")
}

pub async fn publish(bus: &dyn Bus, scope: &EventScope, event: TurnEvent) {
    let Some(subject) = subject_of(scope) else {
        return;
    };
    let answer_id = answer_id_in(std::slice::from_ref(&event));
    send(bus, scope, &subject, event, answer_id).await;
}

/// Publish a turn's `events` for `scope` as one message: a `turn.events` envelope (one event
/// alone goes as its `turn.event`). A batch that carries the turn's answer has the answer's
/// envelope id ([`answer_event_id`]), so the answer sent again after a crash is still known
/// by its id. A failure is logged, never fatal.
pub async fn publish_all(bus: &dyn Bus, scope: &EventScope, mut events: Vec<TurnEvent>) {
    if events.len() <= 1 {
        if let Some(event) = events.pop() {
            publish(bus, scope, event).await;
        }
        return;
    }
    let Some(subject) = subject_of(scope) else {
        return;
    };
    let answer_id = answer_id_in(&events);
    send(bus, scope, &subject, TurnEvents { events }, answer_id).await;
}

/// Publish `body` on `subject` in `scope`'s session and trace, under `answer_id` when it
/// carries the answer. In-process subscribers (a `SessionClient` on the embedded bus) take the
/// envelope as it is; the bytes are made only for those that read bytes.
async fn send<T>(
    bus: &dyn Bus,
    scope: &EventScope,
    subject: &str,
    body: T,
    answer_id: Option<String>,
) where
    T: crate::protocol::request::Event + serde::Serialize + std::fmt::Debug + Send + Sync + 'static,
{
    let mut envelope = Envelope::event(body)
        .for_session(&scope.agent, &scope.session, scope.user.as_deref())
        .in_trace(&scope.trace_id);
    let sent = match answer_id {
        Some(id) => {
            envelope.id = id;
            bus.publish_final(subject, Arc::new(envelope)).await
        }
        None => bus.publish_local(subject, Arc::new(envelope)).await,
    };
    if let Err(e) = sent {
        tracing::warn!(%subject, error = %e, "turn events not published");
    }
}

/// Where `scope`'s events go; none (and a warning) for an unaddressable session.
fn subject_of(scope: &EventScope) -> Option<String> {
    match subjects::outbound(&scope.agent, &scope.session, &scope.reader) {
        Ok(subject) => Some(subject),
        Err(e) => {
            tracing::warn!(error = %e, "turn event for an unaddressable session dropped");
            None
        }
    }
}

/// The answer's envelope id, when `events` carry a turn's answer.
fn answer_id_in(events: &[TurnEvent]) -> Option<String> {
    events.iter().find_map(|e| match e {
        TurnEvent::Answer { turn_id, .. } => Some(answer_event_id(turn_id)),
        _ => None,
    })
}

tokio::task_local! {
    /// Where a planner serving a session's request in the session's own task (an in-process
    /// call on the embedded bus) sends streamed text, rather than publishing it: the turn
    /// publishes it in order with its other events (after the message's `accepted`).
    static DELTA_SINK: UnboundedSender<String>;
}

/// Run `call` with `sink` as the delta sink of an in-process planner it reaches.
pub async fn with_delta_sink<F: Future>(sink: UnboundedSender<String>, call: F) -> F::Output {
    DELTA_SINK.scope(sink, call).await
}

/// The delta sink of the session whose request this task serves in-process, if any.
pub fn delta_sink() -> Option<UnboundedSender<String>> {
    DELTA_SINK.try_with(Clone::clone).ok()
}
