//! Making writes durable: the chosen mode, and one flush shared by every writer since the last
//! (group commit), per database.
//!
//! - [`Mode::Sync`]: [`Durable::commit`] returns once everything written before it is on disk.
//!   Writers that commit while a flush runs wait for the next one, which covers all of them.
//! - [`Mode::Batch`]: `commit` returns at once; the flusher writes everything out within the
//!   batch interval of the first unflushed write. A crash loses at most that interval.
//!
//! Each database has one flusher thread. sled 0.34's `flush_async` runs on sled's own small
//! pool, which deadlocks when many flushes wait on writes queued behind them (seen with
//! 200–1000 sessions in flight); a single flusher thread that calls the blocking `flush` avoids
//! that and never occupies a runtime thread. The flusher holds the database only while it
//! flushes, so dropping the last [`Durable`] lets the database close.
//!
//! A database also has a write-behind queue ([`Durable::write_behind`], a thread started by
//! its first write) for writes nobody waits for — the session cache under a replicated log;
//! [`Durable::flush_all`] applies what it holds before flushing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::write_behind::WriteBehind;

/// Longest a [`Durable::flush_soon`] write waits for its flush in `sync` mode.
pub const BACKGROUND_FLUSH_EVERY: Duration = Duration::from_millis(20);

/// How often a flush that keeps failing (a full disk) is logged again.
const FAILURE_REPORT_EVERY: Duration = Duration::from_secs(60);

/// Logs failed flushes: the first at once, then at most one line per
/// [`FAILURE_REPORT_EVERY`] with how many failed since, so a full disk under a busy engine
/// (a background flush every few milliseconds) does not flood the log.
#[derive(Default)]
struct FailureReport {
    last_logged: Option<Instant>,
    since_logged: u64,
}

impl FailureReport {
    fn failed(&mut self, error: &sled::Error) {
        self.since_logged += 1;
        if self
            .last_logged
            .is_none_or(|at| at.elapsed() >= FAILURE_REPORT_EVERY)
        {
            tracing::error!(error = %error, failed_flushes = self.since_logged, "flushing the data directory failed; check free disk space and permissions");
            self.last_logged = Some(Instant::now());
            self.since_logged = 0;
        }
    }

    fn recovered(&mut self) {
        if self.last_logged.take().is_some() {
            tracing::info!("flushing the data directory works again");
        }
        self.since_logged = 0;
    }
}

/// How writes become durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A commit returns once its writes are on disk.
    Sync,
    /// Commits return at once; writes are flushed within this interval.
    Batch(Duration),
}

impl Mode {
    /// The mode `engine.durability` and `engine.durability_batch_ms` choose.
    pub fn from_config(engine: &crate::config::EngineConfig) -> Self {
        match engine.durability {
            crate::config::DurabilityConfig::Sync => Mode::Sync,
            crate::config::DurabilityConfig::Batch => {
                Mode::Batch(Duration::from_millis(engine.durability_batch_ms.max(1)))
            }
        }
    }
}

impl From<sled::Db> for Durable {
    /// `db` in [`Mode::Sync`].
    fn from(db: sled::Db) -> Self {
        Durable::new(db, Mode::Sync)
    }
}

/// Why a flush failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("flushing the data directory failed: {0}; check free disk space and permissions")]
pub struct FlushError(pub Arc<str>);

/// Where flushing stands, as the flusher publishes it.
#[derive(Debug, Clone, Default)]
struct Progress {
    /// Every ticket up to this one is on disk.
    durable: u64,
    error: Option<FlushError>,
}

/// What writers and the flusher share, apart from the database.
struct Signal {
    state: Mutex<Pending>,
    wake: Condvar,
}

impl Signal {
    /// See [`Durable::flush_soon`].
    fn flush_soon(&self) {
        let mut pending = lock(&self.state);
        pending.issued += 1;
        if pending.dirty_since.is_none() {
            pending.dirty_since = Some(Instant::now());
            drop(pending);
            self.wake.notify_one();
        }
    }
}

#[derive(Default)]
struct Pending {
    /// Tickets handed out to writes so far.
    issued: u64,
    /// The highest ticket a writer waits for (sync commits, explicit flushes).
    wanted: u64,
    /// When the oldest write not yet covered by a flush happened (batch mode).
    dirty_since: Option<Instant>,
    /// The latest time the next flush may start: a writer waits for a flush that other
    /// writers are likely to ask for soon ([`Durable::ticket_within`]).
    flush_by: Option<Instant>,
    closed: bool,
}

struct Shared {
    db: sled::Db,
    mode: Mode,
    signal: Arc<Signal>,
    progress: watch::Receiver<Progress>,
    stats: Arc<Stats>,
    /// The write-behind queue, started by its first write (`None`: it could not start).
    behind: OnceLock<Option<WriteBehind>>,
}

#[derive(Default)]
struct Stats {
    flushes: AtomicU64,
    flush_nanos: AtomicU64,
}

impl Drop for Shared {
    fn drop(&mut self) {
        lock(&self.signal.state).closed = true;
        self.signal.wake.notify_all();
    }
}

/// A database with its durability mode and flusher; clones share them.
#[derive(Clone)]
pub struct Durable {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable")
            .field("mode", &self.shared.mode)
            .finish()
    }
}

impl std::ops::Deref for Durable {
    type Target = sled::Db;
    fn deref(&self) -> &sled::Db {
        &self.shared.db
    }
}

fn lock(m: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
    // Every update is a few field writes; a panic cannot leave them half done.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Durable {
    /// Wrap `db` and start its flusher thread.
    pub fn new(db: sled::Db, mode: Mode) -> Self {
        let signal = Arc::new(Signal {
            state: Mutex::new(Pending::default()),
            wake: Condvar::new(),
        });
        let (tx, rx) = watch::channel(Progress::default());
        let stats = Arc::new(Stats::default());
        let shared = Arc::new(Shared {
            db,
            mode,
            signal: signal.clone(),
            progress: rx,
            stats: stats.clone(),
            behind: OnceLock::new(),
        });
        let weak = Arc::downgrade(&shared);
        let spawned = std::thread::Builder::new()
            .name("hermes-flush".into())
            .spawn(move || flusher(weak, signal, tx, stats, mode));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the flusher thread; commits will flush inline");
        }
        Self { shared }
    }

    /// The durability mode.
    pub fn mode(&self) -> Mode {
        self.shared.mode
    }

    /// The database.
    pub fn db(&self) -> &sled::Db {
        &self.shared.db
    }

    /// Flushes done so far (for `flushes_per_turn`).
    pub fn flushes(&self) -> u64 {
        self.shared.stats.flushes.load(Ordering::Relaxed)
    }

    /// Total time spent flushing so far.
    pub fn flush_time(&self) -> Duration {
        Duration::from_nanos(self.shared.stats.flush_nanos.load(Ordering::Relaxed))
    }

    /// Make what was written before this call durable as the mode says: wait for it (sync),
    /// or have it flushed within the batch interval (batch).
    pub async fn commit(&self) -> Result<(), FlushError> {
        match self.shared.mode {
            Mode::Sync => self.flush_all().await,
            Mode::Batch(_) => {
                self.commit_lazy();
                Ok(())
            }
        }
    }

    /// Note a write that needs no flush of its own, because a later commit covers it (a queue
    /// entry the turn's next commit makes durable) or losing it is harmless (an ack: the
    /// message comes again and is recognised). Never waits: in `batch` mode it is flushed
    /// within the interval; in `sync` mode by the next commit, or by sled's own periodic
    /// flush (every 500 ms).
    pub fn commit_lazy(&self) {
        if let Mode::Batch(_) = self.shared.mode {
            self.flush_soon();
        }
    }

    /// Have everything written so far flushed in the background, whatever the mode: within
    /// the batch interval in `batch` mode, within [`BACKGROUND_FLUSH_EVERY`] in `sync` mode.
    /// Never waits. For a cache whose guarantee lives elsewhere (the session trees under a
    /// replicated log): it stays fresh, and one flush covers many writers.
    pub fn flush_soon(&self) {
        self.shared.signal.flush_soon();
    }

    /// Apply `write` later, after every write handed over before it, on the database's
    /// write-behind thread (started by the first; see [`super::write_behind`]): for a write
    /// whose caller need not wait for it, as its guarantee lives elsewhere (the session cache
    /// of a replicated log). What it wrote is flushed soon after, as by [`Self::flush_soon`].
    /// Readers of such writes call [`Self::settle_behind`] first.
    pub fn write_behind(&self, write: impl FnOnce() + Send + 'static) {
        let behind = self.shared.behind.get_or_init(|| {
            let signal = self.shared.signal.clone();
            WriteBehind::start(move || signal.flush_soon())
        });
        match behind {
            Some(behind) => behind.hand_over(Box::new(write)),
            None => write(),
        }
    }

    /// Wait until every write handed to [`Self::write_behind`] before this call is applied.
    /// Blocks while the queue holds some (call it off the async runtime); at once otherwise.
    pub fn settle_behind(&self) {
        if let Some(Some(behind)) = self.shared.behind.get() {
            behind.settle();
        }
    }

    /// Wait until everything written before this call is on disk, whatever the mode (the
    /// write-behind queue included).
    pub async fn flush_all(&self) -> Result<(), FlushError> {
        if let Some(Some(behind)) = self.shared.behind.get() {
            if !behind.is_settled() {
                let db = self.clone();
                tokio::task::spawn_blocking(move || db.settle_behind())
                    .await
                    .map_err(|e| FlushError(e.to_string().into()))?;
            }
        }
        let ticket = {
            let mut pending = lock(&self.shared.signal.state);
            pending.issued += 1;
            pending.wanted = pending.issued;
            pending.issued
        };
        self.shared.signal.wake.notify_one();
        self.reached(Ticket(ticket)).await
    }

    /// A claim on everything written before this call, flushed at the latest `max` from now:
    /// a writer that must know its writes are on disk, but can share the flush that another
    /// writer (or its own next commit) asks for meanwhile. [`Durable::reached`] waits for it.
    pub fn ticket_within(&self, max: Duration) -> Ticket {
        let by = Instant::now() + max;
        let ticket = {
            let mut pending = lock(&self.shared.signal.state);
            pending.issued += 1;
            pending.flush_by = Some(pending.flush_by.map_or(by, |at| at.min(by)));
            pending.issued
        };
        self.shared.signal.wake.notify_one();
        Ticket(ticket)
    }

    /// Wait until the writes `ticket` claims are on disk.
    pub async fn reached(&self, ticket: Ticket) -> Result<(), FlushError> {
        let Ticket(ticket) = ticket;
        let mut progress = self.shared.progress.clone();
        let reached = progress
            .wait_for(|p| p.durable >= ticket || p.error.is_some())
            .await
            .map(|p| p.clone());
        match reached {
            Ok(p) if p.durable >= ticket => Ok(()),
            Ok(p) => Err(p.error.unwrap_or_else(|| FlushError("unknown".into()))),
            // The flusher is gone (thread failed to start): flush here, off the runtime.
            Err(_) => {
                let db = self.shared.db.clone();
                tokio::task::spawn_blocking(move || db.flush())
                    .await
                    .map_err(|e| FlushError(e.to_string().into()))?
                    .map(|_| ())
                    .map_err(|e| FlushError(e.to_string().into()))
            }
        }
    }
}

/// What [`Durable::ticket_within`] hands out: the writes issued up to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a ticket is only worth waiting for"]
pub struct Ticket(u64);

/// The flusher: waits for a reason to flush (a waiting writer, or a batch interval that ran
/// out), then covers every write issued so far with one flush.
fn flusher(
    shared: Weak<Shared>,
    signal: Arc<Signal>,
    progress: watch::Sender<Progress>,
    stats: Arc<Stats>,
    mode: Mode,
) {
    let mut durable = 0u64;
    let mut failures = FailureReport::default();
    loop {
        let covered = {
            let mut pending = lock(&signal.state);
            loop {
                if pending.closed {
                    return;
                }
                if pending.wanted > durable {
                    break;
                }
                let every = match mode {
                    Mode::Batch(every) => every,
                    Mode::Sync => BACKGROUND_FLUSH_EVERY,
                };
                let due = [
                    pending.dirty_since.map(|since| since + every),
                    pending.flush_by,
                ]
                .into_iter()
                .flatten()
                .min();
                match due {
                    Some(due) => {
                        let left = due.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        pending = signal
                            .wake
                            .wait_timeout(pending, left)
                            .map(|(g, _)| g)
                            .unwrap_or_else(|e| e.into_inner().0);
                    }
                    None => {
                        pending = signal.wake.wait(pending).unwrap_or_else(|e| e.into_inner());
                    }
                }
            }
            pending.dirty_since = None;
            pending.flush_by = None;
            pending.issued
        };
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let started = Instant::now();
        let result = shared.db.flush();
        drop(shared);
        stats.flushes.fetch_add(1, Ordering::Relaxed);
        let took = started.elapsed();
        crate::telemetry::metrics::flush(took);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        stats.flush_nanos.fetch_add(nanos, Ordering::Relaxed);
        match result {
            Ok(_) => {
                failures.recovered();
                durable = covered;
                progress.send_modify(|p| {
                    p.durable = covered;
                    p.error = None;
                });
            }
            Err(e) => {
                failures.failed(&e);
                let error = FlushError(e.to_string().into());
                // Writers waiting now get the error; the next request tries again.
                lock(&signal.state).wanted = durable;
                progress.send_modify(|p| p.error = Some(error));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &std::path::Path, mode: Mode) -> Durable {
        Durable::new(crate::store::open(dir).unwrap(), mode)
    }

    #[test]
    fn a_flush_that_keeps_failing_is_logged_once_a_minute_with_a_count() {
        let error = sled::Error::Unsupported("no space left on device".into());
        let mut report = FailureReport::default();
        report.failed(&error);
        assert!(report.last_logged.is_some(), "the first failure is logged");
        assert_eq!(report.since_logged, 0);
        report.failed(&error);
        report.failed(&error);
        assert_eq!(
            report.since_logged, 2,
            "the next ones are counted, not logged"
        );
        report.recovered();
        assert!(report.last_logged.is_none());
        report.failed(&error);
        assert_eq!(
            report.since_logged, 0,
            "a new failure after recovering is logged"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_concurrent_sync_commits_share_few_flushes_and_survive() {
        let dir = tempfile::tempdir().unwrap();
        {
            let durable = open(dir.path(), Mode::Sync);
            let mut tasks = Vec::new();
            for i in 0..500u32 {
                let d = durable.clone();
                tasks.push(tokio::spawn(async move {
                    d.insert(i.to_be_bytes(), b"v".to_vec()).unwrap();
                    d.commit().await.unwrap();
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            assert!(
                durable.flushes() < 500,
                "group commit: {} flushes for 500 commits",
                durable.flushes()
            );
        }
        let db = crate::store::open(dir.path())
            .unwrap_or_else(|e| panic!("reopening after the last handle dropped: {e}"));
        assert_eq!(db.len(), 500);
    }

    #[tokio::test]
    async fn batch_commit_returns_at_once_and_flushes_within_the_interval() {
        let dir = tempfile::tempdir().unwrap();
        let durable = open(dir.path(), Mode::Batch(Duration::from_millis(20)));
        durable.insert(b"k", b"v".to_vec()).unwrap();
        let started = Instant::now();
        durable.commit().await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(15));
        let deadline = Instant::now() + Duration::from_secs(5);
        while durable.flushes() == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(durable.flushes(), 1);
        durable.flush_all().await.unwrap();
        assert_eq!(
            durable.flushes(),
            2,
            "an explicit flush flushes in batch mode too"
        );
    }

    #[tokio::test]
    async fn a_ticket_is_flushed_within_its_time_without_another_commit() {
        let dir = tempfile::tempdir().unwrap();
        let durable = open(dir.path(), Mode::Sync);
        durable.insert(b"k", b"v".to_vec()).unwrap();
        let ticket = durable.ticket_within(Duration::from_millis(20));
        tokio::time::timeout(Duration::from_secs(5), durable.reached(ticket))
            .await
            .expect("the flusher flushes by the ticket's time")
            .unwrap();
        assert_eq!(durable.flushes(), 1);
    }

    #[tokio::test]
    async fn a_commit_meanwhile_covers_a_ticket_with_the_same_flush() {
        let dir = tempfile::tempdir().unwrap();
        let durable = open(dir.path(), Mode::Sync);
        durable.insert(b"a", b"v".to_vec()).unwrap();
        let ticket = durable.ticket_within(Duration::from_secs(60));
        durable.insert(b"b", b"v".to_vec()).unwrap();
        durable.commit().await.unwrap();
        tokio::time::timeout(Duration::from_secs(1), durable.reached(ticket))
            .await
            .expect("the commit's flush covers the earlier ticket")
            .unwrap();
        assert_eq!(durable.flushes(), 1, "one flush served both");
    }

    #[tokio::test]
    async fn dropping_the_last_handle_releases_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let durable = open(dir.path(), Mode::Sync);
        durable.insert(b"k", b"v".to_vec()).unwrap();
        durable.commit().await.unwrap();
        drop(durable);
        let again = crate::store::open(dir.path()).unwrap();
        assert_eq!(again.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    }
}
