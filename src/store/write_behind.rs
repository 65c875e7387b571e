//! Writes whose caller need not wait for them, applied in the order they were handed over on
//! one thread of their own: a database's write-behind queue ([`super::durability::Durable::write_behind`]).
//!
//! What it is for: the session trees under a replicated log are a cache of that log (see
//! [`super::sessions`]); a save is done once the log holds it, and writing the cache on the
//! turn's thread — sled's inserts, and the log buffer's `write(2)` that sled does on whichever
//! thread fills it — only delays the turn. Readers of what was handed over call
//! [`WriteBehind::settle`] first, so they still read their writes.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};

/// One write: it deals with its own failure (a cache that cannot be written costs speed, so it
/// is logged where the write is made).
pub type Write = Box<dyn FnOnce() + Send>;

/// Writes a queue holds at most: a caller handing over one more waits for room, as it would
/// have waited for its own write inline (a disk that stalls slows the turns, it does not fill
/// the memory).
const QUEUE_BOUND: usize = 4096;

/// The queue and its thread. Dropping it lets the thread apply what is queued and end.
pub struct WriteBehind {
    queue: mpsc::SyncSender<Write>,
    progress: Arc<Progress>,
}

#[derive(Default)]
struct Progress {
    /// Writes handed over so far.
    handed: AtomicU64,
    /// Writes applied so far (all of those handed over first, as the queue is in order).
    applied: AtomicU64,
    /// Readers waiting in [`WriteBehind::settle`]: the thread only signals when there are any.
    waiting: AtomicUsize,
    lock: Mutex<()>,
    done: Condvar,
}

impl WriteBehind {
    /// Start the thread; `after_batch` runs each time it has emptied the queue (to have what
    /// it wrote flushed). `None` when the thread cannot be started: the caller writes inline.
    pub fn start(after_batch: impl Fn() + Send + 'static) -> Option<Self> {
        let (tx, rx) = mpsc::sync_channel::<Write>(QUEUE_BOUND);
        let progress = Arc::new(Progress::default());
        let shared = progress.clone();
        let spawned = std::thread::Builder::new()
            .name("hermes-cache".into())
            .spawn(move || {
                while let Ok(write) = rx.recv() {
                    shared.apply(write);
                    while let Ok(write) = rx.try_recv() {
                        shared.apply(write);
                    }
                    after_batch();
                }
            });
        match spawned {
            Ok(_) => Some(Self {
                queue: tx,
                progress,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the write-behind thread; cache writes are made inline");
                None
            }
        }
    }

    /// Queue `write` after every write handed over before it (waiting for room in a full
    /// queue); run it here if the thread is gone.
    pub fn hand_over(&self, write: Write) {
        // Counted before it is sent, so a reader's target always includes it.
        self.progress.handed.fetch_add(1, Ordering::SeqCst);
        if let Err(mpsc::SendError(write)) = self.queue.send(write) {
            self.progress.apply(write);
        }
    }

    /// Wait until every write handed over before this call is applied. Blocks (briefly: the
    /// queue holds what the thread has not reached yet), so async callers run it off the
    /// runtime; returns at once when nothing is queued.
    pub fn settle(&self) {
        let target = self.progress.handed.load(Ordering::SeqCst);
        let progress = &self.progress;
        if progress.applied.load(Ordering::SeqCst) >= target {
            return;
        }
        let mut guard = progress.lock.lock().unwrap_or_else(|e| e.into_inner());
        progress.waiting.fetch_add(1, Ordering::SeqCst);
        while progress.applied.load(Ordering::SeqCst) < target {
            guard = progress.done.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
        progress.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether every write handed over so far is applied.
    pub fn is_settled(&self) -> bool {
        let progress = &self.progress;
        progress.applied.load(Ordering::SeqCst) >= progress.handed.load(Ordering::SeqCst)
    }
}

impl Progress {
    fn apply(&self, write: Write) {
        // A write that panics must not stop the queue (nor leave its readers waiting).
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(write)).is_err() {
            tracing::error!("a write-behind write panicked; the cache it wrote may be behind the log, which the next load repairs");
        }
        self.applied.fetch_add(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    #[test]
    fn writes_are_applied_in_order_and_settle_waits_for_those_handed_over_before_it() {
        let batches = Arc::new(AtomicUsize::new(0));
        let counted = batches.clone();
        let behind = WriteBehind::start(move || {
            counted.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(AtomicBool::new(false));
        {
            let gate = gate.clone();
            behind.hand_over(Box::new(move || {
                while !gate.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }));
        }
        for i in 0..100 {
            let seen = seen.clone();
            behind.hand_over(Box::new(move || seen.lock().unwrap().push(i)));
        }
        assert!(!behind.is_settled(), "the first write holds the queue");
        assert!(seen.lock().unwrap().is_empty());
        let opener = {
            let gate = gate.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                gate.store(true, Ordering::SeqCst);
            })
        };
        behind.settle();
        assert_eq!(*seen.lock().unwrap(), (0..100).collect::<Vec<_>>());
        assert!(behind.is_settled());
        opener.join().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while batches.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            batches.load(Ordering::SeqCst) >= 1,
            "an emptied queue asks for a flush"
        );
    }

    #[test]
    fn a_write_that_panics_does_not_stop_the_queue() {
        let behind = WriteBehind::start(|| {}).unwrap();
        let after = Arc::new(AtomicBool::new(false));
        behind.hand_over(Box::new(|| panic!("a broken write")));
        let flag = after.clone();
        behind.hand_over(Box::new(move || flag.store(true, Ordering::SeqCst)));
        behind.settle();
        assert!(after.load(Ordering::SeqCst));
    }
}
