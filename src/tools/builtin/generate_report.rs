//! `generate_report`: the demo async tool. It "researches" a topic for a few seconds,
//! reporting progress, then returns a short report — enough to show async jobs end to end
//! (`{job_id, status: "submitted"}` at once, progress and completion on `hermes.job.<id>`).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::llm::ToolSpec;
use crate::tools::definition::{ToolDefinition, ToolEffect, ToolMode};
use crate::tools::{Progress, Tool, ToolError, ToolErrorCode};

pub const NAME: &str = "generate_report";
/// Longest allowed run, seconds.
const MAX_SECONDS: u64 = 600;
const STEPS: u32 = 4;

const DESCRIPTION: &str = "Write a short research report on a topic; runs in the background. \
Use it when the user asks for a report or summary that takes time to prepare; do not use it \
for quick facts or order questions. \
Parameters: `topic` string, what the report is about (e.g. \"wireless headphones\"), required; \
`seconds` integer 1–600, how long the research may take (default 3). \
Returns at once {\"job_id\": \"job-…\", \"status\": \"submitted\"}; the finished report \
{\"topic\", \"sections\": [..], \"summary\"} arrives when the job is done — call job_status \
with the job_id to poll. \
Errors: invalid_arguments when topic is missing or seconds is out of range.";

/// The `generate_report` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct GenerateReport;

#[async_trait]
impl Tool for GenerateReport {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: DESCRIPTION.to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "topic": {"type": "string", "minLength": 1, "description": "what the report is about"},
                    "seconds": {"type": "integer", "minimum": 1, "maximum": MAX_SECONDS, "description": "how long the research may take, seconds (default 3)"}
                },
                "required": ["topic"],
                "additionalProperties": false
            }),
        }
    }

    fn definition(&self) -> ToolDefinition {
        let mut def = ToolDefinition::from_spec(self.spec(), self.timeout());
        def.mode = ToolMode::Async;
        def.effect = ToolEffect::Read;
        def
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(MAX_SECONDS + 60)
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        self.call_with_progress(arguments, Progress::none()).await
    }

    async fn call_with_progress(
        &self,
        arguments: Value,
        progress: Progress,
    ) -> Result<Value, ToolError> {
        let topic = arguments
            .get("topic")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| {
                ToolError::new(ToolErrorCode::ExecutionFailed, "`topic` is missing")
                    .with_hint("send a non-empty `topic` string")
            })?
            .trim()
            .to_string();
        let seconds = arguments
            .get("seconds")
            .and_then(Value::as_u64)
            .unwrap_or(3);
        let step = Duration::from_secs(seconds.clamp(1, MAX_SECONDS)) / STEPS;
        let names = ["background", "options", "trade-offs", "recommendation"];
        let mut sections = Vec::new();
        for (i, name) in names.iter().enumerate() {
            tokio::time::sleep(step).await;
            sections.push(json!({"title": name, "text": format!("{name} of {topic}")}));
            let done = u16::try_from(i + 1).unwrap_or(u16::MAX);
            progress.report(f32::from(done) / STEPS as f32, format!("wrote {name}"));
        }
        Ok(json!({
            "topic": topic,
            "sections": sections,
            "summary": format!("A {}-section report on {topic}.", names.len()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn report_progresses_through_every_section() {
        let (progress, mut rx) = Progress::channel();
        let out = GenerateReport
            .call_with_progress(json!({"topic": "headphones", "seconds": 4}), progress)
            .await
            .unwrap();
        assert_eq!(out["sections"].as_array().unwrap().len(), 4);
        let mut fractions = Vec::new();
        while let Ok(p) = rx.try_recv() {
            fractions.push(p.fraction);
        }
        assert_eq!(fractions, vec![0.25, 0.5, 0.75, 1.0]);
        assert_eq!(GenerateReport.definition().mode, ToolMode::Async);
    }
}
