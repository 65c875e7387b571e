//! Why an actor could not start: the part that failed, kept typed up to the engine's edge
//! (`EngineError::Actor`), so a caller can tell a bad `[tools]` table from a bus that is down.

use crate::bus::rpc::RpcError;
use crate::bus::BusError;
use crate::mcp::audit::AuditError;
use crate::store::StoreError;
use crate::tools::builtin::BuiltinDataError;
use crate::tools::ToolError;

/// What stopped an actor from starting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error("its stores: {0}")]
    Store(#[from] StoreError),
    #[error("the bus: {0}")]
    Bus(#[from] BusError),
    #[error("the MCP audit log: {0}")]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Tools(#[from] ToolSetupError),
    #[error(
        "cannot locate the hermes executable (it runs Hermes' own MCP servers): {0}; run hermes \
         from a path it can read"
    )]
    SelfExe(#[source] std::io::Error),
    #[error(
        "its start on the I/O runtime did not finish ({0}): the process is shutting down, or \
         the start panicked (the log above says where)"
    )]
    Runtime(#[from] tokio::task::JoinError),
    #[error(
        "the MCP bridge did not answer for its catalog within {waited_secs} s: {source}; start a \
         process with the mcp-bridge actor (`--actors mcp-bridge`) or check the bus"
    )]
    NoCatalog { waited_secs: u64, source: RpcError },
}

/// A `[tools]` table the executor cannot build its tools from.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolSetupError {
    #[error("the built-in tools' dataset: {0}")]
    Data(#[from] BuiltinDataError),
    #[error("unknown built-in tool `{name}` in [tools].builtin; built-ins: {known}")]
    UnknownBuiltin { name: String, known: String },
    #[error("{0}")]
    Register(#[from] ToolError),
    /// A `[[tools.define]]` entry that is neither a built-in nor a complete worker tool; the
    /// text names the entry and what it lacks.
    #[error("{0}")]
    Worker(String),
}
