//! `job_status`: the state of an async job, for models that poll instead of waiting for the
//! completion to wake the turn.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::llm::ToolSpec;
use crate::tools::jobs::JobStore;
use crate::tools::{Tool, ToolError, ToolErrorCode};

pub const NAME: &str = "job_status";

const DESCRIPTION: &str = "Report the state of a background job started by an async tool. \
Use it only when you hold a job_id from an earlier call and need its result or progress; \
do not use it to start work or for ids that are not job ids. \
Parameters: `job_id` string, the id an async tool returned (e.g. \"job-0190…\"), required. \
Returns {\"job_id\", \"tool\", \"status\": \"submitted\"|\"running\"|\"done\"|\"failed\", \
\"progress\": {fraction, message} or null, \"result\" (when done), \"error\" (when failed)}. \
Errors: execution_failed when no job has this id.";

/// The `job_status` tool over the executor's job store.
#[derive(Debug, Clone)]
pub struct JobStatusTool {
    jobs: JobStore,
}

impl JobStatusTool {
    pub fn new(jobs: JobStore) -> Self {
        Self { jobs }
    }
}

#[async_trait]
impl Tool for JobStatusTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: DESCRIPTION.to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "job_id": {"type": "string", "minLength": 1, "description": "the id an async tool returned"}
                },
                "required": ["job_id"],
                "additionalProperties": false
            }),
        }
    }

    fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(5)
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let id = arguments
            .get("job_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        let record = self.jobs.find(id).await.map_err(|e| {
            ToolError::new(ToolErrorCode::Unavailable, format!("job store: {e}"))
                .with_hint("the job store is failing; tell the user")
        })?;
        let Some(r) = record else {
            return Err(ToolError::new(
                ToolErrorCode::ExecutionFailed,
                format!(
                    "no job with id `{}`",
                    id.chars().take(80).collect::<String>()
                ),
            )
            .with_hint("use the job_id exactly as the async tool returned it"));
        };
        Ok(json!({
            "job_id": r.job_id,
            "tool": r.tool,
            "status": r.status,
            "progress": r.progress,
            "result": r.result,
            "error": r.error,
        }))
    }
}
