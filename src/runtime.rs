//! The threads actors run on: each actix arbiter (and the System's own thread) drives a
//! current-thread tokio runtime whose blocking pool is bounded.
//!
//! tokio's default blocking pool grows to 512 threads per runtime. A burst of new sessions
//! (each loads its log from sled in `spawn_blocking`) grew it past 150 threads on a 2-core
//! machine, each keeping its stack and allocator pages long after the burst: the work is
//! short sled reads and writes, which a few threads serve as fast.

use std::time::Duration;

/// Most threads one actor runtime runs blocking work on at once; more work waits in the
/// runtime's queue.
pub const BLOCKING_THREADS: usize = 8;

/// Worker threads of the I/O runtime for `engine.io_threads` = `configured`: as configured,
/// or (0) one on a machine of one or two CPUs — where the session arbiters already take a
/// thread per CPU, and a second I/O worker mostly adds wake-ups (W1 on NATS, 2 CPUs: a third
/// fewer context switches per turn) — and two on a larger one.
pub fn io_threads(configured: usize) -> usize {
    match configured {
        0 if std::thread::available_parallelism().map_or(1, |n| n.get()) <= 2 => 1,
        0 => 2,
        n => n,
    }
}

/// How long an idle blocking thread stays before it exits.
const BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// A current-thread runtime for an actor thread, timers and I/O enabled, with the bounded
/// blocking pool.
pub fn actor_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .build()
}

/// A new arbiter on an [`actor_runtime`]. Must be called inside an actix `System`.
pub fn new_arbiter() -> std::io::Result<actix::Arbiter> {
    actix::Arbiter::try_with_tokio_rt(actor_runtime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_threads_are_as_configured_or_one_on_a_small_machine_and_two_on_a_larger_one() {
        assert_eq!(io_threads(3), 3);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(io_threads(0), if cpus <= 2 { 1 } else { 2 });
    }
}
