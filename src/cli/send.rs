//! `hermes send`: one message to a session, its events printed as they arrive; and the
//! target flags and bus connection `hermes chat` shares.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use hermes::actors::ActorSet;
use hermes::bus::SharedBus;
use hermes::client::transport::BusTransport;
use hermes::config::Config;
use hermes::engine::Engine;
use hermes::protocol::TurnEvent;
use hermes_client::{Hermes, SessionClient};

use super::print::Printer;
use super::runtime::with_engine_runtime;

#[derive(Args)]
pub struct Target {
    /// Agent to talk to (a key of [agents] in the config).
    #[arg(long, default_value = "assistant")]
    pub(crate) agent: String,
    /// Session id (letters, digits, `_`, `-`); reuse it to continue a conversation.
    #[arg(long, default_value = "cli")]
    pub(crate) session: String,
    /// Who is talking: memories are kept per user.
    #[arg(long, default_value = "u-1001")]
    pub(crate) user: String,
    /// Bus: `embedded` runs the whole engine here; `nats://host:port` talks to services.
    #[arg(long)]
    pub(crate) bus: Option<String>,
    /// Data directory for sled (embedded bus).
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// Seconds to wait for a turn to finish.
    #[arg(long, default_value_t = 300)]
    pub(crate) timeout: u64,
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("decision").args(["confirm", "deny"])))]
pub struct SendArgs {
    #[command(flatten)]
    target: Target,
    /// The message text.
    #[arg(long, required_unless_present_any = ["confirm", "deny", "cancel"])]
    text: Option<String>,
    /// Stop the session's turn in progress — a running one at its next step, a waiting one at
    /// once — and every turn it delegated to other agents.
    #[arg(long, conflicts_with_all = ["text", "confirm", "deny"])]
    cancel: bool,
    /// Approve the high-risk call the session's paused turn waits on, and follow the turn
    /// to its answer (a turn pauses with `confirmation.required` before such a call runs).
    #[arg(long, conflicts_with_all = ["text", "deny"])]
    confirm: bool,
    /// Decline that call: it never runs, and the model is told the user said no.
    #[arg(long, conflicts_with_all = ["text", "confirm"])]
    deny: bool,
    /// Decide only this call (the id printed with `confirmation.required`); default: every
    /// call the turn waits on.
    #[arg(long, requires = "decision")]
    call_id: Option<String>,
    /// With --confirm and --call-id, for a call whose MCP server asked a question (`confirmation.required`
    /// with questions): the answer, as the JSON the question's form describes, e.g.
    /// --answer '{"name": "Ada"}'. Without it the form's defaults are sent; a URL question
    /// needs none (visit the page, then --confirm).
    #[arg(long, requires_all = ["confirm", "call_id"], value_parser = parse_answer)]
    answer: Option<serde_json::Value>,
    /// Print each event as one JSON line instead of text.
    #[arg(long)]
    json: bool,
}

/// `--answer`: a JSON value (the form's fields as an object).
fn parse_answer(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| {
        format!("not JSON ({e}); give the form's fields as an object, e.g. '{{\"name\": \"Ada\"}}'")
    })
}

/// Connect to the bus; on the embedded bus, start every actor here.
pub(crate) async fn connect(
    config: Arc<Config>,
    io: tokio::runtime::Handle,
) -> anyhow::Result<(SharedBus, Option<Engine>)> {
    if config.bus.url == "embedded" {
        let engine = Engine::start(config, ActorSet::ALL, io).await?;
        super::serve::report_mcp(&engine);
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

pub(crate) fn apply(mut config: Config, target: &Target) -> Arc<Config> {
    if let Some(bus) = &target.bus {
        config.bus.url = bus.clone();
    }
    if let Some(dir) = &target.data_dir {
        config.engine.data_dir = dir.clone();
    }
    Arc::new(config)
}

/// A client of `agent`/`session` as `user`: `hermes-client`, over the NATS connection of
/// `bus` when it has one, else over the in-process bus. A process with a NATS identity sends
/// as it and reads only the events for the session's reader
/// (`hermes.out.<agent>.<session>.<reader>`, the reader computed from `[bus.publishers]` as
/// the engine does): that is what a person's or a publisher's credential may subscribe to.
/// Without one (no permissions), any reader's.
pub(super) async fn open_client(
    bus: SharedBus,
    config: &Config,
    agent: &str,
    session: &str,
    user: &str,
) -> anyhow::Result<SessionClient> {
    let identity = bus.identity().map(str::to_string);
    let reader = identity
        .as_ref()
        .map(|_| hermes::config::publishers::reader_of(&config.bus.publishers, Some(user)));
    let transport: Arc<dyn hermes_client::Transport> = match bus.nats_client() {
        Some(nats) => Arc::new(hermes_client::nats::Nats::from_client(nats)),
        None => Arc::new(BusTransport::new(bus.clone())),
    };
    let hermes = Hermes::over(transport)
        .as_publisher(identity)
        .reading(reader);
    hermes
        .session(agent, session, user)
        .await
        .map_err(|e| explained(&bus, e))
}

/// A client error; when nothing answered and the NATS server refused this connection
/// something (a publish, the reply inbox), the refusal and its fix too: on a server with
/// permissions a refused request looks like silence.
pub(super) fn explained(bus: &SharedBus, error: hermes_client::ClientError) -> anyhow::Error {
    use hermes_client::ClientError;
    let refusals = bus.refusals();
    match error {
        ClientError::Timeout(_) | ClientError::Transport(_) | ClientError::Closed
            if !refusals.is_empty() =>
        {
            anyhow::anyhow!("{error}; {}", refusals.join("; "))
        }
        error => error.into(),
    }
}

pub fn run_send(config: Config, args: SendArgs) -> anyhow::Result<()> {
    let config = apply(config, &args.target);
    let t = args.target;
    with_engine_runtime(config.engine.io_threads, |io| async move {
        let (bus, engine) = connect(config.clone(), io).await?;
        let mut client = open_client(bus.clone(), &config, &t.agent, &t.session, &t.user).await?;
        let mut printer = Printer::default();
        let json = args.json;
        let timeout = Duration::from_secs(t.timeout);
        let on_event = |e: &TurnEvent| {
            if json {
                println!("{}", serde_json::to_string(e).unwrap_or_default());
            } else {
                printer.event(e);
            }
        };
        if args.cancel {
            let stopped = client
                .cancel("cancelled with hermes send --cancel", timeout)
                .await
                .map_err(|e| explained(&bus, e))?;
            match &stopped.turn_id {
                Some(turn) => println!(
                    "cancelled turn {turn}{}",
                    if stopped.children.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " and its delegated sessions {}",
                            stopped.children.join(", ")
                        )
                    }
                ),
                None => println!(
                    "nothing to cancel: session `{}` has no turn in progress",
                    t.session
                ),
            }
            if let Some(engine) = engine {
                engine.shutdown().await;
            }
            return Ok(());
        }
        let trace = match &args.text {
            Some(text) => client
                .turn(text, timeout, on_event)
                .await
                .map_err(|e| explained(&bus, e))?,
            None => {
                let call = args.call_id.as_deref();
                let followed = match (&args.answer, call) {
                    (Some(answer), Some(call)) => {
                        client
                            .answer_and_follow(call, answer.clone(), timeout, on_event)
                            .await
                    }
                    _ => {
                        client
                            .confirm_and_follow(args.confirm, call, timeout, on_event)
                            .await
                    }
                };
                followed.map_err(|e| explained(&bus, e))?
            }
        };
        if let Some(pending) = trace
            .needs_confirmation
            .as_ref()
            .filter(|p| !p.questions.is_empty())
        {
            eprintln!(
                "hermes: the turn is paused until you answer what `{}` asks (call {}): run the \
                 same command with --confirm --call-id {} [--answer '<JSON>'] or --deny \
                 instead of --text",
                pending.name, pending.call_id, pending.call_id
            );
        } else if let Some(pending) = &trace.needs_confirmation {
            eprintln!(
                "hermes: the turn is paused until you decide on `{}` (call {}): run the same \
                 command with --confirm or --deny instead of --text",
                pending.name, pending.call_id
            );
        }
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
