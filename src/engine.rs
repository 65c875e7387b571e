//! Starting the engine: open the store and the bus, then start the chosen actors and
//! subscribe them. Must run inside an actix `System`; network I/O goes to the `io` runtime.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::runtime::Handle;

use crate::actors::mcp_bridge::McpBridge;
use crate::actors::memory_extractor::MemoryExtractor;
use crate::actors::memory_service::MemoryRequests;
use crate::actors::planner::Planner;
use crate::actors::router::SessionRouter;
use crate::actors::session_query::SessionQueries;
use crate::actors::tool_executor::{self, ToolExecutor};
use crate::actors::triggers::Triggers;
use crate::actors::{ActorDeps, ActorSet};
use crate::bus::{self, Serving, SharedBus};
use crate::config::Config;
use crate::context::tokens::TokenCounter;
use crate::llm::factory::build_model;
use crate::memory::MemoryService;
use crate::protocol::{McpCatalog, ProcessStatus};
use crate::store::durability::Durable;
use crate::store::session_reader::SessionReader;
use crate::store::sessions::SessionStore;
use crate::turn::ports::BusPorts;
use crate::turn::TurnEnv;

/// The cause is part of each message and deliberately not a `source`, so a printed chain
/// (`{:#}`) does not say it twice.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot open the data directory: {0}")]
    Store(crate::store::StoreError),
    #[error("cannot open the bus: {0}")]
    Bus(crate::bus::BusError),
    #[error("cannot build the {role} model: {reason}")]
    Model { role: &'static str, reason: String },
    #[error("cannot start the {actor}: {reason}")]
    Actor { actor: &'static str, reason: String },
    #[error("cannot start the {actor}: {source}")]
    Start {
        actor: &'static str,
        source: crate::actors::start_error::StartError,
    },
}

impl From<crate::store::StoreError> for EngineError {
    fn from(e: crate::store::StoreError) -> Self {
        Self::Store(e)
    }
}

impl From<crate::bus::BusError> for EngineError {
    fn from(e: crate::bus::BusError) -> Self {
        Self::Bus(e)
    }
}

/// How long [`Engine::shutdown`] waits for the actors' threads.
const ARBITER_JOIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A running engine.
pub struct Engine {
    pub bus: SharedBus,
    pub db: Option<Durable>,
    pub config: Arc<Config>,
    /// The MCP servers this process mounted, and how they fared.
    pub mcp: Option<McpCatalog>,
    /// Tools mounted from MCP servers.
    pub mcp_tools_mounted: usize,
    router: Option<SessionRouter>,
    arbiters: Vec<Arbiter>,
    /// Bus services this process runs; dropping them stops serving.
    services: Vec<Serving>,
    /// Actors held alive for as long as the engine runs (an actor with no address stops).
    actors: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

impl Engine {
    pub async fn start(
        config: Arc<Config>,
        actors: ActorSet,
        io: Handle,
    ) -> Result<Self, EngineError> {
        let embedded = config.bus.url == "embedded";
        let db = if embedded
            || actors.session
            || actors.memory_extractor
            || actors.tool_executor
            || actors.mcp_bridge
        {
            let (dir, cache_mb) = (config.engine.data_dir.clone(), config.engine.cache_mb);
            let db = io
                .spawn_blocking(move || crate::store::open_with_cache(&dir, cache_mb))
                .await
                .map_err(|e| EngineError::Actor {
                    actor: "store",
                    reason: e.to_string(),
                })??;
            Some(Durable::new(
                db,
                crate::store::durability::Mode::from_config(&config.engine),
            ))
        } else {
            None
        };
        let url = config.bus.url.clone();
        let bus_db = db.clone();
        let cluster = config.cluster.options();
        let credentials = match url.as_str() {
            "embedded" => crate::bus::auth::NatsAuth::default(),
            _ => config
                .bus
                .auth
                .resolve()
                .map_err(|error| EngineError::Actor {
                    actor: "bus",
                    reason: error.to_string(),
                })?,
        };
        let bus = io
            .spawn(async move { bus::connect_with(&url, bus_db, cluster, &credentials).await })
            .await
            .map_err(|e| EngineError::Actor {
                actor: "bus",
                reason: e.to_string(),
            })??;
        let deps = ActorDeps {
            bus: bus.clone(),
            io: io.clone(),
            config: config.clone(),
        };
        let mut engine = Engine {
            bus,
            db,
            config: config.clone(),
            mcp: None,
            mcp_tools_mounted: 0,
            router: None,
            arbiters: Vec::new(),
            services: Vec::new(),
            actors: Vec::new(),
        };
        if actors.mcp_bridge {
            let arbiter = engine.arbiter()?;
            let (bridge, catalog, serving) =
                McpBridge::start(deps.clone(), engine.db.clone(), &arbiter)
                    .await
                    .map_err(|source| EngineError::Start {
                        actor: "mcp-bridge",
                        source,
                    })?;
            engine.mcp = Some(catalog);
            engine.services.extend(serving);
            engine.actors.push(Box::new(bridge));
        }
        if actors.tool_executor {
            engine.start_tool_executor(&deps, actors.mcp_bridge).await?;
        }
        if actors.planner {
            engine.start_planner(&deps).await?;
        }
        if actors.memory_extractor {
            engine.start_memory(&deps).await?;
        }
        if actors.session {
            engine.start_sessions(&deps).await?;
        }
        engine.start_status(actors, &io).await?;
        // On NATS a subscription is live once the server has read it: a flush (PING/PONG)
        // after all of them makes a started engine reachable from any other connection.
        engine.bus.flush().await?;
        // A subscription the server's permissions refuse is reported asynchronously: fail now,
        // naming it, rather than run a service nobody can reach.
        engine.bus.check_permissions().await?;
        Ok(engine)
    }

    /// Answer `hermes.status` with what this process runs, its live sessions and metrics.
    async fn start_status(&mut self, actors: ActorSet, io: &Handle) -> Result<(), EngineError> {
        let names: Vec<String> = ActorSet::NAMES
            .iter()
            .zip([
                actors.session,
                actors.planner,
                actors.tool_executor,
                actors.mcp_bridge,
                actors.memory_extractor,
            ])
            .filter(|(_, on)| *on)
            .map(|(name, _)| name.to_string())
            .collect();
        let (id, started_at, host) = (
            uuid::Uuid::new_v4().simple().to_string(),
            chrono::Utc::now(),
            host_name(),
        );
        let router = self.router.clone();
        let report: crate::actors::status::Report = Arc::new(move || ProcessStatus {
            id: id.clone(),
            pid: std::process::id(),
            host: host.clone(),
            actors: names.clone(),
            started_at,
            sessions_live: router.as_ref().map(|r| r.live() as u64),
            series: crate::telemetry::metrics::series(),
        });
        let (bus, max) = (self.bus.clone(), self.config.engine.max_envelope_bytes);
        let answering = io
            .spawn(async move { crate::actors::status::serve(bus, report, max).await })
            .await
            .map_err(|e| EngineError::Actor {
                actor: "status",
                reason: e.to_string(),
            })??;
        self.services.push(Serving::new(AbortOnDrop(answering)));
        Ok(())
    }

    fn arbiter(&mut self) -> Result<ArbiterHandle, EngineError> {
        let arbiter = crate::runtime::new_arbiter().map_err(|e| EngineError::Actor {
            actor: "arbiter",
            reason: format!("cannot start an actor thread: {e}"),
        })?;
        let handle = arbiter.handle();
        self.arbiters.push(arbiter);
        Ok(handle)
    }

    async fn start_tool_executor(
        &mut self,
        deps: &ActorDeps,
        bridge_here: bool,
    ) -> Result<(), EngineError> {
        let (executor, serving) = ToolExecutor::start(deps.clone(), self.db.clone())
            .await
            .map_err(|source| EngineError::Start {
                actor: "tool-executor",
                source,
            })?;
        self.services.extend(serving);
        if self.config.mcp.servers.is_empty() {
            return Ok(());
        }
        let mount = tool_executor::mount_mcp_tools(
            deps.clone(),
            executor,
            Duration::from_secs(if bridge_here { 10 } else { 120 }),
        );
        if bridge_here {
            // Same process: the bridge is up already, so mount before serving turns.
            self.mcp_tools_mounted = deps
                .io
                .spawn(mount)
                .await
                .unwrap_or_else(|e| Err(e.into()))
                .map_err(|source| EngineError::Start {
                    actor: "tool-executor",
                    source,
                })?;
        } else {
            deps.io.spawn(async move {
                match mount.await {
                    Ok(n) => tracing::info!(tools = n, "MCP tools mounted"),
                    Err(e) => tracing::error!(error = %e, "MCP tools not mounted"),
                }
            });
        }
        Ok(())
    }

    async fn start_planner(&mut self, deps: &ActorDeps) -> Result<(), EngineError> {
        let model = build_model(&self.config.models.planner, "planner").map_err(|e| {
            EngineError::Model {
                role: "planner",
                reason: e.to_string(),
            }
        })?;
        let summariser =
            build_model(&self.config.models.summariser, "summariser").map_err(|e| {
                EngineError::Model {
                    role: "summariser",
                    reason: e.to_string(),
                }
            })?;
        let mut planner = Planner::new(deps.clone(), model, summariser);
        for (name, config) in &self.config.models.named {
            let model = build_model(config, "planner").map_err(|e| EngineError::Model {
                role: "planner",
                reason: format!("[models.{name}]: {e}"),
            })?;
            planner = planner.with_model(name, model);
        }
        self.services.extend(planner.serve().await?);
        Ok(())
    }

    async fn start_memory(&mut self, deps: &ActorDeps) -> Result<(), EngineError> {
        let model = build_model(&self.config.models.extractor, "extractor").map_err(|e| {
            EngineError::Model {
                role: "extractor",
                reason: e.to_string(),
            }
        })?;
        let db = self.db.clone().ok_or(EngineError::Actor {
            actor: "memory-extractor",
            reason: "no data directory".into(),
        })?;
        let embedder_config = self.config.memory.embedder.clone();
        let embedder = deps
            .io
            .spawn_blocking(move || crate::memory::embed::from_config(&embedder_config))
            .await
            .map_err(|e| EngineError::Actor {
                actor: "memory-extractor",
                reason: e.to_string(),
            })?
            .map_err(|e| EngineError::Actor {
                actor: "memory-extractor",
                reason: e.to_string(),
            })?;
        let actor_error = |e: crate::memory::MemoryError| EngineError::Actor {
            actor: "memory-extractor",
            reason: e.to_string(),
        };
        let mut service =
            MemoryService::open(&db, &self.config.memory, embedder).map_err(actor_error)?;
        if let Some(cluster) = deps.bus.cluster() {
            service = service
                .replicated(&db, cluster.memory_log(), cluster.memory_log_feed())
                .map_err(actor_error)?;
        }
        self.services
            .extend(MemoryRequests::serve(service.clone(), self.config.clone(), &deps.bus).await?);
        let arbiter = self.arbiter()?;
        let extractor = MemoryExtractor::start(deps.clone(), service, model, &db, &arbiter)
            .await
            .map_err(|source| EngineError::Start {
                actor: "memory-extractor",
                source,
            })?;
        self.actors.push(Box::new(extractor));
        Ok(())
    }

    async fn start_sessions(&mut self, deps: &ActorDeps) -> Result<(), EngineError> {
        let model = build_model(&self.config.models.planner, "planner").map_err(|e| {
            EngineError::Model {
                role: "planner",
                reason: e.to_string(),
            }
        })?;
        let model_name = model.model_name();
        // Loading the vocabulary takes a moment: not on an arbiter.
        let tokens = deps
            .io
            .spawn_blocking(move || TokenCounter::for_model(&model_name))
            .await
            .map_err(|e| EngineError::Actor {
                actor: "session",
                reason: e.to_string(),
            })?
            .map_err(|e| EngineError::Actor {
                actor: "session",
                reason: e.to_string(),
            })?;
        let db = self.db.clone().ok_or(EngineError::Actor {
            actor: "session",
            reason: "no data directory".into(),
        })?;
        if let Some(identity) = deps.bus.identity() {
            let publishers = &self.config.bus.publishers;
            if let Some(warning) =
                crate::config::publishers::service_entry_missing(publishers, identity)
            {
                tracing::warn!("{warning}");
            }
        }
        let mut ports = BusPorts::new(deps.bus.clone(), self.config.clone());
        if self.config.agents.values().any(|a| a.is_remote()) {
            let remote = crate::a2a::delegate::RemoteDelegates::open(
                deps.bus.clone(),
                Some(&db),
                self.config.clone(),
                deps.io.clone(),
            )?;
            ports = ports.with_remote(remote);
        }
        let ports = Arc::new(ports);
        let watching = ports.clone();
        deps.io
            .spawn(async move { watching.watch_catalog().await })
            .await
            .map_err(|e| EngineError::Actor {
                actor: "session",
                reason: e.to_string(),
            })??;
        let env = TurnEnv {
            ports,
            config: self.config.clone(),
            store: match deps.bus.cluster() {
                // Sessions may move between processes: their state lives in the cluster.
                Some(cluster) => SessionStore::open(&db)?.with_log(cluster.session_log()),
                None => SessionStore::open(&db)?,
            },
            tokens,
            cancel: Arc::default(),
            ack: Default::default(),
            prefetched: Default::default(),
            first_write: Default::default(),
            inbox_item: Default::default(),
            tool_tokens: Default::default(),
            ack_flush_within: crate::turn::ack::ACK_FLUSH_WITHIN,
        };
        let reader = SessionReader::of(&env.store);
        self.services.extend(
            SessionQueries::serve(reader, &deps.bus, self.config.engine.max_envelope_bytes).await?,
        );
        let count = match self.config.engine.session_arbiters {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        };
        let arbiters = (0..count)
            .map(|_| self.arbiter())
            .collect::<Result<Vec<_>, _>>()?;
        let router = SessionRouter::new(env, deps.bus.clone(), arbiters);
        // The services, the eviction timer and the resume scan live on the I/O runtime.
        let bus = deps.bus.clone();
        let serving_router = router.clone();
        let serving = deps
            .io
            .spawn(async move { serving_router.serve(&bus).await })
            .await
            .map_err(|e| EngineError::Actor {
                actor: "session",
                reason: e.to_string(),
            })??;
        self.services.extend(serving);
        self.router = Some(router);
        if let Some(triggers) = Triggers::new(deps.bus.clone(), self.config.clone()) {
            let listening =
                deps.io
                    .spawn(triggers.run())
                    .await
                    .map_err(|e| EngineError::Actor {
                        actor: "session",
                        reason: e.to_string(),
                    })??;
            self.services.push(Serving::new(AbortOnDrop(listening)));
        }
        Ok(())
    }

    /// Session actors in memory now (idle ones stop after `engine.session_idle_secs`).
    pub async fn live_sessions(&self) -> usize {
        self.router.as_ref().map_or(0, SessionRouter::live)
    }

    /// Stop the actors' threads, wait for them to end (so their handles on the store are
    /// gone and the data directory can be opened again) and flush the store.
    pub async fn shutdown(self) {
        drop(self.services);
        drop(self.actors);
        for a in &self.arbiters {
            a.stop();
        }
        let arbiters = self.arbiters;
        let joined = tokio::task::spawn_blocking(move || {
            for a in arbiters {
                let _ = a.join();
            }
        });
        if tokio::time::timeout(ARBITER_JOIN_TIMEOUT, joined)
            .await
            .is_err()
        {
            tracing::warn!("actor threads did not end in time; shutting down without them");
        }
        // The inbox acks the sessions handed out last, then the bus's buffer, reach the server.
        crate::actors::settle::acks_sent(ACKS_SENT_TIMEOUT).await;
        if let Err(e) = self.bus.flush().await {
            tracing::warn!(error = %e, "final bus flush failed; the last acks may come back as redeliveries");
        }
        if let Some(db) = &self.db {
            if let Err(e) = db.flush_all().await {
                tracing::warn!(error = %e, "final flush failed");
            }
        }
    }
}

/// How long a stop waits for the sessions' last inbox acks to be sent.
const ACKS_SENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Stops a background task when the engine's services are dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// This machine's host name, for `hermes status`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}
