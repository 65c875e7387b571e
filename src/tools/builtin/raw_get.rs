//! `tool_raw_get`: the full, untrimmed output of an earlier tool call, by the
//! `raw_reference` its result carried.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::llm::ToolSpec;
use crate::tools::raw::RawStore;
use crate::tools::{Tool, ToolError, ToolErrorCode};

pub const NAME: &str = "tool_raw_get";

const DESCRIPTION: &str = "Fetch the full output of an earlier tool call whose result was \
trimmed. Use it only when the trimmed detail lacks something you need and the result gave a \
raw_reference; do not use it to re-run a tool. \
Parameters: `reference` string, the raw_reference of that result (\"raw-…\"), required. \
Returns {\"reference\", \"tool\", \"call_id\", \"output\"} with the complete output. \
Errors: execution_failed when nothing is stored under the reference.";

/// The `tool_raw_get` tool over the executor's raw store.
#[derive(Debug, Clone)]
pub struct RawGet {
    raw: RawStore,
}

impl RawGet {
    pub fn new(raw: RawStore) -> Self {
        Self { raw }
    }
}

#[async_trait]
impl Tool for RawGet {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: DESCRIPTION.to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "reference": {"type": "string", "minLength": 1, "description": "the raw_reference of an earlier result"}
                },
                "required": ["reference"],
                "additionalProperties": false
            }),
        }
    }

    fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(5)
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let reference = arguments
            .get("reference")
            .and_then(Value::as_str)
            .unwrap_or("");
        let record = self.raw.find(reference).await.map_err(|e| {
            ToolError::new(ToolErrorCode::Unavailable, format!("raw store: {e}"))
                .with_hint("the raw store is failing; tell the user")
        })?;
        let Some(r) = record else {
            return Err(ToolError::new(
                ToolErrorCode::ExecutionFailed,
                format!(
                    "nothing is stored under `{}`",
                    reference.chars().take(80).collect::<String>()
                ),
            )
            .with_hint("use the raw_reference exactly as the result gave it"));
        };
        Ok(json!({
            "reference": r.reference,
            "tool": r.tool,
            "call_id": r.call_id,
            "output": r.output,
        }))
    }
}
