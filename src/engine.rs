//! Starting the engine: open the store and the bus, then start the chosen actors and
//! subscribe them. Must run inside an actix `System`; network I/O goes to the `io` runtime.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::runtime::Handle;

use crate::actors::mcp_bridge::McpBridge;
use crate::actors::memory_extractor::MemoryExtractor;
use crate::actors::planner::Planner;
use crate::actors::router::{LiveSessions, SessionRouter};
use crate::actors::session_search::SessionSearch;
use crate::actors::tool_executor::{self, ToolExecutor};
use crate::actors::{adapter, ActorDeps, ActorSet};
use crate::bus::messages::McpCatalog;
use crate::bus::{self, subjects, SharedBus};
use crate::config::Config;
use crate::context::tokens::TokenCounter;
use crate::llm::factory::build_model;
use crate::memory::MemoryService;
use crate::store::sessions::SessionStore;
use crate::turn::TurnEnv;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot open the data directory: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("cannot open the bus: {0}")]
    Bus(#[from] crate::bus::BusError),
    #[error("cannot build the {role} model: {reason}")]
    Model { role: &'static str, reason: String },
    #[error("cannot start the {actor}: {reason}")]
    Actor { actor: &'static str, reason: String },
}

/// How long [`Engine::shutdown`] waits for the actors' threads.
const ARBITER_JOIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A running engine.
pub struct Engine {
    pub bus: SharedBus,
    pub db: Option<sled::Db>,
    pub config: Arc<Config>,
    /// The MCP servers this process mounted, and how they fared.
    pub mcp: Option<McpCatalog>,
    /// Tools mounted from MCP servers.
    pub mcp_tools_mounted: usize,
    router: Option<Addr<SessionRouter>>,
    arbiters: Vec<Arbiter>,
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
            let dir = config.engine.data_dir.clone();
            Some(
                io.spawn_blocking(move || crate::store::open(&dir))
                    .await
                    .map_err(|e| EngineError::Actor {
                        actor: "store",
                        reason: e.to_string(),
                    })??,
            )
        } else {
            None
        };
        let url = config.bus.url.clone();
        let bus_db = db.clone();
        let bus = io
            .spawn(async move { bus::connect(&url, bus_db).await })
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
        };
        if actors.mcp_bridge {
            let arbiter = engine.arbiter();
            let (_, catalog) = McpBridge::start(deps.clone(), engine.db.clone(), &arbiter)
                .await
                .map_err(|reason| EngineError::Actor {
                    actor: "mcp-bridge",
                    reason,
                })?;
            engine.mcp = Some(catalog);
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
        // On NATS a subscription is live once the server has read it: a flush (PING/PONG)
        // after all of them makes a started engine reachable from any other connection.
        engine.bus.flush().await?;
        Ok(engine)
    }

    fn arbiter(&mut self) -> ArbiterHandle {
        let arbiter = Arbiter::new();
        let handle = arbiter.handle();
        self.arbiters.push(arbiter);
        handle
    }

    async fn start_tool_executor(
        &mut self,
        deps: &ActorDeps,
        bridge_here: bool,
    ) -> Result<(), EngineError> {
        let arbiter = self.arbiter();
        let (addr, core) = ToolExecutor::start(deps.clone(), self.db.clone(), &arbiter)
            .await
            .map_err(|reason| EngineError::Actor {
                actor: "tool-executor",
                reason,
            })?;
        if self.config.mcp.servers.is_empty() {
            return Ok(());
        }
        let mount = tool_executor::mount_mcp_tools(
            deps.clone(),
            core.registry,
            addr,
            Duration::from_secs(if bridge_here { 10 } else { 120 }),
        );
        if bridge_here {
            // Same process: the bridge is up already, so mount before serving turns.
            self.mcp_tools_mounted = deps
                .io
                .spawn(mount)
                .await
                .unwrap_or_else(|e| Err(e.to_string()))
                .map_err(|reason| EngineError::Actor {
                    actor: "tool-executor",
                    reason,
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
        let arbiter = self.arbiter();
        let planner = Planner::new(deps.clone(), model, summariser);
        let addr = Planner::start_in_arbiter(&arbiter, |_| planner);
        for subject in [subjects::PLAN, subjects::SUMMARISE] {
            adapter::serve(
                &deps.io,
                deps.bus.clone(),
                subject,
                Some(subjects::groups::PLANNER),
                addr.clone().recipient(),
            )
            .await?;
        }
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
        let service = MemoryService::open(&db, &self.config.memory, embedder).map_err(|e| {
            EngineError::Actor {
                actor: "memory-extractor",
                reason: e.to_string(),
            }
        })?;
        let arbiter = self.arbiter();
        MemoryExtractor::start(deps.clone(), service, model, &arbiter)
            .await
            .map_err(|reason| EngineError::Actor {
                actor: "memory-extractor",
                reason,
            })?;
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
        let env = TurnEnv {
            bus: deps.bus.clone(),
            config: self.config.clone(),
            store: SessionStore::open(&db)?,
            tokens,
        };
        let search = SessionSearch {
            store: env.store.clone(),
            max_envelope_bytes: self.config.engine.max_envelope_bytes,
        }
        .start();
        adapter::serve(
            &deps.io,
            deps.bus.clone(),
            subjects::SESSIONS_SEARCH,
            Some(subjects::groups::SESSION),
            search.recipient(),
        )
        .await?;
        let router = SessionRouter::new(env, deps.io.clone()).start();
        adapter::forward(
            &deps.io,
            deps.bus.clone(),
            subjects::INBOUND_ALL,
            Some(subjects::groups::SESSION),
            router.clone().recipient(),
        )
        .await?;
        // Async jobs' completions wake the sessions waiting on them.
        adapter::forward(
            &deps.io,
            deps.bus.clone(),
            subjects::JOB_ALL,
            Some(subjects::groups::SESSION),
            router.clone().recipient(),
        )
        .await?;
        self.router = Some(router);
        Ok(())
    }

    /// Session actors in memory now (idle ones stop after `engine.session_idle_secs`).
    pub async fn live_sessions(&self) -> usize {
        match &self.router {
            Some(r) => r.send(LiveSessions).await.unwrap_or(0),
            None => 0,
        }
    }

    /// Stop the actors' threads, wait for them to end (so their handles on the store are
    /// gone and the data directory can be opened again) and flush the store.
    pub async fn shutdown(self) {
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
        if let Some(db) = &self.db {
            if let Err(e) = crate::store::flush::flush(db).await {
                tracing::warn!(error = %e, "final flush failed");
            }
        }
    }
}
