//! Settling an item of a session partition's inbox ([`crate::bus::cluster`]).
//!
//! The session actor holds a [`Settle`] while it handles the item: until then the item is
//! reported in progress, so the cluster does not hand it to another owner while a long turn
//! runs. Acked when the session is done with it (turn answered, paused or refused). Dropped
//! unsettled (the actor stopped, it lost the session to another owner) it is nak'ed, so the
//! session's owner gets it again soon instead of after the ack wait — after a delay that
//! doubles with each delivery, so an item that keeps failing does not spin.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::bus::Acker;

pub struct Settle {
    acker: Arc<dyn Acker>,
    heartbeat: JoinHandle<()>,
    io: Handle,
    settled: bool,
    /// How long to wait before the item comes back if it is dropped unsettled.
    retry_after: Duration,
    /// Which delivery of the item this is (1: the first).
    delivery: u64,
    /// When the item was first stored (its publisher has waited since).
    stored: std::time::Instant,
    /// Where it sits in the inbox, when the cluster says ([`crate::bus::cluster::OwnedItem::seq`]).
    seq: Option<u64>,
}

/// Acks handed to the I/O runtime and not yet given to the bus: a graceful stop waits for
/// them ([`acks_sent`]), since an answered turn's ack may be the note that its extraction is
/// queued (`TurnRecord::inbox_item`).
static ACKS_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Wait (at most `within`) until every ack handed out has been given to the bus.
pub async fn acks_sent(within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    while ACKS_IN_FLIGHT.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// First redelivery delay of an item dropped unsettled; doubled per delivery up to the cap.
const FIRST_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(10);

fn retry_after(delivery: u64) -> Duration {
    let doublings = u32::try_from(delivery.saturating_sub(1).min(10)).unwrap_or(10);
    (FIRST_RETRY * 2u32.pow(doublings)).min(MAX_RETRY)
}

impl Settle {
    /// Start reporting the item (on its `delivery`th delivery) in progress every third of
    /// `ack_wait`, on the runtime this is called on (the I/O runtime).
    pub fn new(acker: Arc<dyn Acker>, ack_wait: Duration, delivery: u64) -> Self {
        let io = Handle::current();
        let every = (ack_wait / 3).max(Duration::from_millis(100));
        let beating = acker.clone();
        let heartbeat = io.spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = beating.in_progress().await {
                    tracing::warn!(error = %e, "could not report a session item in progress");
                }
            }
        });
        Self {
            acker,
            heartbeat,
            io,
            settled: false,
            retry_after: retry_after(delivery),
            delivery,
            stored: std::time::Instant::now(),
            seq: None,
        }
    }

    /// The item sits at `seq` in the inbox.
    #[must_use]
    pub fn at(mut self, seq: Option<u64>) -> Self {
        self.seq = seq;
        self
    }

    /// Where the item sits in the inbox, if known: while it is not acked,
    /// [`crate::bus::cluster::Cluster::inbox_holds`] says so.
    pub fn seq(&self) -> Option<u64> {
        self.seq
    }

    /// Which delivery of the item this is (1: the first).
    pub fn delivery(&self) -> u64 {
        self.delivery
    }

    /// The item was stored `age` ago (before this delivery).
    #[must_use]
    pub fn stored_ago(mut self, age: Duration) -> Self {
        self.stored = std::time::Instant::now()
            .checked_sub(age)
            .unwrap_or(self.stored);
        self
    }

    /// How long the item's publisher has waited.
    pub fn waited(&self) -> Duration {
        self.stored.elapsed()
    }

    /// The session is done with the item: it is never delivered again.
    pub fn ack(mut self) {
        self.settled = true;
        self.heartbeat.abort();
        let acker = self.acker.clone();
        // Unconfirmed: a lost ack means a redelivery, which the session recognises.
        ACKS_IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
        self.io.spawn(async move {
            if let Err(e) = acker.ack_unconfirmed().await {
                tracing::warn!(error = %e, "session item not acked; it will be delivered again and recognised as handled");
            }
            ACKS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        self.heartbeat.abort();
        if self.settled {
            return;
        }
        let acker = self.acker.clone();
        let delay = self.retry_after;
        self.io.spawn(async move {
            let _ = acker.nak(Some(delay)).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_that_keeps_failing_comes_back_ever_later_up_to_a_cap() {
        assert_eq!(retry_after(1), Duration::from_millis(100));
        assert_eq!(retry_after(2), Duration::from_millis(200));
        assert_eq!(retry_after(5), Duration::from_millis(1600));
        assert_eq!(retry_after(60), MAX_RETRY);
        assert_eq!(retry_after(u64::MAX), MAX_RETRY);
    }
}
