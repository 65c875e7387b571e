//! The two runtimes every command uses: a multi-threaded tokio runtime for network I/O and an
//! actix `System` (one thread per arbiter) for the actors.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context;
use hermes::telemetry::otel::Exporting;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// Logs filtered by `filter` to stderr, or to the file `to_file` (appended; created with its
/// folder) — stderr when that cannot be opened. With `traces`, Hermes' spans are exported as
/// well (the log filter does not apply to them). Returns the file logs go to, if any.
pub fn init_tracing(
    filter: &str,
    json: bool,
    traces: Option<&Exporting>,
    to_file: Option<PathBuf>,
) -> Option<PathBuf> {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("warn"));
    let (writer, file) = match to_file.map(|path| (open_log(&path), path)) {
        Some((Ok(file), path)) => (BoxMakeWriter::new(Mutex::new(file)), Some(path)),
        Some((Err(e), path)) => {
            eprintln!(
                "hermes: cannot write logs to {} ({e}); they go to stderr",
                path.display()
            );
            (BoxMakeWriter::new(std::io::stderr), None)
        }
        None => (BoxMakeWriter::new(std::io::stderr), None),
    };
    let logs = tracing_subscriber::fmt::layer().with_writer(writer);
    // A file gets plain text; stderr keeps the default.
    let logs = if file.is_some() {
        logs.with_ansi(false)
    } else {
        logs
    };
    let logs: Box<dyn Layer<Registry> + Send + Sync> = if json {
        logs.json().with_filter(filter).boxed()
    } else {
        logs.with_filter(filter).boxed()
    };
    let mut layers = vec![logs];
    if let Some(traces) = traces {
        layers.push(traces.layer().boxed());
    }
    tracing_subscriber::registry().with(layers).init();
    file
}

fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
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

/// The I/O runtime of a command that runs no engine.
pub fn io_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    io_runtime_with(0)
}

/// The I/O runtime with `engine.io_threads` = `threads` ([`hermes::runtime::io_threads`]).
fn io_runtime_with(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(hermes::runtime::io_threads(threads))
        .max_blocking_threads(hermes::runtime::BLOCKING_THREADS)
        .thread_name("hermes-io")
        .enable_all()
        .build()
        .context("cannot start the I/O runtime")
}

/// Run `body` inside an actix System, handing it the handle of an I/O runtime of
/// `io_threads` workers (`engine.io_threads`).
pub fn with_engine_runtime<F, Fut, T>(io_threads: usize, body: F) -> anyhow::Result<T>
where
    F: FnOnce(tokio::runtime::Handle) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let io = io_runtime_with(io_threads)?;
    let handle = io.handle().clone();
    let actors = hermes::runtime::actor_runtime().context("cannot start the actor runtime")?;
    let system = actix::System::with_tokio_rt(move || actors);
    let result = system.block_on(body(handle));
    actix::System::current().stop();
    io.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}
