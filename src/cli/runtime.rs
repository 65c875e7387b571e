//! The two runtimes every command uses: a multi-threaded tokio runtime for network I/O and an
//! actix `System` (one thread per arbiter) for the actors.

use std::future::Future;

use anyhow::Context;
use hermes::telemetry::otel::Exporting;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// Logs to stderr filtered by `filter`; with `traces`, Hermes' spans are exported as well
/// (the log filter does not apply to them).
pub fn init_tracing(filter: &str, json: bool, traces: Option<&Exporting>) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("warn"));
    let Some(traces) = traces else {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        if json {
            builder.json().init();
        } else {
            builder.init();
        }
        return;
    };
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs: Box<dyn Layer<Registry> + Send + Sync> = if json {
        logs.json().with_filter(filter).boxed()
    } else {
        logs.with_filter(filter).boxed()
    };
    tracing_subscriber::registry()
        .with(vec![logs, traces.layer().boxed()])
        .init();
}

/// The trace exporter of this run, when `[telemetry]` of the `--config` files (or the
/// `OTEL_*` environment) names a receiver. A config file that does not load is reported by
/// the command itself; here it only means no endpoint from the file.
pub fn start_traces(
    configs: &[std::path::PathBuf],
    command: &str,
) -> (Option<Exporting>, Option<String>) {
    let telemetry = hermes::config::Config::load_all(configs)
        .map(|config| config.telemetry)
        .unwrap_or_default();
    let Some(export) = telemetry.resolve(|name| std::env::var(name).ok()) else {
        return (None, None);
    };
    match hermes::telemetry::otel::start(&export, command) {
        Ok(exporting) => (Some(exporting), None),
        Err(e) => (None, Some(e.to_string())),
    }
}

pub fn io_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(hermes::runtime::BLOCKING_THREADS)
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
    let actors = hermes::runtime::actor_runtime().context("cannot start the actor runtime")?;
    let system = actix::System::with_tokio_rt(move || actors);
    let result = system.block_on(body(handle));
    actix::System::current().stop();
    io.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}
