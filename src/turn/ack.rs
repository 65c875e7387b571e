//! A user message's acknowledgement that waits for its flush without holding up the turn, and
//! the turn's events that leave together.
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
//!
//! Events are batched as well: an event waits at most [`EVENTS_WITHIN`] for the ones after it,
//! and the turn sends what it holds when it answers, pauses or fails ([`AckSlot::flush`]). A
//! step's events thus leave as one message (one hand-off to an in-process subscriber), and a
//! quick turn's as one or two, while a slow step (a long tool, a streaming model) still shows
//! its events within [`EVENTS_WITHIN`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Mutex};

use super::ports::TurnPorts;
use crate::bus::events::EventScope;
use crate::protocol::TurnEvent;

/// Longest an acknowledgement waits for a flush another commit asks for, before it has one
/// of its own.
pub const ACK_FLUSH_WITHIN: Duration = Duration::from_millis(2);

/// Longest a turn's event waits for those after it before they leave together: short enough
/// that streamed text still looks live, long enough to cover a quick step.
pub const EVENTS_WITHIN: Duration = Duration::from_millis(20);

/// The acknowledgement of a session's last message while it is on its way, and the turn's
/// events held for it or for the ones after them. One per session actor; clones share it.
#[derive(Clone, Default)]
pub struct AckSlot(Arc<Mutex<Held>>);

#[derive(Default)]
struct Held {
    /// Set while an acknowledgement is on its way.
    gate: Option<watch::Receiver<bool>>,
    events: Vec<(EventScope, TurnEvent)>,
    /// A timer will send the events held (set only while no acknowledgement is on its way).
    timer: bool,
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

    /// Publish `event` with the events after it — within [`EVENTS_WITHIN`], or at the turn's
    /// next [`AckSlot::flush`] — and after the acknowledgement on its way, if any.
    pub async fn emit(&self, ports: &Arc<dyn TurnPorts>, scope: &EventScope, event: TurnEvent) {
        let mut held = self.0.lock().await;
        held.events.push((scope.clone(), event));
        if held.gate.is_some() || held.timer {
            return;
        }
        self.send_within(&mut held, ports);
    }

    /// Send what `held` holds within [`EVENTS_WITHIN`] (with the events after it).
    fn send_within(&self, held: &mut Held, ports: &Arc<dyn TurnPorts>) {
        held.timer = true;
        let (slot, ports) = (self.clone(), ports.clone());
        tokio::spawn(async move {
            tokio::time::sleep(EVENTS_WITHIN).await;
            let mut held = slot.0.lock().await;
            held.timer = false;
            if held.gate.is_none() {
                publish_held(&mut held, ports.as_ref()).await;
            }
        });
    }

    /// Publish the events held now — or, while an acknowledgement is on its way, right after
    /// it.
    pub async fn flush(&self, ports: &dyn TurnPorts) {
        let mut held = self.0.lock().await;
        if held.gate.is_none() {
            publish_held(&mut held, ports).await;
        }
    }

    /// The acknowledgement on its way will never leave (its message never reached the log):
    /// the events held for it are dropped, and the session's events go out again as they
    /// come.
    pub async fn drop_held(&self) {
        let mut held = self.0.lock().await;
        held.events.clear();
        held.gate = None;
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

/// Publish the events `held`, in order: each run of one scope (one turn's trace) as one
/// message. Called under the slot's lock, so no event overtakes another.
async fn publish_held(held: &mut Held, ports: &dyn TurnPorts) {
    let mut run: Vec<TurnEvent> = Vec::new();
    let mut run_scope: Option<EventScope> = None;
    for (scope, event) in std::mem::take(&mut held.events) {
        if let Some(current) = run_scope.as_ref().filter(|s| **s != scope) {
            ports.emit_all(current, std::mem::take(&mut run)).await;
        }
        if run_scope.as_ref() != Some(&scope) {
            run_scope = Some(scope);
        }
        run.push(event);
    }
    if let Some(scope) = run_scope {
        ports.emit_all(&scope, run).await;
    }
}

impl AckOpener {
    /// The acknowledgement has left: the events held for it go out as the turn's events do —
    /// with the ones after them, within [`EVENTS_WITHIN`] or at the turn's next
    /// [`AckSlot::flush`] (an acknowledgement that leaves with the answer's commit thus shares
    /// one message of events with the answer).
    pub async fn open(self, ports: &Arc<dyn TurnPorts>) {
        let mut held = self.slot.0.lock().await;
        if held
            .gate
            .as_ref()
            .is_some_and(|gate| gate.same_channel(&self.open.subscribe()))
        {
            held.gate = None;
        }
        self.open.send_replace(true);
        if held.gate.is_none() && !held.events.is_empty() && !held.timer {
            self.slot.send_within(&mut held, ports);
        }
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

    fn texts(ports: &FakePorts) -> Vec<String> {
        emitted(ports)
            .into_iter()
            .map(|e| match e {
                TurnEvent::Delta { text, .. } => text,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    fn fake() -> (Arc<FakePorts>, Arc<dyn TurnPorts>) {
        let ports = Arc::new(FakePorts::default());
        (ports.clone(), ports)
    }

    #[tokio::test]
    async fn events_leave_together_at_a_flush() {
        let (ports, dyn_ports) = fake();
        let slot = AckSlot::default();
        slot.emit(&dyn_ports, &scope(), event(1)).await;
        slot.emit(&dyn_ports, &scope(), event(2)).await;
        assert!(emitted(&ports).is_empty(), "held for the events after them");
        slot.flush(dyn_ports.as_ref()).await;
        assert_eq!(texts(&ports), ["1", "2"]);
        assert_eq!(ports.seen().event_messages, [2], "one message");
        slot.sent().await;
    }

    #[tokio::test(start_paused = true)]
    async fn held_events_leave_by_themselves_within_the_batching_window() {
        let (ports, dyn_ports) = fake();
        let slot = AckSlot::default();
        slot.emit(&dyn_ports, &scope(), event(1)).await;
        tokio::time::sleep(EVENTS_WITHIN / 2).await;
        slot.emit(&dyn_ports, &scope(), event(2)).await;
        assert!(emitted(&ports).is_empty());
        tokio::time::sleep(EVENTS_WITHIN).await;
        assert_eq!(texts(&ports), ["1", "2"]);
        assert_eq!(ports.seen().event_messages, [2], "one message");
    }

    #[tokio::test]
    async fn events_of_two_traces_leave_as_two_messages_in_order() {
        let (ports, dyn_ports) = fake();
        let slot = AckSlot::default();
        let other = EventScope {
            trace_id: "t2".into(),
            ..scope()
        };
        slot.emit(&dyn_ports, &scope(), event(1)).await;
        slot.emit(&dyn_ports, &other, event(2)).await;
        slot.emit(&dyn_ports, &other, event(3)).await;
        slot.flush(dyn_ports.as_ref()).await;
        assert_eq!(texts(&ports), ["1", "2", "3"]);
        assert_eq!(ports.seen().event_messages, [1, 2]);
    }

    #[tokio::test]
    async fn events_wait_for_the_acknowledgement_and_keep_their_order() {
        let (ports, dyn_ports) = fake();
        let slot = AckSlot::default();
        let opener = slot.hold().await;
        assert!(slot.pending().await);
        slot.emit(&dyn_ports, &scope(), event(1)).await;
        slot.emit(&dyn_ports, &scope(), event(2)).await;
        slot.flush(dyn_ports.as_ref()).await;
        assert!(emitted(&ports).is_empty(), "held until the acknowledgement");
        let waiter = tokio::spawn({
            let slot = slot.clone();
            async move { slot.sent().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        opener.open(&dyn_ports).await;
        waiter.await.unwrap();
        assert!(
            emitted(&ports).is_empty(),
            "batched with the events after them"
        );
        slot.emit(&dyn_ports, &scope(), event(3)).await;
        slot.flush(dyn_ports.as_ref()).await;
        assert_eq!(texts(&ports), ["1", "2", "3"]);
        assert_eq!(
            ports.seen().event_messages,
            [3],
            "one message after the ack"
        );
        assert!(!slot.pending().await);
    }

    #[tokio::test(start_paused = true)]
    async fn events_held_for_the_acknowledgement_leave_by_themselves_after_it() {
        let (ports, dyn_ports) = fake();
        let slot = AckSlot::default();
        let opener = slot.hold().await;
        slot.emit(&dyn_ports, &scope(), event(1)).await;
        opener.open(&dyn_ports).await;
        assert!(
            emitted(&ports).is_empty(),
            "waiting for the events after them"
        );
        tokio::time::sleep(EVENTS_WITHIN * 2).await;
        assert_eq!(texts(&ports), ["1"]);
    }

    #[tokio::test]
    async fn a_dropped_opener_lets_waiters_go() {
        let slot = AckSlot::default();
        drop(slot.hold().await);
        slot.sent().await;
    }
}
