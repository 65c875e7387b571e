//! `hermes mcp …`: Hermes' own MCP server (`serve --stdio` / `--http`), the status of mounted
//! servers (`status`), the audit trail (`audit`), OAuth logins (`login`, `logout`), a small
//! client (`probe`, [`super::mcp_probe`]) and the demo's catalog server (`catalog-server`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};

use hermes::actors::ActorSet;
use hermes::bus::SharedBus;
use hermes::config::Config;
use hermes::engine::Engine;
use hermes::mcp::audit::{AuditLog, AuditRecord};
use hermes::mcp::server::{self, Principal, ServerDeps};
use hermes::protocol::request::McpCatalogRequest;
use hermes::protocol::{McpAuditRequest, McpCatalog};

use super::reach::{self, Asker, ReachArgs, Way};
use super::runtime::{io_runtime, with_engine_runtime};

#[derive(Subcommand)]
pub enum McpCommand {
    /// Run the demo's product-catalog MCP server on stdio (the MCP-bridge starts it).
    CatalogServer,
    /// Run Hermes' own MCP server (memory tools, memories as resources, memory_qa prompt).
    ///
    /// `--stdio` serves one client on stdin/stdout as the principal `--user`; `--http ADDR`
    /// serves Streamable HTTP at http://ADDR/mcp with the bearer tokens of [mcp.server].
    /// On the embedded bus the memory service runs in this process; with `--bus nats://…`
    /// it uses the one running on the bus.
    Serve(ServeArgs),
    /// Show the MCP servers the bridge mounted: status, tools, resources, prompts, errors.
    /// Exits with 1 if any server is not ready.
    ///
    /// Asks a running deployment (`--bus nats://…`, or `[bus] url`) or the `hermes serve`
    /// holding the data directory; with neither running, mounts the configured servers here
    /// to try them.
    Status(StatusArgs),
    /// Show the latest MCP audit records (tools/call, resources/read, refusals), newest first.
    ///
    /// Asks a running deployment (`--bus nats://…`, or `[bus] url`: the shared audit stream)
    /// or the `hermes serve` holding the data directory; else reads the data directory.
    Audit(AuditArgs),
    /// Authorise Hermes at a remote MCP server behind OAuth 2.1, once: prints a URL to open
    /// in a browser, takes the redirect on a loopback port, saves the tokens owner-only.
    Login(super::mcp_login::LoginArgs),
    /// Forget the OAuth tokens `hermes mcp login` saved for a server.
    Logout(super::mcp_login::LogoutArgs),
    /// Connect to a Streamable HTTP MCP server, list its tools and call one (the conformance
    /// suite's client: it appends the URL and sets MCP_CONFORMANCE_SCENARIO).
    Probe(super::mcp_probe::ProbeArgs),
}

#[derive(Args)]
pub struct BusArgs {
    /// `embedded` (start the bridge here) or `nats://host:port` (ask the running bridge).
    #[arg(long)]
    bus: Option<String>,
    /// Data directory for sled (embedded bus).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    bus: BusArgs,
    /// Serve one MCP client on stdin/stdout.
    #[arg(long, conflicts_with = "http")]
    stdio: bool,
    /// Serve Streamable HTTP on this address (overrides [mcp.server] http_listen).
    #[arg(long)]
    http: Option<String>,
    /// The principal of a stdio session.
    #[arg(long, default_value = "local")]
    user: String,
    /// Roles of the stdio principal (from [mcp.server.roles]); none = every tool.
    #[arg(long = "role")]
    roles: Vec<String>,
}

#[derive(Args)]
pub struct StatusArgs {
    #[command(flatten)]
    reach: ReachArgs,
    /// Print the catalog as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct AuditArgs {
    #[command(flatten)]
    reach: ReachArgs,
    /// How many records, newest first.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(config: Vec<PathBuf>, command: McpCommand) -> anyhow::Result<()> {
    match command {
        McpCommand::CatalogServer => io_runtime().and_then(|rt| {
            rt.block_on(hermes::mcp::catalog_server::run_stdio())
                .map_err(anyhow::Error::from)
        }),
        McpCommand::Serve(args) => serve(load(&config, &args.bus)?, args),
        McpCommand::Status(args) => {
            let mut config = Config::load_all(&config)?;
            args.reach.apply(&mut config);
            status(config, args.json)
        }
        McpCommand::Audit(args) => {
            let mut config = Config::load_all(&config)?;
            args.reach.apply(&mut config);
            audit(config, &args)
        }
        McpCommand::Login(args) => super::mcp_login::run_login(&Config::load_all(&config)?, args),
        McpCommand::Logout(args) => super::mcp_login::run_logout(&Config::load_all(&config)?, args),
        McpCommand::Probe(args) => super::mcp_probe::run(args),
    }
}

fn load(paths: &[PathBuf], args: &BusArgs) -> anyhow::Result<Config> {
    let mut config = Config::load_all(paths)?;
    if let Some(bus) = &args.bus {
        config.bus.url = bus.clone();
    }
    if let Some(dir) = &args.data_dir {
        config.engine.data_dir = dir.clone();
    }
    Ok(config)
}

/// The bus, and the engine when it runs here (embedded bus: `actors` start in this process).
async fn bus_for(
    config: Arc<Config>,
    actors: ActorSet,
    io: tokio::runtime::Handle,
) -> anyhow::Result<(SharedBus, Option<Engine>)> {
    if config.bus.url == "embedded" {
        let engine = Engine::start(config, actors, io).await?;
        Ok((engine.bus.clone(), Some(engine)))
    } else {
        let url = config.bus.url.clone();
        let (cluster, credentials) = (
            config.cluster.options(),
            config.bus.auth.resolve().map_err(anyhow::Error::msg)?,
        );
        let bus = io
            .spawn(
                async move { hermes::bus::connect_with(&url, None, cluster, &credentials).await },
            )
            .await??;
        Ok((bus, None))
    }
}

const LOCAL_MEMORY: ActorSet = ActorSet {
    session: false,
    planner: false,
    tool_executor: true,
    mcp_bridge: true,
    memory_extractor: true,
};

fn serve(mut config: Config, args: ServeArgs) -> anyhow::Result<()> {
    if let Some(http) = &args.http {
        config.mcp.server.http_listen = Some(http.clone());
    }
    if !args.stdio && config.mcp.server.http_listen.is_none() {
        anyhow::bail!(
            "say how to serve: --stdio, or --http 127.0.0.1:8765 (or [mcp.server] http_listen)"
        );
    }
    let config = Arc::new(config);
    with_engine_runtime(config.engine.io_threads, |io| async move {
        let (bus, engine) = bus_for(config.clone(), LOCAL_MEMORY, io.clone()).await?;
        let deps = ServerDeps::from_config(bus, &config);
        if args.stdio {
            let principal = if args.roles.is_empty() {
                Principal::trusted(&args.user)
            } else {
                Principal::with_roles(&args.user, &args.roles, &config.mcp.server.roles)
            };
            let transport = rmcp::transport::stdio_pipes();
            io.spawn(server::serve_as(deps, principal, transport))
                .await??;
        } else {
            let listen = config.mcp.server.http_listen.clone().unwrap_or_default();
            let host = config.mcp.server.clone();
            let max_connections = config.http.max_connections;
            let http = io
                .spawn(async move {
                    server::http::start_capped(&listen, deps, &host, max_connections).await
                })
                .await?
                .map_err(anyhow::Error::msg)?;
            eprintln!("hermes: MCP server at {}; Ctrl-C stops", http.url());
            println!("ready {}", http.url());
            super::serve::wait_for_stop_signal().await?;
        }
        if let Some(engine) = engine {
            engine.shutdown().await;
        }
        Ok(())
    })
}

const BRIDGE_ONLY: ActorSet = ActorSet {
    session: false,
    planner: false,
    tool_executor: false,
    mcp_bridge: true,
    memory_extractor: false,
};

/// The catalog of the running bridge (over NATS, or through the control socket of the serve
/// holding the data directory); with none running, of a bridge started here for the purpose.
fn status(config: Config, json: bool) -> anyhow::Result<()> {
    let auth = super::mcp_login::auth_states(&config);
    let config = Arc::new(config);
    let catalog = with_engine_runtime(config.engine.io_threads, |io| async move {
        let asking = config.clone();
        let (way, remote) = io
            .spawn(async move {
                let way = reach::pick(&asking).await;
                let remote = Asker::remote(&asking, &way).await?;
                anyhow::Ok((way, remote))
            })
            .await??;
        if let Some(asker) = remote {
            return io
                .spawn(async move { asker.ask(McpCatalogRequest).await })
                .await?;
        }
        let Way::Directory(dir) = way else {
            anyhow::bail!("no way to reach an MCP bridge");
        };
        // Nobody serves the data directory: mount the configured servers here to try them.
        let engine = Engine::start(config.clone(), BRIDGE_ONLY, io.clone()).await?;
        let asker = Asker::local(engine.bus.clone(), &config, &dir, Vec::new());
        let reply = io
            .spawn(async move { asker.ask(McpCatalogRequest).await })
            .await?;
        engine.shutdown().await;
        reply
    })?;
    if json {
        println!("{}", serde_json::to_string(&catalog)?);
    } else {
        print_status(&catalog, &auth);
    }
    let down: Vec<_> = catalog
        .servers
        .iter()
        .filter(|s| s.status != "ready")
        .map(|s| s.name.clone())
        .collect();
    if down.is_empty() {
        Ok(())
    } else {
        anyhow::bail!("MCP server(s) not ready: {}", down.join(", "))
    }
}

fn print_status(catalog: &McpCatalog, auth: &[(String, String)]) {
    if catalog.servers.is_empty() {
        println!("no MCP servers configured ([[mcp.servers]])");
    }
    for s in &catalog.servers {
        let pid = s.pid.map(|p| format!(" pid {p}")).unwrap_or_default();
        println!(
            "{:<16} {:<12} {:<5}{pid}  tools {}  resources {}  prompts {}  reconnects {}",
            s.name,
            s.status.to_uppercase(),
            s.transport,
            s.tools.len(),
            s.resources.len(),
            s.prompts.len(),
            s.reconnects
        );
        if let Some((_, state)) = auth.iter().find(|(name, _)| *name == s.name) {
            println!("    auth: {state}");
        }
        if let Some(error) = &s.error {
            println!("    error: {error}");
        }
        if let Some(protocol) = &s.protocol {
            let extensions = if s.extensions.is_empty() {
                "none".to_string()
            } else {
                s.extensions.join(", ")
            };
            println!("    protocol {protocol}  extensions {extensions}");
        }
        for tool in &s.tools {
            println!("    tool {}__{}", s.name, tool.name);
        }
    }
}

/// From the running bridge (over NATS: the shared audit stream; or through the control
/// socket of the serve holding the data directory); else from the data directory's sled store.
fn audit(config: Config, args: &AuditArgs) -> anyhow::Result<()> {
    let limit = args.limit;
    let records = io_runtime()?.block_on(async move {
        let way = reach::pick(&config).await;
        if let Some(asker) = Asker::remote(&config, &way).await? {
            let reply = asker.ask(McpAuditRequest { limit }).await?;
            return anyhow::Ok(reply.records.into_iter().map(Into::into).collect());
        }
        let Way::Directory(dir) = way else {
            anyhow::bail!("no way to reach the MCP audit");
        };
        let db = reach::open_directory(&dir).await?;
        anyhow::Ok(AuditLog::open(&db)?.latest(limit)?)
    })?;
    print_audit(&records, args.json);
    Ok(())
}

fn print_audit(records: &[AuditRecord], json: bool) {
    if json {
        for record in records {
            println!("{}", serde_json::to_string(record).unwrap_or_default());
        }
        return;
    }
    println!(
        "{:<24} {:<6} {:<12} {:<10} {:<14} {:<28} {:>6} {:<7} error",
        "time", "side", "who", "server", "method", "target", "ms", "status"
    );
    for r in records {
        println!(
            "{:<24} {:<6} {:<12} {:<10} {:<14} {:<28} {:>6} {:<7} {}",
            r.ts.format("%Y-%m-%d %H:%M:%S%.3f"),
            r.side,
            r.who,
            r.server,
            r.method,
            r.target,
            r.duration_ms,
            r.status,
            r.error.as_deref().unwrap_or("")
        );
    }
}
