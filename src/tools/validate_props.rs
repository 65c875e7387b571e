//! Property tests of argument validation and repair (fuzzing by proptest): for arguments of
//! any shape, the result is either arguments the schema accepts (each repair named) or an
//! `invalid_arguments` error — never a panic, never a repaired value the schema refuses.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::validate::{validate_and_repair, Validator};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        "\\PC{0,16}".prop_map(Value::String),
        "[0-9]{1,4}(\\.[0-9]{1,2})?".prop_map(Value::String),
        "20[0-9]{2}[/.-][01][0-9][/.-][0-3][0-9]".prop_map(Value::String),
        prop::sample::select(vec!["true", "false", "Headphones", "PHONE", "yes"])
            .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "order_id", "limit", "date", "category", "tags", "flag", "x"
                ]),
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

/// A schema with every kind of field repair handles.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
            "date": {"type": "string", "format": "date"},
            "category": {"type": "string", "enum": ["headphones", "phone", "laptop"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "flag": {"type": "boolean"}
        },
        "required": ["order_id"],
        "additionalProperties": false
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn repair_yields_valid_arguments_or_an_error(arguments in json_value()) {
        let validator = Validator::new(&schema()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Ok(prepared) = validate_and_repair(&validator, arguments.clone()) {
            prop_assert!(validator.is_valid(&prepared.arguments), "{:?} → {:?}", arguments, prepared.arguments);
            if prepared.arguments != arguments {
                prop_assert!(!prepared.corrections.is_empty(), "a change is always named");
            }
        }
    }

    #[test]
    fn arguments_sent_as_a_json_string_are_treated_like_the_object(arguments in json_value()) {
        let validator = Validator::new(&schema()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let as_text = Value::String(arguments.to_string());
        let direct = validate_and_repair(&validator, arguments.clone()).map(|p| p.arguments);
        let via_text = validate_and_repair(&validator, as_text).map(|p| p.arguments);
        if arguments.is_object() {
            prop_assert_eq!(direct.ok(), via_text.ok());
        }
    }
}
