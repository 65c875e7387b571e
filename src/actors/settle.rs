//! Settling an item of a session partition's inbox ([`crate::bus::cluster`]).
//!
//! The session actor holds a [`Settle`] while it handles the item: until then the item is
//! reported in progress, so the cluster does not hand it to another owner while a long turn
//! runs. Acked when the session is done with it (turn answered, paused or refused). Dropped
//! unsettled (the actor stopped, it lost the session to another owner) it is nak'ed, so the
//! session's owner gets it again at once instead of after the ack wait.

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
}

impl Settle {
    /// Start reporting the item in progress every third of `ack_wait`, on the runtime this is
    /// called on (the I/O runtime).
    pub fn new(acker: Arc<dyn Acker>, ack_wait: Duration) -> Self {
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
        }
    }

    /// The session is done with the item: it is never delivered again.
    pub fn ack(mut self) {
        self.settled = true;
        self.heartbeat.abort();
        let acker = self.acker.clone();
        self.io.spawn(async move {
            if let Err(e) = acker.ack().await {
                tracing::warn!(error = %e, "session item not acked; it will be delivered again and recognised as handled");
            }
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
        self.io.spawn(async move {
            let _ = acker.nak(None).await;
        });
    }
}
