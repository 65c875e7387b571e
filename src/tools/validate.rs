//! Argument validation: a tool's JSON Schema compiled once into a [`Validator`], and
//! [`validate_and_repair`], which checks a model's arguments, applies only the documented safe
//! repairs (see [`repair`]) when they are invalid, re-validates, and otherwise returns a
//! structured `invalid_arguments` error with one `/path: problem` line per violation.
//!
//! `format` is asserted (not just annotated), so `format: "date"` rejects `2025/11/11`. Remote
//! `$ref`s are not resolved (the crate is built without network features): such a schema fails
//! to compile, with a clear error, when the tool is registered.

mod dates;
mod repair;

use std::collections::HashSet;
use std::fmt;

use jsonschema::error::ValidationErrorKind;
use jsonschema::ValidationError;
use serde_json::Value;

use super::{PreparedCall, ToolError, ToolErrorCode};

/// The hint attached to every `invalid_arguments` error.
pub const FIX_ARGUMENTS_HINT: &str = "fix the arguments and call again";
/// At most this many violations are listed in an error's `details`.
const MAX_DETAILS: usize = 20;
/// A single violation line is cut to this many characters (instances can be large).
const MAX_DETAIL_CHARS: usize = 240;

/// A tool's input schema that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the input schema does not compile: {reason}; fix the schema (JSON Schema, draft 2020-12 unless `$schema` says otherwise, local `$ref`s only) and register again")]
pub struct SchemaError {
    pub reason: String,
}

/// A compiled JSON Schema plus the schema itself (the repair walk reads its `properties`).
pub struct Validator {
    schema: Value,
    compiled: jsonschema::Validator,
}

impl fmt::Debug for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Validator")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl Validator {
    /// Compile `schema` once, with `format` assertion enabled.
    pub fn new(schema: &Value) -> Result<Self, SchemaError> {
        if !schema.is_object() {
            return Err(SchemaError {
                reason: format!("expected a JSON object, got {}", kind_of(schema)),
            });
        }
        let compiled = jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .map_err(|e| SchemaError {
                reason: e.to_string(),
            })?;
        Ok(Self {
            schema: schema.clone(),
            compiled,
        })
    }

    /// The schema this validator was compiled from.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Whether `instance` satisfies the schema.
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.compiled.is_valid(instance)
    }

    /// Every violation as (`instance pointer`, `/path: problem` line).
    fn violations(&self, instance: &Value) -> Vec<(String, String)> {
        self.compiled
            .iter_errors(instance)
            .map(|error| {
                let pointer = error.instance_path().as_str().to_string();
                let line = describe(&error);
                (pointer, line)
            })
            .collect()
    }
}

/// Validate `arguments` against `validator`, applying only safe repairs.
///
/// A JSON string that holds an object is parsed first (and reported as a correction); any
/// other non-object is rejected. Valid arguments come back unchanged with no corrections.
pub fn validate_and_repair(
    validator: &Validator,
    arguments: Value,
) -> Result<PreparedCall, ToolError> {
    let (mut arguments, mut corrections) = into_object(arguments)?;
    let violations = validator.violations(&arguments);
    if violations.is_empty() {
        return Ok(PreparedCall {
            arguments,
            corrections,
        });
    }
    let flagged: HashSet<String> = violations.iter().map(|(p, _)| p.clone()).collect();
    let repairs = repair::repair(validator.schema(), &mut arguments, &flagged);
    let remaining = if repairs.is_empty() {
        violations
    } else {
        validator.violations(&arguments)
    };
    if remaining.is_empty() {
        corrections.extend(repairs);
        return Ok(PreparedCall {
            arguments,
            corrections,
        });
    }
    Err(invalid_arguments(remaining, repairs.len()))
}

/// Turn the arguments into an object, parsing a JSON string that holds one.
fn into_object(arguments: Value) -> Result<(Value, Vec<String>), ToolError> {
    match arguments {
        Value::Object(_) => Ok((arguments, Vec::new())),
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
            Ok(parsed @ Value::Object(_)) => Ok((
                parsed,
                vec![
                    "/: a JSON string → the object it holds (arguments sent as a string)"
                        .to_string(),
                ],
            )),
            _ => Err(not_an_object("a string that is not a JSON object")),
        },
        other => Err(not_an_object(kind_of(&other))),
    }
}

fn not_an_object(what: &str) -> ToolError {
    ToolError::new(
        ToolErrorCode::InvalidArguments,
        format!("the arguments must be a JSON object, got {what}"),
    )
    .with_hint(FIX_ARGUMENTS_HINT)
    .with_details(vec![format!("/: expected an object, got {what}")])
}

fn invalid_arguments(violations: Vec<(String, String)>, repairs_tried: usize) -> ToolError {
    let total = violations.len();
    let mut details: Vec<String> = violations
        .into_iter()
        .map(|(_, line)| line)
        .take(MAX_DETAILS)
        .collect();
    if total > MAX_DETAILS {
        details.push(format!("… and {} more", total - MAX_DETAILS));
    }
    let plural = if total == 1 { "" } else { "s" };
    let mut message =
        format!("the arguments do not match the tool's schema ({total} problem{plural})");
    if repairs_tried > 0 {
        message.push_str(&format!(
            "; {repairs_tried} safe repair(s) were applied but were not enough"
        ));
    }
    ToolError::new(ToolErrorCode::InvalidArguments, message)
        .with_hint(FIX_ARGUMENTS_HINT)
        .with_details(details)
}

/// One `/path: problem` line for a violation.
fn describe(error: &ValidationError<'_>) -> String {
    let path = match error.instance_path().as_str() {
        "" => "/",
        other => other,
    };
    let problem = match error.kind() {
        ValidationErrorKind::AnyOf { context } => one_of_required(context)
            .unwrap_or_else(|| "does not match any of the allowed forms".to_string()),
        _ => error.to_string(),
    };
    let line = format!("{path}: {problem}");
    if line.chars().count() <= MAX_DETAIL_CHARS {
        return line;
    }
    let cut: String = line.chars().take(MAX_DETAIL_CHARS).collect();
    format!("{cut}…")
}

/// For an `anyOf` whose branches each fail only on `required`: "needs at least one of: …".
fn one_of_required(branches: &[Vec<ValidationError<'static>>]) -> Option<String> {
    let mut names = Vec::new();
    for error in branches.iter().flatten() {
        match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property
                    .as_str()
                    .map_or_else(|| property.to_string(), str::to_string);
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            _ => return None,
        }
    }
    (!names.is_empty()).then(|| format!("needs at least one of: {}", names.join(", ")))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn order_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "order_date": {"type": "string", "format": "date"},
                "placed_at": {"type": "string", "format": "date-time"},
                "category": {"type": "string", "enum": ["headphones", "phone", "laptop"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20},
                "price": {"type": "number"},
                "gift": {"type": "boolean"},
                "shipping": {
                    "type": "object",
                    "properties": {"express": {"type": "boolean"}, "days": {"type": "integer"}}
                }
            },
            "required": ["order_id"],
            "additionalProperties": false
        })
    }

    fn prepare(arguments: Value) -> Result<PreparedCall, ToolError> {
        let validator = Validator::new(&order_schema()).unwrap();
        validate_and_repair(&validator, arguments)
    }

    #[test]
    fn valid_arguments_pass_unchanged_with_no_corrections() {
        let args = json!({"order_id": " A1 ", "order_date": "2025-11-11", "limit": 3});
        let prepared = prepare(args.clone()).unwrap();
        assert_eq!(prepared.arguments, args);
        assert!(prepared.corrections.is_empty());
    }

    #[test]
    fn integer_sent_as_string_is_repaired_and_reported() {
        let prepared = prepare(json!({"order_id": "A1", "limit": "3"})).unwrap();
        assert_eq!(prepared.arguments["limit"], json!(3));
        assert_eq!(
            prepared.corrections,
            vec![r#"/limit: "3" → 3 (integer sent as a string)"#]
        );
    }

    #[test]
    fn number_with_whitespace_sent_as_string_is_repaired() {
        let prepared = prepare(json!({"order_id": "A1", "price": " 2.5 "})).unwrap();
        assert_eq!(prepared.arguments["price"], json!(2.5));
        assert_eq!(prepared.corrections.len(), 1);
    }

    #[test]
    fn boolean_sent_as_string_in_any_case_is_repaired() {
        let prepared = prepare(json!({"order_id": "A1", "gift": "TRUE"})).unwrap();
        assert_eq!(prepared.arguments["gift"], json!(true));
        assert_eq!(
            prepared.corrections,
            vec![r#"/gift: "TRUE" → true (boolean sent as a string)"#]
        );
    }

    #[test]
    fn nested_object_values_are_repaired() {
        let args = json!({"order_id": "A1", "shipping": {"express": "false", "days": "2"}});
        let prepared = prepare(args).unwrap();
        assert_eq!(
            prepared.arguments["shipping"],
            json!({"express": false, "days": 2})
        );
        assert_eq!(prepared.corrections.len(), 2);
    }

    #[test]
    fn enum_value_in_wrong_case_is_matched() {
        let prepared = prepare(json!({"order_id": "A1", "category": "Headphones"})).unwrap();
        assert_eq!(prepared.arguments["category"], json!("headphones"));
        assert_eq!(
            prepared.corrections,
            vec![
                r#"/category: "Headphones" → "headphones" (enum value matched case-insensitively)"#
            ]
        );
    }

    #[test]
    fn slash_date_is_normalised_to_iso_8601() {
        let prepared = prepare(json!({"order_id": "A1", "order_date": "2025/11/11"})).unwrap();
        assert_eq!(prepared.arguments["order_date"], json!("2025-11-11"));
        assert_eq!(
            prepared.corrections,
            vec![r#"/order_date: "2025/11/11" → "2025-11-11" (date normalised to ISO-8601)"#]
        );
    }

    #[test]
    fn chinese_date_is_normalised_to_iso_8601() {
        let prepared = prepare(json!({"order_id": "A1", "order_date": "2025年11月11日"})).unwrap();
        assert_eq!(prepared.arguments["order_date"], json!("2025-11-11"));
        assert_eq!(prepared.corrections.len(), 1);
    }

    #[test]
    fn date_time_with_space_is_normalised_to_rfc_3339() {
        let args = json!({"order_id": "A1", "placed_at": "2025-11-11 08:00:00+08:00"});
        let prepared = prepare(args).unwrap();
        assert_eq!(
            prepared.arguments["placed_at"],
            json!("2025-11-11T08:00:00+08:00")
        );
    }

    #[test]
    fn ambiguous_date_is_rejected_not_guessed() {
        let err = prepare(json!({"order_id": "A1", "order_date": "03/04/2025"})).unwrap_err();
        assert_eq!(err.code, ToolErrorCode::InvalidArguments);
        assert_eq!(err.details.len(), 1);
        assert!(err.details[0].starts_with("/order_date: "), "{err:?}");
    }

    #[test]
    fn non_numeric_string_for_integer_is_rejected_with_path() {
        let err = prepare(json!({"order_id": "A1", "limit": "three"})).unwrap_err();
        assert_eq!(err.code, ToolErrorCode::InvalidArguments);
        assert_eq!(err.hint.as_deref(), Some(FIX_ARGUMENTS_HINT));
        assert_eq!(
            err.details,
            vec![r#"/limit: "three" is not of type "integer""#]
        );
    }

    #[test]
    fn non_integral_string_for_integer_is_rejected() {
        let err = prepare(json!({"order_id": "A1", "limit": "2.5"})).unwrap_err();
        assert!(err.details[0].starts_with("/limit: "), "{err:?}");
    }

    #[test]
    fn missing_required_field_is_rejected_not_invented() {
        let err = prepare(json!({"limit": 3})).unwrap_err();
        assert_eq!(err.code, ToolErrorCode::InvalidArguments);
        assert_eq!(err.details, vec![r#"/: "order_id" is a required property"#]);
    }

    #[test]
    fn repaired_value_still_out_of_range_reports_the_remaining_problem() {
        let err = prepare(json!({"order_id": "A1", "limit": "50"})).unwrap_err();
        assert!(err.message.contains("safe repair"), "{}", err.message);
        assert_eq!(err.details.len(), 1);
        assert!(err.details[0].starts_with("/limit: 50 "), "{err:?}");
    }

    #[test]
    fn arguments_sent_as_json_string_are_parsed_and_reported() {
        let prepared = prepare(json!(r#"{"order_id": "A1"}"#)).unwrap();
        assert_eq!(prepared.arguments, json!({"order_id": "A1"}));
        assert_eq!(prepared.corrections.len(), 1);
    }

    #[test]
    fn non_object_arguments_are_rejected() {
        for args in [json!([1]), json!(null), json!("not json"), json!("[1, 2]")] {
            let err = prepare(args).unwrap_err();
            assert_eq!(err.code, ToolErrorCode::InvalidArguments);
        }
    }

    #[test]
    fn any_of_required_reports_the_alternatives() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}]
        });
        let validator = Validator::new(&schema).unwrap();
        let err = validate_and_repair(&validator, json!({})).unwrap_err();
        assert_eq!(err.details, vec!["/: needs at least one of: a, b"]);
    }

    #[test]
    fn schema_that_does_not_compile_is_a_clear_error() {
        let err = Validator::new(&json!({"type": "no-such-type"})).unwrap_err();
        assert!(err.to_string().contains("does not compile"), "{err}");
        assert!(Validator::new(&json!(true)).is_err());
        let remote = json!({"$ref": "https://example.com/schema.json"});
        assert!(Validator::new(&remote).is_err());
    }
}
