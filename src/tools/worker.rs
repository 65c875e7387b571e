//! Tools served by external worker processes: any process answering `hermes.tool.<name>` in
//! queue group `tool` (protocol in docs/tools.md, "External tool workers").
//!
//! The tool-executor does not subscribe to a worker's subject (two servers in one queue group
//! would split the calls between them); it only lists the worker's config definition in the
//! catalog. The caller — the session, before it sends the call — validates and repairs the
//! arguments with [`prepare_remote`], the same checks the executor applies to its own tools.

use crate::tools::definition::ApplyConfig;
use serde_json::Value;

use super::definition::{ToolDefineConfig, ToolDefinition, ToolSource};
use super::registry::{refuse_injected, strip_injected};
use super::validate::{validate_and_repair, Validator};
use super::{PreparedCall, ToolError, ToolErrorCode};

/// Validate and safely repair `arguments` against `definition.input_schema`, as the executor
/// does for its own tools: keys starting with `_` are refused (they belong to the engine), a
/// schema violation that cannot be repaired is an `invalid_arguments` error listing each
/// problem, and the repairs applied are listed in [`PreparedCall::corrections`].
///
/// Compiles the schema on every call (tens of microseconds for a small schema); callers that
/// dispatch often may cache a [`Validator`] per definition and call [`validate_and_repair`].
pub fn prepare_remote(
    definition: &ToolDefinition,
    arguments: Value,
) -> Result<PreparedCall, ToolError> {
    let (schema, _) = strip_injected(&definition.input_schema);
    let validator = Validator::new(&schema).map_err(|e| {
        ToolError::new(
            ToolErrorCode::Unavailable,
            format!(
                "the schema of tool `{}` does not compile: {e}",
                definition.name
            ),
        )
        .with_hint("the tool is misconfigured; tell the user it is unavailable")
    })?;
    refuse_injected(&arguments)?;
    let prepared = validate_and_repair(&validator, arguments)?;
    refuse_injected(&prepared.arguments)?;
    Ok(prepared)
}

/// The worker tools declared in config: every `[[tools.define]]` entry whose name is not a
/// tool of the executor (`is_executor_tool`) and not an MCP tool (`<server>__<tool>`).
/// Returns the definitions and, separately, one message per entry that cannot define a tool.
pub fn worker_definitions(
    defines: &[ToolDefineConfig],
    is_executor_tool: impl Fn(&str) -> bool,
) -> (Vec<ToolDefinition>, Vec<String>) {
    let mut defs = Vec::new();
    let mut problems = Vec::new();
    for entry in defines {
        if is_executor_tool(&entry.name) || entry.name.contains(super::remote::MCP_SEPARATOR) {
            continue;
        }
        if let Err(e) = crate::protocol::subjects::check_id("tool", &entry.name) {
            problems.push(format!("[[tools.define]] `{}`: {e}", entry.name));
            continue;
        }
        match ToolDefinition::worker(entry) {
            Some(def) => defs.push(def),
            None => problems.push(format!(
                "[[tools.define]] `{}` names no built-in tool, so it defines a worker tool, but {}; \
                 add them or fix the name",
                entry.name,
                entry.problems_as_worker().join(" and ")
            )),
        }
    }
    defs.sort_by(|a, b| a.name.cmp(&b.name));
    (defs, problems)
}

/// Whether a catalog definition is served by a worker (the caller must [`prepare_remote`]).
pub fn is_worker(definition: &ToolDefinition) -> bool {
    definition.source == ToolSource::Worker
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn word_count() -> ToolDefinition {
        let entry: ToolDefineConfig = toml::from_str(
            r#"
name = "word_count"
description = "Count words."
[input_schema]
type = "object"
required = ["text"]
additionalProperties = false
properties = { text = { type = "string" }, min_len = { type = "integer" } }
"#,
        )
        .unwrap();
        ToolDefinition::worker(&entry).unwrap()
    }

    #[test]
    fn prepare_remote_repairs_a_number_sent_as_a_string() {
        let prepared =
            prepare_remote(&word_count(), json!({"text": "a b", "min_len": "2"})).unwrap();
        assert_eq!(prepared.arguments, json!({"text": "a b", "min_len": 2}));
        assert_eq!(prepared.corrections.len(), 1);
    }

    #[test]
    fn prepare_remote_rejects_missing_and_reserved_arguments() {
        let err = prepare_remote(&word_count(), json!({"min_len": 1})).unwrap_err();
        assert_eq!(err.code, ToolErrorCode::InvalidArguments);
        let err = prepare_remote(&word_count(), json!({"text": "x", "_user": "u"})).unwrap_err();
        assert_eq!(err.code, ToolErrorCode::InvalidArguments);
        assert!(err.details[0].starts_with("/_user"), "{err:?}");
    }

    #[test]
    fn worker_definitions_skip_builtins_and_mcp_and_report_incomplete_entries() {
        let defines: Vec<ToolDefineConfig> = vec![
            toml::from_str("name = \"add\"\nrisk = \"high\"").unwrap(),
            toml::from_str("name = \"catalog__search\"\nscenes = [\"shop\"]").unwrap(),
            toml::from_str("name = \"half\"\ndescription = \"d\"").unwrap(),
            toml::from_str(
                "name = \"wc\"\ndescription = \"d\"\ninput_schema = { type = \"object\" }",
            )
            .unwrap(),
        ];
        let (defs, problems) = worker_definitions(&defines, |n| n == "add");
        assert_eq!(defs.len(), 1);
        assert_eq!(defs[0].name, "wc");
        assert!(is_worker(&defs[0]));
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].contains("`input_schema` is missing"),
            "{problems:?}"
        );
    }
}
