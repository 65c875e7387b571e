//! The multi-threaded tokio runtime tests drive NATS and HTTP from (async-nats' connection
//! tasks must not share a thread with a test that blocks).

/// A multi-threaded runtime with `workers` worker threads, I/O and timers on.
pub fn multi_thread(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
}
