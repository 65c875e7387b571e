//! Tools: the registry (the whitelist), argument validation and safe repair, and the built-ins.
//!
//! A [`Tool`] is a name, a description, a JSON Schema and an async `call`, plus its
//! [`definition::ToolDefinition`] (timeout, mode, effect, risk, scenes). The tool-executor
//! actor owns the [`registry::ToolRegistry`]; nothing reaches `call` without passing
//! [`registry::ToolRegistry::prepare`] (whitelist + schema validation + repair) first. Tools
//! served by external workers are validated with [`worker::prepare_remote`] by the caller.
//!
//! Also here, as pure functions or small sled-backed stores the executor owns: async jobs
//! ([`jobs`]), idempotency records ([`idempotency`]), raw outputs ([`raw`]), the result
//! transform ([`transform`]), scene selection ([`scenes`]), description lint ([`lint`]) and the
//! executor's counters ([`metrics`]).

pub mod builtin;
pub mod definition;
pub mod idempotency;
pub mod jobs;
pub mod lint;
pub mod metrics;
pub mod raw;
pub mod registry;
pub mod remote;
pub mod remote_task;
pub mod scenes;
pub mod stores;
pub mod suggest;
pub mod transform;
pub mod validate;
#[cfg(test)]
mod validate_props;
pub mod worker;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::protocol::chat::ToolSpec;
use crate::protocol::tool::ToolDefinition;
pub use crate::protocol::tool::{ProgressUpdate, ToolError, ToolErrorCode};

/// A tool Hermes can execute.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Name, description and JSON Schema as the model sees them.
    fn spec(&self) -> ToolSpec;

    /// How long one call may take.
    fn timeout(&self) -> Duration {
        Duration::from_secs(30)
    }

    /// Everything the engine knows about the tool. The default is a sync, read-only,
    /// low-risk tool in every scene, with [`Self::spec`] and [`Self::timeout`].
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::from_spec(self.spec(), self.timeout())
    }

    /// Run with arguments that already passed validation.
    async fn call(&self, arguments: Value) -> Result<Value, ToolError>;

    /// Run as an async job, reporting progress as it goes. The default ignores `progress`.
    async fn call_with_progress(
        &self,
        arguments: Value,
        progress: Progress,
    ) -> Result<Value, ToolError> {
        let _ = progress;
        self.call(arguments).await
    }

    /// [`Self::call`] for a tool whose backend may answer "started, follow this" instead of a
    /// result (an MCP server's task): the executor then turns the call into an async job that
    /// follows the work with [`Self::follow`]. The default always runs to the end.
    async fn call_or_defer(&self, arguments: Value) -> Result<CallOutcome, ToolError> {
        self.call(arguments).await.map(CallOutcome::Done)
    }

    /// Follow work [`Self::call_or_defer`] deferred, until its result (also after a restart,
    /// from the stored `handle`).
    async fn follow(&self, handle: Value, progress: Progress) -> Result<Value, ToolError> {
        let _ = (handle, progress);
        Err(ToolError::new(
            ToolErrorCode::ExecutionFailed,
            "this tool cannot follow deferred work",
        )
        .with_hint("tell the user the work's outcome is unknown"))
    }

    /// Ask the backend to stop deferred work (the turn waiting for it was cancelled).
    async fn cancel_deferred(&self, handle: Value) -> Result<(), ToolError> {
        let _ = handle;
        Ok(())
    }
}

/// What [`Tool::call_or_defer`] came back with.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// The call's output.
    Done(Value),
    /// The work goes on elsewhere; the handle is what [`Tool::follow`] needs.
    Deferred(Value),
    /// The tool's MCP server asks the user first; the call is made again with the answers
    /// (injected as `_input`).
    InputRequired(crate::mcp::McpInputRequired),
}

/// Where a running job reports progress; [`Progress::none`] discards reports.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    tx: Option<tokio::sync::mpsc::UnboundedSender<ProgressUpdate>>,
}

impl Progress {
    /// Reports go nowhere (sync calls).
    pub fn none() -> Self {
        Self::default()
    }

    /// A reporter and the receiving end the executor reads.
    pub fn channel() -> (Self, tokio::sync::mpsc::UnboundedReceiver<ProgressUpdate>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (Self { tx: Some(tx) }, rx)
    }

    /// Report progress; `fraction` is clamped to 0.0–1.0. Never fails.
    pub fn report(&self, fraction: f32, message: impl Into<String>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(ProgressUpdate {
                fraction: fraction.clamp(0.0, 1.0),
                message: message.into(),
            });
        }
    }
}

/// Arguments after validation, with the safe repairs that were applied.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedCall {
    pub arguments: Value,
    /// One entry per repair, e.g. `/limit: "3" (string) → 3 (integer)`. Empty when the
    /// arguments were valid as sent.
    pub corrections: Vec<String>,
}
