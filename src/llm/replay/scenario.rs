//! The replay scenario file: its TOML shape, and validation at load with errors that name the
//! rule (rules are numbered from 1 in file order).
//!
//! ```toml
//! name = "demo"
//! description = "optional"
//! [[rule]]
//! role = "planner"            # planner | extractor | summariser
//! when_last = "user"          # user (default) | tool
//! contains = ["预算", "Sony"]  # optional, all must occur
//! after_tool = "order_lookup" # optional, only with when_last = "tool"
//! text = "…"                  # may be empty when tool_calls are given
//! stream_chunks = 4           # optional, ≥ 1
//! [[rule.tool_calls]]
//! name = "order_lookup"
//! arguments = { order_date = "2025/11/11" }   # any table → JSON object (dates → strings)
//! ```

use serde::Deserialize;
use serde_json::Value;

use crate::llm::LlmError;

/// The model roles a rule may serve.
pub(super) const ROLES: [&str; 3] = ["planner", "extractor", "summariser"];

/// What the last message of the request must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WhenLast {
    User,
    Tool,
}

/// One validated rule.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Rule {
    /// Position in the file, counting from 1.
    pub number: usize,
    pub role: String,
    pub when_last: WhenLast,
    pub contains: Vec<String>,
    pub after_tool: Option<String>,
    pub text: String,
    pub stream_chunks: Option<usize>,
    pub tool_calls: Vec<RuleCall>,
}

/// A tool call a rule answers with.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RuleCall {
    pub name: String,
    pub arguments: Value,
}

/// A validated scenario file.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Scenario {
    pub name: String,
    pub rules: Vec<Rule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    /// Free text for the reader of the file.
    #[serde(default, rename = "description")]
    _description: Option<String>,
    #[serde(default)]
    rule: Vec<toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    role: String,
    #[serde(default)]
    when_last: Option<String>,
    #[serde(default)]
    contains: Vec<String>,
    #[serde(default)]
    after_tool: Option<String>,
    #[serde(default)]
    text: String,
    #[serde(default)]
    stream_chunks: Option<i64>,
    #[serde(default)]
    tool_calls: Vec<RawCall>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    name: String,
    #[serde(default)]
    arguments: Option<toml::Value>,
}

/// Parse and validate a scenario; `origin` (a path or `builtin:demo`) names it in errors.
pub(super) fn parse(text: &str, origin: &str) -> Result<Scenario, LlmError> {
    let raw: RawScenario = toml::from_str(text).map_err(|e| {
        LlmError::Config(format!(
            "replay scenario {origin} is not valid TOML for a scenario: {e}"
        ))
    })?;
    if raw.name.trim().is_empty() {
        return Err(LlmError::Config(format!(
            "replay scenario {origin}: `name` is empty; give the scenario a name"
        )));
    }
    let rules = raw
        .rule
        .into_iter()
        .enumerate()
        .map(|(i, table)| {
            rule(table, i + 1).map_err(|problem| {
                LlmError::Config(format!(
                    "replay scenario {origin}: rule #{} (counting [[rule]] tables from 1): \
                     {problem}; fix that rule in the scenario file",
                    i + 1
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Scenario {
        name: raw.name,
        rules,
    })
}

/// Validate one rule; the error is the problem alone, the caller names file and rule.
fn rule(table: toml::Table, number: usize) -> Result<Rule, String> {
    let raw: RawRule = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| e.message().to_string())?;
    if !ROLES.contains(&raw.role.as_str()) {
        return Err(format!(
            "role `{}` is unknown; use one of {}",
            raw.role,
            ROLES.join(", ")
        ));
    }
    let when_last = match raw.when_last.as_deref() {
        None | Some("user") => WhenLast::User,
        Some("tool") => WhenLast::Tool,
        Some(other) => {
            return Err(format!(
                "when_last `{other}` is unknown; use \"user\" or \"tool\""
            ))
        }
    };
    if raw.after_tool.is_some() && when_last == WhenLast::User {
        return Err(
            "after_tool only applies with when_last = \"tool\"; add it or drop after_tool".into(),
        );
    }
    if raw
        .after_tool
        .as_deref()
        .is_some_and(|t| t.trim().is_empty())
    {
        return Err("after_tool is empty; name the tool or drop the key".into());
    }
    if raw.contains.iter().any(|c| c.is_empty()) {
        return Err("contains has an empty string, which matches everything; remove it".into());
    }
    let stream_chunks = match raw.stream_chunks {
        None => None,
        Some(n) if n >= 1 => Some(usize::try_from(n).map_err(|_| "stream_chunks is too large")?),
        Some(n) => return Err(format!("stream_chunks is {n}; it must be at least 1")),
    };
    let tool_calls = raw
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(k, call)| rule_call(call).map_err(|p| format!("tool_calls[{k}]: {p}")))
        .collect::<Result<Vec<_>, _>>()?;
    if raw.text.is_empty() && tool_calls.is_empty() {
        return Err("it has neither text nor tool_calls; give it a reply".into());
    }
    Ok(Rule {
        number,
        role: raw.role,
        when_last,
        contains: raw.contains,
        after_tool: raw.after_tool,
        text: raw.text,
        stream_chunks,
        tool_calls,
    })
}

fn rule_call(call: RawCall) -> Result<RuleCall, String> {
    if call.name.trim().is_empty() {
        return Err("name is empty; name the tool to call".into());
    }
    let arguments = match call.arguments {
        None => Value::Object(serde_json::Map::new()),
        Some(value @ toml::Value::Table(_)) => toml_to_json(value)?,
        Some(other) => {
            return Err(format!(
                "arguments must be a table like {{ key = \"value\" }}, not a {}",
                other.type_str()
            ))
        }
    };
    Ok(RuleCall {
        name: call.name,
        arguments,
    })
}

/// TOML → JSON; datetimes become their RFC 3339 text.
fn toml_to_json(value: toml::Value) -> Result<Value, String> {
    Ok(match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| format!("the float {f} cannot be written as JSON"))?,
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(toml_to_json)
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(table) => Value::Object(
            table
                .into_iter()
                .map(|(k, v)| Ok((k, toml_to_json(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn full_rule_is_parsed_with_arguments_as_json() {
        let text = r#"
name = "demo"
[[rule]]
role = "planner"
when_last = "tool"
contains = ["预算"]
after_tool = "order_lookup"
text = ""
stream_chunks = 2
[[rule.tool_calls]]
name = "refund"
arguments = { order = { id = 7, items = ["a", 1.5] }, when = 2025-11-11, ok = true }
"#;
        let scenario = parse(text, "t.toml").unwrap();
        assert_eq!(scenario.name, "demo");
        assert_eq!(
            scenario.rules,
            vec![Rule {
                number: 1,
                role: "planner".into(),
                when_last: WhenLast::Tool,
                contains: vec!["预算".into()],
                after_tool: Some("order_lookup".into()),
                text: String::new(),
                stream_chunks: Some(2),
                tool_calls: vec![RuleCall {
                    name: "refund".into(),
                    arguments: json!({"order": {"id": 7, "items": ["a", 1.5]}, "when": "2025-11-11", "ok": true}),
                }],
            }]
        );
    }

    #[test]
    fn when_last_defaults_to_user_and_tool_without_after_tool_is_allowed() {
        let text = "name = \"s\"\n[[rule]]\nrole = \"extractor\"\ntext = \"{}\"\n\
                    [[rule]]\nrole = \"planner\"\nwhen_last = \"tool\"\ntext = \"done\"\n";
        let rules = parse(text, "s").unwrap().rules;
        assert_eq!(rules[0].when_last, WhenLast::User);
        assert_eq!(
            (rules[1].when_last, rules[1].after_tool.as_deref()),
            (WhenLast::Tool, None)
        );
    }

    fn error_of(rule_body: &str) -> String {
        let text = format!(
            "name = \"s\"\n[[rule]]\nrole = \"planner\"\ntext = \"ok\"\n[[rule]]\n{rule_body}\n"
        );
        parse(&text, "bad.toml").unwrap_err().to_string()
    }

    #[test]
    fn invalid_rules_are_reported_with_their_number_and_problem() {
        let cases = [
            (
                "role = \"critic\"\ntext = \"x\"",
                "role `critic` is unknown",
            ),
            (
                "role = \"planner\"\nwhen_last = \"assistant\"\ntext = \"x\"",
                "when_last `assistant`",
            ),
            (
                "role = \"planner\"\nafter_tool = \"f\"\ntext = \"x\"",
                "after_tool only applies",
            ),
            (
                "role = \"planner\"\nwhen_last = \"user\"\nafter_tool = \"f\"\ntext = \"x\"",
                "after_tool only",
            ),
            ("role = \"planner\"", "neither text nor tool_calls"),
            (
                "role = \"planner\"\ntext = \"x\"\nstream_chunks = 0",
                "stream_chunks is 0",
            ),
            (
                "role = \"planner\"\ntext = \"x\"\ncontains = [\"\"]",
                "empty string",
            ),
            ("role = \"planner\"\ntxt = \"x\"", "unknown field `txt`"),
            (
                "role = \"planner\"\n[[rule.tool_calls]]\nname = \"f\"\narguments = 3",
                "must be a table",
            ),
            (
                "role = \"planner\"\n[[rule.tool_calls]]\nname = \"\"",
                "tool_calls[0]: name is empty",
            ),
        ];
        for (body, expected) in cases {
            let err = error_of(body);
            assert!(
                err.contains("bad.toml") && err.contains("rule #2"),
                "{body}: {err}"
            );
            assert!(
                err.contains(expected),
                "{body}: expected `{expected}` in: {err}"
            );
        }
    }

    #[test]
    fn file_level_problems_are_reported() {
        let err = parse("name = \"s\"\nrules = 1\n", "f")
            .unwrap_err()
            .to_string();
        assert!(err.contains("rules"), "{err}");
        let err = parse("name = \"\"\n", "f").unwrap_err().to_string();
        assert!(err.contains("`name` is empty"), "{err}");
    }
}
