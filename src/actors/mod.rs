//! The five actors and the bus services in front of them. Each owns its state; the others
//! reach it only over the bus.
//!
//! | actor | serves | owns |
//! |---|---|---|
//! | [`session::SessionActor`] (one per live session, spread over arbiters by [`router::SessionRouter`]) | `hermes.in.>`, `hermes.job.*`, `hermes.sessions.search` / `.list` / `.show` ([`session_query`]) | sled `sessions`, `messages` |
//! | [`planner::Planner`] (a stateless service) | `hermes.plan`, `hermes.summarise` | the planner and summariser models |
//! | [`tool_executor::ToolExecutor`] (a stateless service over its stores) | `hermes.tool.<name>`, `hermes.tools.list`, `hermes.tools.metrics` | the tool registry, sled `jobs`, `tool_results_idem`, `tool_raw` |
//! | [`mcp_bridge::McpBridge`] | `hermes.mcp.*` | MCP client sessions, sled `mcp_audit` |
//! | [`memory_extractor::MemoryExtractor`] (+ [`memory_service`]) | `hermes.memory.recall` / `.write` / `.forget` / `.list`, queue `hermes.memory.extract` | sled `memories`, `memory_keys`, `memory_vectors`, `memory_refs`, `memory_extracted` |
//!
//! [`triggers::Triggers`], beside the session service, turns events on any captured subject
//! (`[[triggers]]`) into session messages.
//!
//! Requests are [`crate::bus::Handler`]s that run where the message arrives; mailboxes are for
//! what must be serialised — a session's turns, the extractor's queue, the bridge's connections.

pub mod mcp_bridge;
pub mod memory_extractor;
pub mod memory_service;
pub mod planner;
pub mod router;
pub mod session;
pub mod session_query;
pub mod session_search;
pub mod settle;
pub mod start_error;
pub mod status;
pub mod tool_executor;
pub mod triggers;

use std::sync::Arc;

use tokio::runtime::Handle;

use crate::bus::SharedBus;
use crate::config::Config;

/// What every actor gets: the bus, the I/O runtime and the configuration.
#[derive(Clone)]
pub struct ActorDeps {
    pub bus: SharedBus,
    /// The multi-threaded runtime for network I/O (NATS, MCP, model HTTP).
    pub io: Handle,
    pub config: Arc<Config>,
}

/// The actor set a process runs (`hermes serve --actors …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActorSet {
    pub session: bool,
    pub planner: bool,
    pub tool_executor: bool,
    pub mcp_bridge: bool,
    pub memory_extractor: bool,
}

/// Why an `--actors` list does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ActorSetError {
    #[error("unknown actor `{0}`; choose from: all, session, planner, tool-executor, mcp-bridge, memory-extractor")]
    Unknown(String),
    #[error("no actor named; choose from: all, session, planner, tool-executor, mcp-bridge, memory-extractor")]
    None,
}

impl ActorSet {
    pub const ALL: ActorSet = ActorSet {
        session: true,
        planner: true,
        tool_executor: true,
        mcp_bridge: true,
        memory_extractor: true,
    };
    /// No actor: a process that only drives a deployment running elsewhere (`hermes bench
    /// --actors none`).
    pub const NONE: ActorSet = ActorSet {
        session: false,
        planner: false,
        tool_executor: false,
        mcp_bridge: false,
        memory_extractor: false,
    };
    pub const NAMES: [&'static str; 5] = [
        "session",
        "planner",
        "tool-executor",
        "mcp-bridge",
        "memory-extractor",
    ];

    /// Parse `session,planner,…` or `all`.
    pub fn parse(list: &str) -> Result<Self, ActorSetError> {
        if list.trim() == "all" {
            return Ok(Self::ALL);
        }

        let mut set = ActorSet {
            session: false,
            planner: false,
            tool_executor: false,
            mcp_bridge: false,
            memory_extractor: false,
        };
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match name {
                "session" => set.session = true,
                "planner" => set.planner = true,
                "tool-executor" => set.tool_executor = true,
                "mcp-bridge" => set.mcp_bridge = true,
                "memory-extractor" => set.memory_extractor = true,
                other => return Err(ActorSetError::Unknown(other.to_string())),
            }
        }
        if !set.any() {
            return Err(ActorSetError::None);
        }
        Ok(set)
    }

    pub fn any(&self) -> bool {
        self.session
            || self.planner
            || self.tool_executor
            || self.mcp_bridge
            || self.memory_extractor
    }
}
