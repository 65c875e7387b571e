//! Tool definitions: everything the engine knows about a tool beyond what the model sees —
//! timeout, `sync|async` mode, `read|idempotent|write` effect, `low|high` risk and scenes.
//!
//! Built-in tools declare theirs in Rust ([`crate::tools::Tool::definition`]); config entries
//! `[[tools.define]]` ([`ToolDefineConfig`]) either override the metadata of a tool that exists
//! (a built-in, or an MCP tool `<server>__<tool>`) or, for any other name, define a tool served
//! by an external worker on `hermes.tool.<name>` (then `description` and `input_schema` are
//! required). [`ToolDefinition::apply`] merges an entry over a definition.

pub use crate::config::ToolDefineConfig;
pub use crate::protocol::tool::{
    ToolDefinition, ToolEffect, ToolMode, ToolRisk, ToolSource, DEFAULT_TIMEOUT_SECS,
};

/// Merging `[[tools.define]]` entries into definitions.
pub trait ApplyConfig: Sized {
    /// Merge a config entry over this definition: every key the entry sets replaces ours.
    fn apply(&mut self, entry: &ToolDefineConfig);
    /// The definition of a worker tool declared in config; `None` when the entry lacks a
    /// description or an input schema (see [`ToolDefineConfig::problems_as_worker`]).
    fn worker(entry: &ToolDefineConfig) -> Option<Self>;
}

impl ApplyConfig for ToolDefinition {
    fn apply(&mut self, entry: &ToolDefineConfig) {
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

    fn worker(entry: &ToolDefineConfig) -> Option<Self> {
        let mut def = ToolDefinition {
            name: entry.name.clone(),
            description: entry.description.clone()?,
            input_schema: entry.input_schema.clone()?,
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            mode: ToolMode::Sync,
            // A worker's effect is unknown unless declared: the safe side is `write`.
            effect: ToolEffect::Write,
            risk: ToolRisk::Low,
            scenes: Vec::new(),
            source: ToolSource::Worker,
        };
        def.apply(entry);
        Some(def)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::chat::ToolSpec;
    use serde_json::json;
    use std::time::Duration;

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
    fn a_worker_tool_without_a_declared_effect_is_a_write() {
        let undeclared = entry(
            "name = \"refund\"\ndescription = \"refunds\"\n[input_schema]\ntype = \"object\"\n",
        );
        let def = ToolDefinition::worker(&undeclared).unwrap();
        assert_eq!(def.effect, ToolEffect::Write);
        let declared = entry(
            "name = \"wc\"\ndescription = \"counts\"\neffect = \"read\"\n[input_schema]\ntype = \"object\"\n",
        );
        assert_eq!(
            ToolDefinition::worker(&declared).unwrap().effect,
            ToolEffect::Read
        );
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
