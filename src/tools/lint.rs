//! `hermes tools lint`: does each tool description say what the model needs? A simple,
//! documented heuristic over the description text and the input schema — pure functions.
//!
//! A definition gets one finding per missing part:
//! - **what** — the description has at least 20 characters and its first sentence at least
//!   3 words (it says what the tool does);
//! - **when** — it contains one of: `use it`, `use this`, `use when`, `use for`, `when `,
//!   `call it`;
//! - **when_not** — it contains one of: `do not`, `don't`, `never`, `not for`, `avoid`,
//!   `instead`;
//! - **parameters** — every property of the schema has a non-empty `description` in the schema
//!   or is named in the description text (a tool with no properties passes if the text says
//!   `no parameters` / `takes no` / `call it with {}`);
//! - **returns** — it contains `return`, `returns`, `result` or `output`;
//! - **errors** — it contains `error`, `fails`, `never fails` or `failure`.
//!
//! Matching is case-insensitive.

use serde::Serialize;
use serde_json::Value;

use super::definition::ToolDefinition;

/// One problem with one tool's description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub tool: String,
    /// `what`, `when`, `when_not`, `parameters`, `returns` or `errors`.
    pub part: &'static str,
    pub message: String,
}

const WHEN: &[&str] = &[
    "use it", "use this", "use when", "use for", "when ", "call it",
];
const WHEN_NOT: &[&str] = &["do not", "don't", "never", "not for", "avoid", "instead"];
const RETURNS: &[&str] = &["return", "result", "output"];
const ERRORS: &[&str] = &["error", "fails", "failure"];
const NO_PARAMS: &[&str] = &["no parameters", "takes no", "call it with {}"];

/// Every finding for `definition` (empty when the description passes).
pub fn lint(definition: &ToolDefinition) -> Vec<Finding> {
    let text = definition.description.to_lowercase();
    let mut findings = Vec::new();
    let mut flag = |part: &'static str, message: String| {
        findings.push(Finding {
            tool: definition.name.clone(),
            part,
            message,
        })
    };
    let first_sentence_words = text
        .split(['.', '!', '?'])
        .next()
        .map_or(0, |s| s.split_whitespace().count());
    if text.chars().count() < 20 || first_sentence_words < 3 {
        flag(
            "what",
            "say what the tool does in a first sentence of 3+ words".into(),
        );
    }
    if !contains_any(&text, WHEN) {
        flag("when", "say when to use it (\"Use it for/when …\")".into());
    }
    if !contains_any(&text, WHEN_NOT) {
        flag(
            "when_not",
            "say when not to use it (\"do not use it for …\")".into(),
        );
    }
    let missing = undescribed_parameters(&definition.input_schema, &text);
    if !missing.is_empty() {
        flag(
            "parameters",
            format!("describe each parameter: {}", missing.join(", ")),
        );
    }
    if !contains_any(&text, RETURNS) {
        flag("returns", "say what it returns (\"Returns {…}\")".into());
    }
    if !contains_any(&text, ERRORS) {
        flag(
            "errors",
            "say how it fails (\"Errors: …\" or \"Never fails\")".into(),
        );
    }
    findings
}

fn contains_any(text: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| text.contains(n))
}

/// Properties with neither a schema description nor a mention in the text.
fn undescribed_parameters(schema: &Value, text: &str) -> Vec<String> {
    let props = schema.get("properties").and_then(Value::as_object);
    match props {
        Some(props) if !props.is_empty() => props
            .iter()
            .filter(|(name, prop)| {
                let described = prop
                    .get("description")
                    .and_then(Value::as_str)
                    .is_some_and(|d| !d.trim().is_empty());
                !described && !text.contains(&name.to_lowercase())
            })
            .map(|(name, _)| name.clone())
            .collect(),
        _ if contains_any(text, NO_PARAMS) => Vec::new(),
        _ => vec!["(say \"takes no parameters\")".to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::builtin::{all_names, builtin, store_names, with_stores, BuiltinData};
    use crate::tools::stores::ToolStores;
    use serde_json::json;

    fn def(description: &str, schema: Value) -> ToolDefinition {
        ToolDefinition::from_spec(
            crate::llm::ToolSpec {
                name: "t".into(),
                description: description.into(),
                input_schema: schema,
            },
            std::time::Duration::from_secs(1),
        )
    }

    #[test]
    fn every_builtin_description_passes_lint() {
        let data = BuiltinData::demo().unwrap();
        let stores = ToolStores::temporary().unwrap();
        let tools = all_names()
            .iter()
            .map(|n| builtin(n, &data).unwrap())
            .chain(
                store_names()
                    .iter()
                    .map(|n| with_stores(n, &stores).unwrap()),
            );
        for tool in tools {
            let findings = lint(&tool.definition());
            assert!(findings.is_empty(), "{findings:?}");
        }
    }

    #[test]
    fn a_terse_description_gets_one_finding_per_missing_part() {
        let d = def(
            "Counts.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        );
        let parts: Vec<&str> = lint(&d).iter().map(|f| f.part).collect();
        assert_eq!(
            parts,
            vec![
                "what",
                "when",
                "when_not",
                "parameters",
                "returns",
                "errors"
            ]
        );
    }

    #[test]
    fn a_parameter_described_in_the_schema_passes() {
        let d = def(
            "Count the words of a text. Use it for word counts; do not use it for characters. \
             Returns {count}. Errors: invalid_arguments.",
            json!({"type": "object", "properties": {"body": {"type": "string", "description": "the text"}}}),
        );
        assert!(lint(&d).is_empty(), "{:?}", lint(&d));
    }
}
