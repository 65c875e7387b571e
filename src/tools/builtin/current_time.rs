//! `current_time`: the current UTC time, so the model never guesses "today".

use std::time::Duration;

use async_trait::async_trait;
use chrono::{SecondsFormat, Utc};
use serde_json::{json, Value};

use crate::llm::ToolSpec;
use crate::tools::{Tool, ToolError};

pub const NAME: &str = "current_time";

const DESCRIPTION: &str = "Return the current date and time in UTC. \
Use it whenever the answer depends on today's date or the time (\"yesterday\", \"last week\", \
how long ago something happened); do not use it for time zones' rules or historical dates. \
Takes no parameters: call it with {}. \
Returns {\"utc\": \"YYYY-MM-DDThh:mm:ssZ\"} (RFC 3339). Never fails.";

/// The `current_time` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct CurrentTime;

#[async_trait]
impl Tool for CurrentTime {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: DESCRIPTION.to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {},
                "additionalProperties": false
            }),
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(5)
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        Ok(json!({"utc": Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_now_as_rfc_3339_utc() {
        let before = Utc::now();
        let out = CurrentTime.call(json!({})).await.unwrap();
        let text = out["utc"].as_str().unwrap();
        assert!(text.ends_with('Z'), "{text}");
        let parsed = chrono::DateTime::parse_from_rfc3339(text).unwrap();
        let drift = parsed.signed_duration_since(before).num_seconds().abs();
        assert!(drift <= 2, "{text} vs {before}");
    }
}
