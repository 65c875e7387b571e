//! Where `hermes sessions`, `hermes memory` and `hermes mcp status|audit` get their answers,
//! picked without being told:
//!
//! 1. `--bus nats://…` (or no flag and `[bus] url` is NATS, unless `--data-dir` is given):
//!    ask the running deployment over NATS.
//! 2. Otherwise the data directory (`--data-dir`, `[engine] data_dir`): when a `hermes serve`
//!    holds it, ask that process through its control socket (`<data_dir>/hermes.sock`, see
//!    [`hermes::bus::socket`]); when nobody does, read it right here.
//!
//! Either way the commands send the same typed requests (`hermes.sessions.list`, …): reading a
//! directory here runs the very services a serve runs, in this process on an embedded bus
//! over that directory — so both ways print the same.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use hermes::bus::rpc::{self, RpcError};
use hermes::bus::socket::SocketBus;
use hermes::bus::{BusError, Serving, SharedBus};
use hermes::config::Config;
use hermes::protocol::envelope::{Envelope, EnvelopeError};
use hermes::protocol::request::Request;
use hermes::store::durability::{Durable, Mode};

/// How to reach the data: flags shared by `hermes sessions` and `hermes memory`.
#[derive(Args, Clone, Default)]
pub struct ReachArgs {
    /// Ask a running deployment on this NATS bus (`nats://host:4222`; default `[bus] url`).
    /// `embedded`: use the data directory even when the config names NATS.
    #[arg(long, global = true, value_name = "URL")]
    pub bus: Option<String>,
    /// Data directory (default `[engine] data_dir`): read directly when no process holds it,
    /// else through the `hermes serve` that does. Naming it overrides a NATS `[bus] url`.
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    /// Seconds to wait for an answer.
    #[arg(long, global = true, value_name = "SECS")]
    pub timeout: Option<u64>,
}

impl ReachArgs {
    /// `config` with these flags applied: the bus to ask (`embedded` = the data directory).
    pub fn apply(&self, config: &mut Config) {
        match (&self.bus, &self.data_dir) {
            (Some(bus), _) => config.bus.url = bus.clone(),
            // A directory named on the command line is where to look.
            (None, Some(_)) => config.bus.url = "embedded".into(),
            (None, None) => {}
        }
        if let Some(dir) = &self.data_dir {
            config.engine.data_dir = dir.clone();
        }
        if let Some(secs) = self.timeout {
            config.engine.request_timeout_secs = secs.max(1);
        }
    }
}

/// Where the answers come from.
pub enum Way {
    /// A NATS deployment.
    Nats(String),
    /// The `hermes serve` holding the data directory, through its control socket.
    Socket(PathBuf, Arc<SocketBus>),
    /// A data directory nobody holds: read here.
    Directory(PathBuf),
}

/// Pick the way for `config` (with [`ReachArgs::apply`] done). Call on a tokio runtime.
pub async fn pick(config: &Config) -> Way {
    if config.bus.url != "embedded" {
        return Way::Nats(config.bus.url.clone());
    }
    let dir = config.engine.data_dir.clone();
    match SocketBus::find(&dir).await {
        Some(socket) => Way::Socket(dir, socket),
        None => Way::Directory(dir),
    }
}

/// Connect to the deployment's NATS with the configured credentials.
pub async fn connect_nats(config: &Config, url: &str) -> anyhow::Result<SharedBus> {
    let credentials = config.bus.auth.resolve().map_err(anyhow::Error::msg)?;
    let bus = hermes::bus::connect_with(url, None, config.cluster.options(), &credentials).await?;
    Ok(bus)
}

/// Open a data directory nobody holds; a clear error when a process does (one without a
/// control socket: `hermes chat`, `hermes send`, a serve that could not open it).
pub async fn open_directory(dir: &Path) -> anyhow::Result<Durable> {
    if !dir.exists() {
        anyhow::bail!(
            "data directory {} does not exist; pass --data-dir, --config with [engine].data_dir, \
             or --bus nats://… to ask a running deployment",
            dir.display()
        );
    }
    let owned = dir.to_path_buf();
    let opened =
        tokio::task::spawn_blocking(move || hermes::store::open_durable(&owned, Mode::Sync))
            .await?;
    opened.with_context(|| {
        format!(
            "the data directory {} is locked or unreadable: another hermes process holds it \
             without answering requests (`hermes chat`/`hermes send`, or a `hermes serve` whose \
             control socket {} failed) — stop it and retry, or ask its deployment with --bus \
             nats://…",
            dir.display(),
            hermes::bus::socket::socket_path(dir).display()
        )
    })
}

/// Sends typed requests to whoever answers and turns failures into errors that say what to do.
pub struct Asker {
    bus: SharedBus,
    timeout: Duration,
    /// Who answers, for messages: "the deployment at nats://…", …
    whom: String,
    /// Services answering in this process (a data directory read here) live as long as this.
    _serving: Vec<Serving>,
}

impl Asker {
    /// Ask over `bus`; `whom` names who answers there.
    pub fn new(bus: SharedBus, config: &Config, whom: String) -> Self {
        Self {
            bus,
            timeout: Duration::from_secs(config.engine.request_timeout_secs),
            whom,
            _serving: Vec::new(),
        }
    }

    /// An asker for `way`, except a data directory read here: the caller serves that itself
    /// (it knows which services its command needs) and calls [`Asker::local`].
    pub async fn remote(config: &Config, way: &Way) -> anyhow::Result<Option<Self>> {
        Ok(match way {
            Way::Nats(url) => Some(Self::new(
                connect_nats(config, url).await?,
                config,
                format!("the deployment at {url}"),
            )),
            Way::Socket(dir, socket) => Some(Self::new(
                socket.clone(),
                config,
                format!("the hermes serve holding {}", dir.display()),
            )),
            Way::Directory(_) => None,
        })
    }

    /// Ask services started here on `bus` (an embedded bus over a data directory).
    pub fn local(bus: SharedBus, config: &Config, dir: &Path, serving: Vec<Serving>) -> Self {
        Self {
            _serving: serving,
            ..Self::new(bus, config, format!("the data directory {}", dir.display()))
        }
    }

    /// Send `body` and return the reply; an error answer is the service's own message.
    pub async fn ask<R: Request>(&self, body: R) -> anyhow::Result<R::Reply> {
        let envelope = Envelope::request(body);
        let subject = R::subject(&envelope)?;
        match rpc::request(self.bus.as_ref(), envelope, self.timeout).await {
            Ok(reply) => Ok(reply.body),
            Err(RpcError::Envelope(EnvelopeError::Answered { message, .. })) => {
                Err(anyhow::anyhow!(message))
            }
            Err(RpcError::Bus(BusError::NoResponders { .. })) => Err(anyhow::anyhow!(
                "nothing answers `{subject}` on {}: start a process with the {} actor there \
                 (`hermes serve --actors {}`){}",
                self.whom,
                actor_of(&subject),
                actor_of(&subject),
                self.elsewhere()
            )),
            Err(RpcError::Bus(BusError::Timeout { after, .. })) => Err(anyhow::anyhow!(
                "no answer on `{subject}` from {} within {} s: it is busy or stopped; retry, or \
                 wait longer with --timeout SECS",
                self.whom,
                after.as_secs()
            )),
            Err(e) => Err(anyhow::Error::new(e)
                .context(format!("asking {} on `{subject}` failed", self.whom))),
        }
    }

    fn elsewhere(&self) -> &'static str {
        if self.whom.starts_with("the deployment") {
            "; to read a stopped process' data directory instead, pass --data-dir DIR"
        } else {
            ""
        }
    }
}

/// The actor that answers `subject`.
fn actor_of(subject: &str) -> &'static str {
    if subject.starts_with("hermes.sessions.") {
        "session"
    } else if subject.starts_with("hermes.memory.") {
        "memory-extractor"
    } else if subject.starts_with("hermes.mcp.") {
        "mcp-bridge"
    } else {
        "actor that serves it"
    }
}
