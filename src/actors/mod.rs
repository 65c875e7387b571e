//! The five actors. Each owns its state; the others reach it only over the bus.
//!
//! | actor | serves | owns |
//! |---|---|---|
//! | [`session::SessionActor`] (one per live session, via [`router::SessionRouter`]) | `hermes.in.>` | sled `sessions`, `messages` |
//! | [`planner::Planner`] | `hermes.plan` | the planner model |
//! | [`tool_executor::ToolExecutor`] | `hermes.tool.<name>`, `hermes.tools.list` | the tool registry |
//! | [`mcp_bridge::McpBridge`] | `hermes.mcp.call`, `hermes.mcp.catalog` | MCP client sessions |
//! | [`memory_extractor::MemoryExtractor`] | `hermes.memory.recall`, queue `hermes.memory.extract` | sled `memories` |

pub mod adapter;
pub mod mcp_bridge;
pub mod memory_extractor;
pub mod memory_reader;
pub mod planner;
pub mod router;
pub mod session;
pub mod tool_executor;

use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use tokio::runtime::Handle;

use crate::bus::SharedBus;
use crate::config::Config;
use crate::envelope::{error_envelope, Envelope};

/// What every actor gets: the bus, the I/O runtime and the configuration.
#[derive(Clone)]
pub struct ActorDeps {
    pub bus: SharedBus,
    /// The multi-threaded runtime for network I/O (NATS, MCP, model HTTP).
    pub io: Handle,
    pub config: Arc<Config>,
}

/// Encode a reply envelope; an encoding failure becomes an error envelope.
pub(crate) fn reply_bytes<B: Serialize>(envelope: &Envelope<B>) -> Option<Bytes> {
    match envelope.encode() {
        Ok(b) => Some(b),
        Err(e) => error_bytes("encode_failed", e.to_string()),
    }
}

/// An encoded `error` envelope.
pub(crate) fn error_bytes(code: &str, message: impl Into<String>) -> Option<Bytes> {
    error_envelope(code, message).encode().ok()
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

impl ActorSet {
    pub const ALL: ActorSet = ActorSet {
        session: true,
        planner: true,
        tool_executor: true,
        mcp_bridge: true,
        memory_extractor: true,
    };
    pub const NAMES: [&'static str; 5] = [
        "session",
        "planner",
        "tool-executor",
        "mcp-bridge",
        "memory-extractor",
    ];

    /// Parse `session,planner,…` or `all`.
    pub fn parse(list: &str) -> Result<Self, String> {
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
                other => {
                    return Err(format!(
                        "unknown actor `{other}`; choose from: all, {}",
                        Self::NAMES.join(", ")
                    ))
                }
            }
        }
        if !set.any() {
            return Err("no actor named; choose from: all, ".to_string() + &Self::NAMES.join(", "));
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
