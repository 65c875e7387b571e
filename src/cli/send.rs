//! `hermes send` and `hermes chat`: talk to a session from the terminal.

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use hermes::actors::ActorSet;
use hermes::bus::messages::TurnEvent;
use hermes::bus::SharedBus;
use hermes::client::SessionClient;
use hermes::config::Config;
use hermes::engine::Engine;

use super::print::Printer;
use super::runtime::with_engine_runtime;

#[derive(Args)]
pub struct Target {
    /// Agent to talk to (a key of [agents] in the config).
    #[arg(long, default_value = "assistant")]
    agent: String,
    /// Session id (letters, digits, `_`, `-`); reuse it to continue a conversation.
    #[arg(long, default_value = "cli")]
    session: String,
    /// Who is talking: memories are kept per user.
    #[arg(long, default_value = "u-1001")]
    user: String,
    /// Bus: `embedded` runs the whole engine here; `nats://host:port` talks to services.
    #[arg(long)]
    bus: Option<String>,
    /// Data directory for sled (embedded bus).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Seconds to wait for a turn to finish.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
}

#[derive(Args)]
pub struct SendArgs {
    #[command(flatten)]
    target: Target,
    /// The message text.
    #[arg(long)]
    text: String,
    /// Print each event as one JSON line instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct ChatArgs {
    #[command(flatten)]
    target: Target,
}

/// Connect to the bus; on the embedded bus, start every actor here.
async fn connect(
    config: Arc<Config>,
    io: tokio::runtime::Handle,
) -> anyhow::Result<(SharedBus, Option<Engine>)> {
    if config.bus.url == "embedded" {
        let engine = Engine::start(config, ActorSet::ALL, io).await?;
        super::serve::report_mcp(&engine);
        Ok((engine.bus.clone(), Some(engine)))
    } else {
        let url = config.bus.url.clone();
        let bus = io
            .spawn(async move { hermes::bus::connect(&url, None).await })
            .await??;
        Ok((bus, None))
    }
}

fn apply(mut config: Config, target: &Target) -> Arc<Config> {
    if let Some(bus) = &target.bus {
        config.bus.url = bus.clone();
    }
    if let Some(dir) = &target.data_dir {
        config.engine.data_dir = dir.clone();
    }
    Arc::new(config)
}

pub fn run_send(config: Config, args: SendArgs) -> anyhow::Result<()> {
    let config = apply(config, &args.target);
    let t = args.target;
    with_engine_runtime(|io| async move {
        let (bus, engine) = connect(config, io).await?;
        let mut client = SessionClient::open(bus, &t.agent, &t.session, &t.user).await?;
        let mut printer = Printer::default();
        let json = args.json;
        let trace = client
            .turn(&args.text, Duration::from_secs(t.timeout), |e| {
                if json {
                    println!("{}", serde_json::to_string(e).unwrap_or_default());
                } else {
                    printer.event(e);
                }
            })
            .await?;
        if engine.is_some() {
            // Embedded: give the background memory write a moment to finish before exiting.
            wait_for_memory(&mut client, &mut printer, json).await;
        }
        if let Some(engine) = engine {
            engine.shutdown().await;
        }
        match trace.error {
            Some(e) => Err(anyhow::anyhow!("the turn failed: {e}")),
            None => Ok(()),
        }
    })
}

async fn wait_for_memory(client: &mut SessionClient, printer: &mut Printer, json: bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match client.next_event(left).await {
            Ok(Some(e @ TurnEvent::MemoryWritten { .. })) => {
                if json {
                    println!("{}", serde_json::to_string(&e).unwrap_or_default());
                } else {
                    printer.event(&e);
                }
                return;
            }
            Ok(Some(_)) => continue,
            _ => return,
        }
    }
}

pub fn run_chat(config: Config, args: ChatArgs) -> anyhow::Result<()> {
    let config = apply(config, &args.target);
    let t = args.target;
    with_engine_runtime(|io| async move {
        let (bus, engine) = connect(config, io).await?;
        let mut client = SessionClient::open(bus, &t.agent, &t.session, &t.user).await?;
        let mut printer = Printer::default();
        eprintln!(
            "hermes chat — agent `{}`, session `{}`, user `{}`. Ctrl-D ends.",
            t.agent, t.session, t.user
        );
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        while let Some(line) = rx.recv().await {
            if line.trim().is_empty() {
                continue;
            }
            if let Err(e) = client
                .turn(&line, Duration::from_secs(t.timeout), |e| printer.event(e))
                .await
            {
                eprintln!("error: {e}");
            }
        }
        if let Some(engine) = engine {
            engine.shutdown().await;
        }
        Ok(())
    })
}
