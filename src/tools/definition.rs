//! Tool definitions: everything the engine knows about a tool beyond what the model sees —
//! timeout, `sync|async` mode, `read|idempotent|write` effect, `low|high` risk and scenes.
//!
//! Built-in tools declare theirs in Rust ([`crate::tools::Tool::definition`]); config entries
//! `[[tools.define]]` ([`ToolDefineConfig`]) either override the metadata of a tool that exists
//! (a built-in, or an MCP tool `<server>__<tool>`) or, for any other name, define a tool served
//! by an external worker on `hermes.tool.<name>` (then `description` and `input_schema` are
//! required). [`ToolDefinition::apply`] merges an entry over a definition.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::llm::ToolSpec;

/// Default timeout of one call when a definition sets none, seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

/// How a call returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// The result is the reply.
    #[default]
    Sync,
    /// The reply is `{job_id, status: "submitted"}`; the result arrives on `hermes.job.<id>`.
    Async,
}

/// What a call does to the world.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolEffect {
    /// Only reads; safe to run again and in parallel.
    #[default]
    Read,
    /// Changes state, but running it twice is the same as once.
    Idempotent,
    /// Changes state; the executor runs one call per idempotency key.
    Write,
}

/// Whether a call needs the user's confirmation first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolRisk {
    #[default]
    Low,
    /// The executor refuses the call unless the request says `confirmed: true`.
    High,
}

/// Where a tool runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSource {
    /// In the tool-executor (built-ins and MCP proxies).
    #[default]
    Executor,
    /// In an external worker process serving `hermes.tool.<name>` in queue group `tool`.
    Worker,
}

/// A tool as the engine knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    /// What it does, when to use it and when not, parameters, returns and errors.
    pub description: String,
    /// JSON Schema of the arguments object (as the model sees it).
    pub input_schema: Value,
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    #[serde(default)]
    pub mode: ToolMode,
    #[serde(default)]
    pub effect: ToolEffect,
    #[serde(default)]
    pub risk: ToolRisk,
    /// The scenes (tool groups) that show this tool; empty means every scene.
    #[serde(default)]
    pub scenes: Vec<String>,
    #[serde(default)]
    pub source: ToolSource,
}

fn default_timeout_secs() -> u64 {
    DEFAULT_TIMEOUT_SECS
}

impl ToolDefinition {
    /// A sync, read-only, low-risk executor tool in every scene.
    pub fn from_spec(spec: ToolSpec, timeout: Duration) -> Self {
        Self {
            name: spec.name,
            description: spec.description,
            input_schema: spec.input_schema,
            timeout_secs: timeout.as_secs().max(1),
            mode: ToolMode::Sync,
            effect: ToolEffect::Read,
            risk: ToolRisk::Low,
            scenes: Vec::new(),
            source: ToolSource::Executor,
        }
    }

    /// The part the model sees.
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.input_schema.clone(),
        }
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.max(1))
    }

    /// Whether the tool is shown in `scene` (a tool with no scenes is shown everywhere).
    pub fn in_scene(&self, scene: &str) -> bool {
        self.scenes.is_empty() || self.scenes.iter().any(|s| s == scene)
    }

    /// Merge a config entry over this definition: every key the entry sets replaces ours.
    pub fn apply(&mut self, entry: &ToolDefineConfig) {
        if let Some(d) = &entry.description {
            self.description.clone_from(d);
        }
        if let Some(s) = &entry.input_schema {
            self.input_schema.clone_from(s);
        }
        if let Some(t) = entry.timeout_secs {
            self.timeout_secs = t.max(1);
        }
        if let Some(m) = entry.mode {
            self.mode = m;
        }
        if let Some(e) = entry.effect {
            self.effect = e;
        }
        if let Some(r) = entry.risk {
            self.risk = r;
        }
        if let Some(s) = &entry.scenes {
            self.scenes.clone_from(s);
        }
    }

    /// The definition of a worker tool declared in config; `None` when the entry lacks a
    /// description or an input schema (see [`ToolDefineConfig::problems_as_worker`]).
    pub fn worker(entry: &ToolDefineConfig) -> Option<Self> {
        let mut def = ToolDefinition {
            name: entry.name.clone(),
            description: entry.description.clone()?,
            input_schema: entry.input_schema.clone()?,
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            mode: ToolMode::Sync,
            effect: ToolEffect::Read,
            risk: ToolRisk::Low,
            scenes: Vec::new(),
            source: ToolSource::Worker,
        };
        def.apply(entry);
        Some(def)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(toml_text: &str) -> ToolDefineConfig {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn config_entry_overrides_only_the_keys_it_sets() {
        let spec = ToolSpec {
            name: "add".into(),
            description: "adds".into(),
            input_schema: json!({"type": "object"}),
        };
        let mut def = ToolDefinition::from_spec(spec, Duration::from_secs(5));
        def.apply(&entry(
            "name = \"add\"\nrisk = \"high\"\nscenes = [\"math\"]\n",
        ));
        assert_eq!(def.risk, ToolRisk::High);
        assert_eq!(def.scenes, vec!["math"]);
        assert_eq!(def.timeout_secs, 5);
        assert_eq!(def.description, "adds");
        assert!(def.in_scene("math"));
        assert!(!def.in_scene("shop"));
    }

    #[test]
    fn worker_entry_needs_description_and_schema() {
        let bare = entry("name = \"word_count\"\nmode = \"async\"\n");
        assert!(ToolDefinition::worker(&bare).is_none());
        assert_eq!(bare.problems_as_worker().len(), 2);
        let full = entry(
            "name = \"word_count\"\ndescription = \"counts\"\neffect = \"write\"\ntimeout_secs = 7\n\
             [input_schema]\ntype = \"object\"\nproperties = { text = { type = \"string\" } }\n",
        );
        let def = ToolDefinition::worker(&full).unwrap();
        assert_eq!(def.source, ToolSource::Worker);
        assert_eq!(def.effect, ToolEffect::Write);
        assert_eq!(def.timeout(), Duration::from_secs(7));
        assert_eq!(def.input_schema["properties"]["text"]["type"], "string");
    }

    #[test]
    fn catalog_definition_defaults_missing_fields() {
        let def: ToolDefinition =
            serde_json::from_value(json!({"name": "x", "description": "d", "input_schema": {}}))
                .unwrap();
        assert_eq!(def.timeout_secs, DEFAULT_TIMEOUT_SECS);
        assert_eq!(def.mode, ToolMode::Sync);
        assert_eq!(def.effect, ToolEffect::Read);
        assert_eq!(def.risk, ToolRisk::Low);
    }
}
