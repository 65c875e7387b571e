//! Tools: the registry (the whitelist), argument validation and safe repair, and the built-ins.
//!
//! A [`Tool`] is a name, a description, a JSON Schema and an async `call`. The tool-executor
//! actor owns the [`registry::ToolRegistry`]; nothing reaches `call` without passing
//! [`registry::ToolRegistry::prepare`] (whitelist + schema validation + repair) first.

pub mod builtin;
pub mod registry;
pub mod remote;
pub mod validate;

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::llm::ToolSpec;

/// How a failed tool call is classified, so the model (and the loop guard) can act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorCode {
    /// The name is not in the whitelist.
    UnknownTool,
    /// The arguments do not match the schema and could not be safely repaired.
    InvalidArguments,
    /// The tool ran and reported a failure.
    ExecutionFailed,
    /// The tool did not finish in time.
    Timeout,
    /// The tool's backend (MCP server, worker) is not reachable.
    Unavailable,
}

/// A structured error the model can act on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct ToolError {
    pub code: ToolErrorCode,
    pub message: String,
    /// What the model should do next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// For `unknown_tool`: the closest existing names; for `invalid_arguments`: one entry per
    /// schema violation (`/path: problem`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
}

impl ToolError {
    pub fn new(code: ToolErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            hint: None,
            details: Vec::new(),
        }
    }
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    pub fn with_details(mut self, details: Vec<String>) -> Self {
        self.details = details;
        self
    }
}

/// A tool Hermes can execute.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Name, description and JSON Schema as the model sees them.
    fn spec(&self) -> ToolSpec;

    /// How long one call may take.
    fn timeout(&self) -> Duration {
        Duration::from_secs(30)
    }

    /// Run with arguments that already passed validation.
    async fn call(&self, arguments: Value) -> Result<Value, ToolError>;
}

/// Arguments after validation, with the safe repairs that were applied.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedCall {
    pub arguments: Value,
    /// One entry per repair, e.g. `/limit: "3" (string) → 3 (integer)`. Empty when the
    /// arguments were valid as sent.
    pub corrections: Vec<String>,
}
