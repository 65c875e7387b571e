//! Making writes durable: one sled flush at a time per process, shared by every waiter.
//!
//! sled 0.34's `flush_async` runs `flush` on sled's own small I/O thread pool, and `flush`
//! blocks until the log buffers are written — by tasks on that same pool. With many sessions
//! flushing at once the pool fills with waiting flushes and nothing is left to write: a
//! deadlock (seen with 200–1000 sessions in flight). So flushes run on tokio's blocking pool,
//! one at a time, and waiters whose write an already-finished flush covered return at once
//! (group commit). The gate is per process because sled's pool is.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Mutex;

/// Serialises flushes (see the module doc for why this is process-wide).
static GATE: Mutex<()> = Mutex::const_new(());
/// Tickets handed to writers after their write.
static ISSUED: AtomicU64 = AtomicU64::new(0);
/// Every ticket up to this one is covered by a finished flush.
static DURABLE: AtomicU64 = AtomicU64::new(0);

/// Returns once everything written to `db` before the call is on disk.
pub async fn flush(db: &sled::Db) -> Result<(), sled::Error> {
    let ticket = ISSUED.fetch_add(1, Ordering::SeqCst) + 1;
    let _turn = GATE.lock().await;
    if DURABLE.load(Ordering::SeqCst) >= ticket {
        return Ok(());
    }
    // Every ticket issued so far belongs to a write that happened before this flush starts.
    let covered = ISSUED.load(Ordering::SeqCst);
    let db = db.clone();
    tokio::task::spawn_blocking(move || db.flush())
        .await
        .map_err(|e| sled::Error::ReportableBug(format!("flush task failed: {e}")))??;
    DURABLE.fetch_max(covered, Ordering::SeqCst);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_concurrent_flushes_all_complete_and_data_survives() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = crate::store::open(dir.path()).unwrap();
            let mut tasks = Vec::new();
            for i in 0..500u32 {
                let db = db.clone();
                tasks.push(tokio::spawn(async move {
                    db.insert(i.to_be_bytes(), b"v".to_vec()).unwrap();
                    flush(&db).await.unwrap();
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        }
        let db = crate::store::open(dir.path()).unwrap();
        assert_eq!(db.len(), 500);
    }
}
