//! A user message's acknowledgement that waits for its flush without holding up the turn.
//!
//! In `sync` mode a message is acknowledged only once it is on disk. Rather than a flush of
//! its own, the acknowledgement waits for the first flush that covers it: the turn's next
//! commit point (its answer, a pause, a call that acts on the world) or [`ACK_FLUSH_WITHIN`],
//! whichever comes first. The turn goes on meanwhile, so a quick turn costs one flush, not
//! two. The publisher still hears `accepted` before anything else of the turn: events the
//! turn emits meanwhile are held and published right after the acknowledgement, and a call
//! that may act on the world first flushes and waits for it ([`AckSlot::sent`]). Should that
//! flush fail (a full disk), the publisher hears `store_failed`, and the turn's own next
//! commit fails the same way.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Mutex};

use super::ports::TurnPorts;
use crate::bus::events::EventScope;
use crate::protocol::TurnEvent;

/// Longest an acknowledgement waits for a flush another commit asks for, before it has one
/// of its own.
pub const ACK_FLUSH_WITHIN: Duration = Duration::from_millis(2);

/// The acknowledgement of a session's last message while it is on its way, and the turn's
/// events held for it. One per session actor; clones share it.
#[derive(Clone, Default)]
pub struct AckSlot(Arc<Mutex<Held>>);

#[derive(Default)]
struct Held {
    /// Set while an acknowledgement is on its way.
    gate: Option<watch::Receiver<bool>>,
    events: Vec<(EventScope, TurnEvent)>,
}

/// Opens an [`AckSlot`] once the acknowledgement has left.
pub struct AckOpener {
    slot: AckSlot,
    open: watch::Sender<bool>,
}

impl AckSlot {
    /// An acknowledgement is on its way: events wait for it until [`AckOpener::open`].
    pub async fn hold(&self) -> AckOpener {
        let (open, gate) = watch::channel(false);
        self.0.lock().await.gate = Some(gate);
        AckOpener {
            slot: self.clone(),
            open,
        }
    }

    /// Whether an acknowledgement is on its way.
    pub async fn pending(&self) -> bool {
        self.0.lock().await.gate.is_some()
    }

    /// Publish `event` now, or right after the acknowledgement on its way.
    pub async fn emit(&self, ports: &dyn TurnPorts, scope: &EventScope, event: TurnEvent) {
        let mut held = self.0.lock().await;
        if held.gate.is_some() {
            held.events.push((scope.clone(), event));
            return;
        }
        // Published under the lock, so no event overtakes those the opener publishes.
        ports.emit(scope, event).await;
    }

    /// Wait until the acknowledgement on its way, if any, has left with the events held for
    /// it.
    pub async fn sent(&self) {
        let gate = self.0.lock().await.gate.clone();
        if let Some(mut gate) = gate {
            // A dropped opener (its task ended without a word) counts as opened.
            let _ = gate.wait_for(|sent| *sent).await;
        }
    }
}

impl AckOpener {
    /// The acknowledgement has left: publish the events held for it, in order, and let the
    /// turn's events go straight out again.
    pub async fn open(self, ports: &dyn TurnPorts) {
        let mut held = self.slot.0.lock().await;
        for (scope, event) in std::mem::take(&mut held.events) {
            ports.emit(&scope, event).await;
        }
        if held
            .gate
            .as_ref()
            .is_some_and(|gate| gate.same_channel(&self.open.subscribe()))
        {
            held.gate = None;
        }
        self.open.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::fake::FakePorts;

    fn emitted(ports: &FakePorts) -> Vec<TurnEvent> {
        ports.seen().events.clone()
    }

    fn scope() -> EventScope {
        EventScope {
            agent: "a".into(),
            session: "s".into(),
            user: Some("u".into()),
            trace_id: "t".into(),
            reader: "u".into(),
        }
    }

    fn event(n: u32) -> TurnEvent {
        TurnEvent::Delta {
            turn_id: "turn".into(),
            text: n.to_string(),
        }
    }

    #[tokio::test]
    async fn events_go_straight_out_without_an_acknowledgement_on_its_way() {
        let ports = FakePorts::default();
        let slot = AckSlot::default();
        slot.emit(&ports, &scope(), event(1)).await;
        assert_eq!(emitted(&ports).len(), 1);
        slot.sent().await;
    }

    #[tokio::test]
    async fn events_wait_for_the_acknowledgement_and_keep_their_order() {
        let ports = FakePorts::default();
        let slot = AckSlot::default();
        let opener = slot.hold().await;
        assert!(slot.pending().await);
        slot.emit(&ports, &scope(), event(1)).await;
        slot.emit(&ports, &scope(), event(2)).await;
        assert!(emitted(&ports).is_empty(), "held until the acknowledgement");
        let waiter = tokio::spawn({
            let slot = slot.clone();
            async move { slot.sent().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        opener.open(&ports).await;
        waiter.await.unwrap();
        slot.emit(&ports, &scope(), event(3)).await;
        let texts: Vec<String> = emitted(&ports)
            .into_iter()
            .map(|e| match e {
                TurnEvent::Delta { text, .. } => text,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts, ["1", "2", "3"]);
        assert!(!slot.pending().await);
    }

    #[tokio::test]
    async fn a_dropped_opener_lets_waiters_go() {
        let slot = AckSlot::default();
        drop(slot.hold().await);
        slot.sent().await;
    }
}
