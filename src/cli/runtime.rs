//! The two runtimes every command uses: a multi-threaded tokio runtime for network I/O and an
//! actix `System` (one thread per arbiter) for the actors.

use std::future::Future;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

pub fn init_tracing(filter: &str, json: bool) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

pub fn io_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("hermes-io")
        .enable_all()
        .build()
        .context("cannot start the I/O runtime")
}

/// Run `body` inside an actix System, handing it the I/O runtime's handle.
pub fn with_engine_runtime<F, Fut, T>(body: F) -> anyhow::Result<T>
where
    F: FnOnce(tokio::runtime::Handle) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let io = io_runtime()?;
    let handle = io.handle().clone();
    let system = actix::System::new();
    let result = system.block_on(body(handle));
    actix::System::current().stop();
    io.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}
