//! A live deployment for one cell: a nats-server with JetStream, Hermes split by actor kind
//! into six `hermes serve` processes (two session services, a planner, a tool-executor, an
//! MCP-bridge and a memory-extractor), the fake model endpoint and the ledger MCP server —
//! plus the outside client (the harness's own NATS connection) and what it has seen.
//!
//! Every process is started from the main thread: a child started with `PR_SET_PDEATHSIG`
//! dies with the *thread* that started it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use hermes::bus::cluster::partition_of;
use hermes::bus::SharedBus;
use serde_json::Value;
use tokio::runtime::Runtime;

use crate::drive::AGENT;
use crate::ledger::Ledger;
use crate::model::Model;
use crate::nats_server::NatsServer;
use crate::observe::Observer;
use crate::procs::{Proc, ProcSpec, Role};

/// Session partitions of the deployment.
pub const PARTITIONS: u32 = 8;

/// The processes, by name and role.
const LAYOUT: [(&str, Role); 6] = [
    ("session-a", Role::Session),
    ("session-b", Role::Session),
    ("planner", Role::Planner),
    ("tool-executor", Role::ToolExecutor),
    ("mcp-bridge", Role::McpBridge),
    ("memory-extractor", Role::MemoryExtractor),
];

pub struct Deployment {
    pub nats: NatsServer,
    pub procs: Vec<Proc>,
    pub model: Model,
    pub ledger: Ledger,
    pub bus: SharedBus,
    pub observer: Observer,
    members: Members,
    rt: Arc<Runtime>,
}

/// Where a cell's files go.
pub struct Dirs<'a> {
    /// Config, ledger, logs.
    pub work: &'a Path,
    /// The sled directories (a small tmpfs in the disk-full cell).
    pub data: &'a Path,
    /// A configuration file for nats-server (the permissions cell), else none.
    pub nats_config: Option<&'a Path>,
    /// Session processes run a planner of their own (`--actors session,planner`).
    pub planner_with_sessions: bool,
}

impl Deployment {
    pub fn start(rt: &Arc<Runtime>, hermes: &Path, dirs: &Dirs<'_>) -> anyhow::Result<Self> {
        let nats = match dirs.nats_config {
            Some(config) => NatsServer::start_with_config(config, &[]),
            None => NatsServer::start(),
        };
        let model = rt.block_on(Model::start());
        let ledger = Ledger::start(&dirs.work.join("ledger"))?;
        let config = write_config(dirs.work, &model.base_url(), &ledger.url())?;
        let (bus, observer, members) = rt.block_on(async {
            let bus = hermes::bus::connect(&nats.url(), None).await?;
            let observer = Observer::start(&bus).await?;
            let members = Members::watch(&bus).await?;
            anyhow::Ok((bus, observer, members))
        })?;
        let logs = dirs.work.join("logs");
        std::fs::create_dir_all(&logs)?;
        let mut deployment = Self {
            nats,
            procs: Vec::new(),
            model,
            ledger,
            bus,
            observer,
            members,
            rt: rt.clone(),
        };
        let url = deployment.nats.url();
        for (name, role) in LAYOUT {
            let before = deployment.members.ids();
            let proc = Proc::start(ProcSpec {
                name,
                role,
                hermes,
                config: &config,
                bus: &url,
                data_dir: dirs.data.join(format!("{name}-data")),
                log_dir: &logs,
                actors: match role {
                    Role::Session if dirs.planner_with_sessions => "session,planner",
                    _ => role.actors(),
                },
            })?;
            deployment.procs.push(proc);
            if role == Role::Session {
                deployment.members.learn(name, &before);
            }
        }
        // Both session services know each other before the load, as in a running deployment.
        let deadline = Instant::now() + Duration::from_secs(10);
        while deployment.members.named() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(deployment)
    }

    pub fn proc_mut(&mut self, name: &str) -> anyhow::Result<&mut Proc> {
        self.procs
            .iter_mut()
            .find(|p| p.name == name)
            .with_context(|| format!("no process {name}"))
    }

    /// The process of `role` a kill aims at: for sessions, the one that owns `session`'s
    /// partition (as its announcements say).
    pub fn target(&self, role: Role, session: &str) -> Option<String> {
        if role != Role::Session {
            return LAYOUT
                .iter()
                .find(|(_, r)| *r == role)
                .map(|(n, _)| n.to_string());
        }
        self.members
            .owner_of(partition_of(AGENT, session, PARTITIONS))
    }

    /// A probe session name whose partition has a known owner (so a kill of "the session
    /// process" hits the one that holds the probe's turn).
    pub fn owned_session(&self, prefix: &str) -> String {
        (0..64)
            .map(|i| format!("{prefix}{i}"))
            .find(|s| self.target(Role::Session, s).is_some())
            .unwrap_or_else(|| format!("{prefix}0"))
    }

    /// SIGKILL `name` (the process manager restarts it later, [`Deployment::restart`]).
    pub fn kill9(&mut self, name: &str) -> anyhow::Result<()> {
        self.proc_mut(name)?.kill9();
        Ok(())
    }

    /// Start a killed process again, as a process manager would.
    pub fn restart(&mut self, name: &str) -> anyhow::Result<()> {
        let before = self.members.ids();
        let proc = self.proc_mut(name)?;
        let session = proc.role == Role::Session;
        proc.spawn()?;
        if session {
            self.members.learn(name, &before);
        }
        Ok(())
    }

    /// Stop every Hermes process (SIGTERM), as before a planned maintenance.
    pub fn stop_all(&mut self) {
        for proc in &mut self.procs {
            proc.stop();
        }
    }

    /// Start every stopped Hermes process again, in the order of the layout.
    pub fn start_all(&mut self) -> anyhow::Result<()> {
        for (name, _) in LAYOUT {
            self.restart(name)?;
        }
        Ok(())
    }

    /// Restart processes that exited on their own (each is noted as a crash).
    pub fn supervise(&mut self) -> anyhow::Result<()> {
        for proc in &mut self.procs {
            proc.check()?;
        }
        Ok(())
    }

    /// Exits nobody asked for and panics, over every process and start.
    pub fn crashes(&mut self) -> Vec<String> {
        let mut crashes = Vec::new();
        for proc in &mut self.procs {
            let _ = proc.check();
            crashes.extend(proc.unexpected_exits.iter().cloned());
            crashes.extend(proc.panics());
        }
        crashes.extend(self.ledger.crashed());
        crashes
    }

    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.rt.block_on(future)
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.rt
    }

    /// Stop every process (SIGTERM), the servers with the deployment.
    pub fn stop(mut self) {
        for proc in &mut self.procs {
            proc.stop();
        }
    }
}

fn write_config(dir: &Path, model_url: &str, ledger_url: &str) -> anyhow::Result<PathBuf> {
    let config = format!(
        r#"
[engine]
# A planning request lost with a killed planner is sent again after this.
plan_timeout_secs = 12
request_timeout_secs = 5
max_envelope_bytes = 16384
max_message_chars = 4000

[models.planner]
provider = "openai"
base_url = "{model_url}"
model = "fake-model"
timeout_secs = 4
max_retries = 2
stream = true

[models.extractor]
provider = "openai"
base_url = "{model_url}"
model = "fake-model"
timeout_secs = 4
max_retries = 2
stream = false

[models.summariser]
provider = "openai"
base_url = "{model_url}"
model = "fake-model"
timeout_secs = 4
max_retries = 2
stream = false

[memory]
extract_ack_wait_secs = 10

[memory.embedder]
kind = "none"

[tools]
builtin = ["add", "generate_report", "job_status"]

[[tools.define]]
name = "ledger__record"
effect = "write"

[[tools.define]]
name = "ledger__transfer"
effect = "write"
risk = "high"

[[mcp.servers]]
name = "ledger"
url = "{ledger_url}"
timeout_secs = 5

[cluster]
partitions = {PARTITIONS}
failover_secs = 2
ack_wait_secs = 4
"#
    );
    let path = dir.join("hermes.toml");
    std::fs::write(&path, config)?;
    Ok(path)
}

/// The session services' announcements on `hermes.cluster.sessions`: which process (by the
/// order they started in) owns which partition.
#[derive(Clone, Default)]
struct Members {
    state: Arc<Mutex<MemberState>>,
}

#[derive(Default)]
struct MemberState {
    /// Member ids in the order first heard.
    heard: Vec<String>,
    /// Member id → process name.
    names: HashMap<String, String>,
    /// Partition → member id that last said it owns it.
    owners: HashMap<u32, String>,
}

impl Members {
    async fn watch(bus: &SharedBus) -> anyhow::Result<Self> {
        let members = Self::default();
        let mut heard = bus.subscribe("hermes.cluster.sessions").await?;
        let state = members.state.clone();
        tokio::spawn(async move {
            while let Some(message) = heard.next().await {
                let Ok(announcement) = serde_json::from_slice::<Value>(&message.payload) else {
                    continue;
                };
                let id = announcement["id"].as_str().unwrap_or_default().to_string();
                let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
                if !state.heard.contains(&id) {
                    state.heard.push(id.clone());
                }
                for p in announcement["owned"].as_array().into_iter().flatten() {
                    if let Some(p) = p.as_u64().and_then(|p| u32::try_from(p).ok()) {
                        state.owners.insert(p, id.clone());
                    }
                }
            }
        });
        bus.flush().await?;
        Ok(members)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemberState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ids(&self) -> Vec<String> {
        self.lock().heard.clone()
    }

    fn named(&self) -> usize {
        self.lock().names.len()
    }

    /// The first id heard that was not in `before` is `name`'s (waits for it a moment).
    fn learn(&self, name: &str, before: &[String]) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            {
                let mut state = self.lock();
                let new = state.heard.iter().find(|id| !before.contains(id)).cloned();
                if let Some(id) = new {
                    state.names.insert(id, name.to_string());
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn owner_of(&self, partition: u32) -> Option<String> {
        let state = self.lock();
        let id = state.owners.get(&partition)?;
        state.names.get(id).cloned()
    }
}
