//! `[[tools.define]]`: metadata overrides for existing tools, or tools served by external
//! workers (see config/default.toml for every key).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::tool::{ToolEffect, ToolMode, ToolRisk};

/// One `[[tools.define]]` entry of the config (see config/default.toml for every key).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefineConfig {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// A JSON Schema written as a TOML table (or inline table).
    #[serde(default)]
    pub input_schema: Option<Value>,
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    #[serde(default)]
    pub mode: Option<ToolMode>,
    #[serde(default)]
    pub effect: Option<ToolEffect>,
    #[serde(default)]
    pub risk: Option<ToolRisk>,
    #[serde(default)]
    pub scenes: Option<Vec<String>>,
}

impl ToolDefineConfig {
    /// What stops this entry from defining a worker tool (empty when it can).
    pub fn problems_as_worker(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.description.as_deref().is_none_or(str::is_empty) {
            problems.push("`description` is missing".to_string());
        }
        match &self.input_schema {
            None => problems.push("`input_schema` is missing".to_string()),
            Some(s) if !s.is_object() => {
                problems.push("`input_schema` must be a table (a JSON Schema object)".to_string())
            }
            Some(_) => {}
        }
        problems
    }
}
