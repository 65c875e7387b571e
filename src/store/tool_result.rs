//! [`StoredToolResult`]: a tool call's result as kept in sled (a waiting turn's job results in
//! its task state, idempotency records in `tool_results_idem`). Its own type, so the wire format
//! ([`ToolCallResult`]) can change without breaking stored data; converted at the edge.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::{ToolCallResult, ToolError, ToolStatus};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredToolResult {
    pub call_id: String,
    pub name: String,
    /// `true` for a result with status `ok`.
    pub ok: bool,
    #[serde(default)]
    pub output: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    #[serde(default)]
    pub auto_corrected: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub corrections: Vec<String>,
    #[serde(default)]
    pub via: String,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_reference: Option<String>,
}

impl StoredToolResult {
    /// What is kept of a result once it is in the conversation: which call it ended, whether
    /// it succeeded, and how; not its output or error, which the conversation holds.
    pub fn taken(&self) -> Self {
        Self {
            call_id: self.call_id.clone(),
            name: self.name.clone(),
            ok: self.ok,
            output: Value::Null,
            error: None,
            auto_corrected: self.auto_corrected,
            corrections: Vec::new(),
            via: self.via.clone(),
            duration_ms: self.duration_ms,
            raw_reference: None,
        }
    }
}

impl From<&ToolCallResult> for StoredToolResult {
    fn from(r: &ToolCallResult) -> Self {
        Self {
            call_id: r.call_id.clone(),
            name: r.name.clone(),
            ok: r.status == ToolStatus::Ok,
            output: r.output.clone(),
            error: r.error.clone(),
            auto_corrected: r.auto_corrected,
            corrections: r.corrections.clone(),
            via: r.via.clone(),
            duration_ms: r.duration_ms,
            raw_reference: r.raw_reference.clone(),
        }
    }
}

impl From<&StoredToolResult> for ToolCallResult {
    fn from(r: &StoredToolResult) -> Self {
        Self {
            call_id: r.call_id.clone(),
            name: r.name.clone(),
            status: if r.ok {
                ToolStatus::Ok
            } else {
                ToolStatus::Error
            },
            output: r.output.clone(),
            error: r.error.clone(),
            auto_corrected: r.auto_corrected,
            corrections: r.corrections.clone(),
            via: r.via.clone(),
            duration_ms: r.duration_ms,
            raw_reference: r.raw_reference.clone(),
        }
    }
}
