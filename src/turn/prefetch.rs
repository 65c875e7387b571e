//! Memories recalled for a new turn while its user message is still being stored.
//!
//! With a replicated session log (the NATS bus) accepting a message is a round trip to the
//! log, and a turn's recall is another (the memory service first asks the memory log how far
//! the user's memory goes). Neither needs the other, so [`super::inbound::accept`] starts the
//! recall as a task before it appends, and leaves the task here for the turn it started, which
//! waits for it instead of recalling again. The acknowledgement does not wait for the recall.
//! A recall only reads, so one started for a message that is then not stored is stopped (the
//! holds it may have put on memories lapse on their own).

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::task::JoinHandle;

use crate::protocol::RecallHit;

/// The turn id the recall runs for, and its task.
type Slot = Option<(String, JoinHandle<Vec<RecallHit>>)>;

/// The recall started ahead for one turn. One per session actor; clones share it.
#[derive(Clone, Default)]
pub struct Prefetched(Arc<Mutex<Slot>>);

impl Prefetched {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        // Only whole values are stored, so a poisoned lock holds nothing half-written.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep the recall `task` for turn `turn_id`, stopping one an earlier turn left unused.
    pub(super) fn put(&self, turn_id: &str, task: JoinHandle<Vec<RecallHit>>) {
        if let Some((_, unused)) = self.lock().replace((turn_id.to_owned(), task)) {
            unused.abort();
        }
    }

    /// The hits of the recall started ahead for `turn_id`, once; `None` when none was started
    /// for it (or it did not finish).
    pub(super) async fn take(&self, turn_id: &str) -> Option<Vec<RecallHit>> {
        let started = self.lock().take();
        match started {
            Some((id, task)) if id == turn_id => task.await.ok(),
            Some((_, other)) => {
                other.abort();
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recalled() -> JoinHandle<Vec<RecallHit>> {
        tokio::spawn(async { Vec::new() })
    }

    #[tokio::test]
    async fn hits_go_to_their_own_turn_and_only_once() {
        let slot = Prefetched::default();
        slot.put("t1", recalled());
        assert!(
            slot.take("t2").await.is_none(),
            "another turn's hits are not used"
        );
        assert!(slot.take("t1").await.is_none(), "and they are dropped");
        slot.put("t3", recalled());
        assert!(slot.take("t3").await.is_some());
        assert!(slot.take("t3").await.is_none());
    }

    #[tokio::test]
    async fn a_recall_left_unused_is_stopped() {
        let slot = Prefetched::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        slot.put(
            "t1",
            tokio::spawn(async move {
                let _keep = tx;
                std::future::pending::<Vec<RecallHit>>().await
            }),
        );
        slot.put("t2", recalled());
        assert!(rx.await.is_err(), "the first recall was stopped");
    }
}
