//! `hermes serve`: run the chosen actors on a bus until Ctrl-C.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use hermes::actors::ActorSet;
use hermes::config::Config;
use hermes::engine::Engine;

use super::runtime::with_engine_runtime;

#[derive(Args)]
pub struct ServeArgs {
    /// Bus to use: `embedded` or `nats://host:port[,nats://host2:port…]` (overrides [bus].url).
    #[arg(long)]
    bus: Option<String>,
    /// Actors to run here: `all` or a comma list of session, planner, tool-executor,
    /// mcp-bridge, memory-extractor.
    #[arg(long, default_value = "all")]
    actors: String,
    /// Data directory for sled (overrides [engine].data_dir). With NATS each process needs
    /// its own.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Write this file once every actor is serving and remove it on stop (for health checks
    /// in containers and process managers).
    #[arg(long, value_name = "PATH")]
    ready_file: Option<PathBuf>,
    /// Serve Hermes' HTTP endpoint at ADDR, e.g. `127.0.0.1:9464` (overrides [http] listen):
    /// Prometheus metrics at /metrics, the status page at /, and the agents exposed over A2A
    /// (`[agents.<name>] a2a = { expose = true }`) at /a2a/<agent>.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
}

pub fn run(mut config: Config, args: ServeArgs) -> anyhow::Result<()> {
    if let Some(bus) = args.bus {
        config.bus.url = bus;
    }
    if let Some(dir) = args.data_dir {
        config.engine.data_dir = dir;
    }
    if let Some(listen) = args.http {
        config.http.listen = Some(listen);
    }
    let actors = ActorSet::parse(&args.actors).map_err(anyhow::Error::msg)?;
    if let Some(stale) = &args.ready_file {
        // Left behind by a killed process: not ready until this one is.
        let _ = std::fs::remove_file(stale);
    }
    let config = Arc::new(config);
    with_engine_runtime(config.engine.io_threads, |io| async move {
        // Before the engine starts, so its first turns and flushes are counted.
        let _http = start_http(&config, &io).await?;
        let engine = Engine::start(config.clone(), actors, io.clone()).await?;
        if let Some(http) = &_http {
            // Metrics stay up without the page: a least-privilege role may not read the
            // deployment's events (config/nats/hermes.conf: `hermes status --serve` as ops).
            if let Err(e) = show_live(http, &engine, &io).await {
                eprintln!("hermes: no status page on this process ({e:#}); /metrics is served");
            }
        }
        match &_http {
            Some(http) => serve_a2a(http, &engine, &io).await?,
            None => {
                let exposed = hermes::a2a::server::A2aServer::served_agents(&engine.config);
                if !exposed.is_empty() {
                    eprintln!(
                        "hermes: agents exposed over A2A ({}) are not served: start with \
                         --http ADDR (or set [http] listen)",
                        exposed.into_iter().collect::<Vec<_>>().join(", ")
                    );
                }
            }
        }
        report_mcp(&engine);
        let _mcp_http = start_mcp_http(&engine, &io).await?;
        let socket = start_control_socket(&engine, &io).await;
        let _backups = serve_backups(&engine, &io).await;
        eprintln!(
            "hermes: serving [{}] on {} (data: {}); Ctrl-C stops",
            args.actors,
            config.bus.url,
            config.engine.data_dir.display()
        );
        let ready_file = ReadyFile::create(args.ready_file)?;
        println!("ready");
        wait_for_stop_signal().await?;
        eprintln!("hermes: stopping");
        drop(ready_file);
        drop(socket);
        // Stop accepting; the requests in flight finish (at most serving::GRACE).
        let mut draining = Vec::new();
        if let Some(http) = &_mcp_http {
            draining.push(io.spawn(http.shutdown()));
        }
        if let Some(http) = &_http {
            draining.push(io.spawn(http.shutdown()));
        }
        for drained in draining {
            let _ = drained.await;
        }
        engine.shutdown().await;
        Ok(())
    })
}

/// The `--ready-file`: present exactly while this process serves.
struct ReadyFile(Option<PathBuf>);

impl ReadyFile {
    fn create(path: Option<PathBuf>) -> anyhow::Result<Self> {
        if let Some(path) = &path {
            std::fs::write(path, format!("{}\n", std::process::id())).map_err(|e| {
                anyhow::anyhow!(
                    "cannot write the ready file {}: {e}; choose a writable --ready-file path",
                    path.display()
                )
            })?;
        }
        Ok(Self(path))
    }
}

impl Drop for ReadyFile {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Hermes' MCP server over Streamable HTTP when `[mcp.server] http_listen` is set.
async fn start_mcp_http(
    engine: &Engine,
    io: &tokio::runtime::Handle,
) -> anyhow::Result<Option<hermes::mcp::server::http::HttpServer>> {
    let Some(listen) = engine.config.mcp.server.http_listen.clone() else {
        return Ok(None);
    };
    let deps = hermes::mcp::server::ServerDeps::from_config(engine.bus.clone(), &engine.config);
    let host = engine.config.mcp.server.clone();
    let max_connections = engine.config.http.max_connections;
    let http = io
        .spawn(async move {
            hermes::mcp::server::http::start_capped(&listen, deps, &host, max_connections).await
        })
        .await?
        .map_err(anyhow::Error::msg)?;
    eprintln!("hermes: MCP server at {}", http.url());
    Ok(Some(http))
}

/// The control socket in the data directory (`hermes.sock`), through which `hermes
/// sessions|memory|mcp` reach this process while it holds the directory. Without it this
/// process still serves; those commands then say how to reach it.
async fn start_control_socket(
    engine: &Engine,
    io: &tokio::runtime::Handle,
) -> Option<hermes::bus::socket::ControlSocket> {
    engine.db.as_ref()?;
    let bus = engine.bus.clone();
    let dir = engine.config.engine.data_dir.clone();
    let max = engine.config.engine.max_envelope_bytes;
    let connections = engine.config.http.max_connections;
    match io
        .spawn(async move { hermes::bus::socket::listen(bus, &dir, max, connections).await })
        .await
    {
        Ok(Ok(socket)) => Some(socket),
        Ok(Err(e)) => {
            eprintln!("hermes: {e}");
            None
        }
        Err(e) => {
            eprintln!("hermes: the control socket did not start: {e}");
            None
        }
    }
}

/// `hermes.backup` on the embedded bus: `hermes backup` asks this process, through the control
/// socket, for a backup of the data directory it holds. (On NATS the backup reads the streams,
/// and the data directory is a cache of them.)
async fn serve_backups(
    engine: &Engine,
    io: &tokio::runtime::Handle,
) -> Option<hermes::bus::Serving> {
    let db = engine.db.clone()?;
    if engine.bus.backend() != hermes::bus::BusBackend::Embedded {
        return None;
    }
    let bus = engine.bus.clone();
    let service =
        hermes::backup::service::BackupService::new(db, engine.config.engine.data_dir.clone());
    let serving = io
        .spawn(async move {
            bus.serve(hermes::protocol::subjects::BACKUP, "backup", service)
                .await
        })
        .await;
    match serving {
        Ok(Ok(serving)) => Some(serving),
        Ok(Err(e)) => {
            eprintln!("hermes: `hermes backup` cannot reach this process: {e}");
            None
        }
        Err(e) => {
            eprintln!("hermes: `hermes backup` cannot reach this process: {e}");
            None
        }
    }
}

/// Hermes' own HTTP endpoint (`/metrics`) when `--http` or `[http] listen` is set, on the I/O
/// runtime.
pub(super) async fn start_http(
    config: &Config,
    io: &tokio::runtime::Handle,
) -> anyhow::Result<Option<hermes::http::HttpServer>> {
    let Some(listen) = config.http.listen.clone() else {
        return Ok(None);
    };
    let max_connections = config.http.max_connections;
    let http = io
        .spawn(async move { hermes::http::start(&listen, max_connections).await })
        .await??;
    eprintln!("hermes: metrics at {}", http.metrics_url());
    Ok(Some(http))
}

/// The status page at `/` of `http`, fed from the engine's bus.
pub async fn show_live(
    http: &hermes::http::HttpServer,
    engine: &Engine,
    io: &tokio::runtime::Handle,
) -> anyhow::Result<()> {
    io.spawn(http.show_live(engine.bus.clone())).await??;
    eprintln!("hermes: status page at {}", http.page_url());
    Ok(())
}

/// The agents the config exposes over A2A, on `http`'s listener.
pub async fn serve_a2a(
    http: &hermes::http::HttpServer,
    engine: &Engine,
    io: &tokio::runtime::Handle,
) -> anyhow::Result<()> {
    let serving = http.serve_a2a(engine.bus.clone(), engine.config.clone(), engine.db.clone());
    let agents = io.spawn(serving).await??;
    for agent in agents {
        eprintln!(
            "hermes: A2A agent `{agent}` at {}",
            http.a2a_url(agent.as_str())
        );
    }
    Ok(())
}

/// Say loudly which MCP servers failed to start.
pub fn report_mcp(engine: &Engine) {
    if let Some(catalog) = &engine.mcp {
        for s in &catalog.servers {
            match &s.error {
                Some(e) => eprintln!("hermes: MCP server `{}` FAILED to start: {e}", s.name),
                None => eprintln!(
                    "hermes: MCP server `{}` ready ({} tools)",
                    s.name,
                    s.tools.len()
                ),
            }
        }
    }
}

/// Ctrl-C or SIGTERM (what `docker stop` and process managers send).
pub async fn wait_for_stop_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
