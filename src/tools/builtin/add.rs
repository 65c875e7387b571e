//! `add`: adds two integers. Tiny on purpose: the benchmarks use it to measure the tool path
//! (validation, execution, transform) without tool work in the way.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::llm::ToolSpec;
use crate::tools::{Tool, ToolError, ToolErrorCode};

pub const NAME: &str = "add";

const DESCRIPTION: &str = "Add two integers exactly and return their sum. \
Use it for integer addition whose result must be exact; do not use it for decimals, \
other arithmetic, or numbers outside the 64-bit signed range. \
Parameters: `a` and `b`, both required JSON integers (e.g. 2, -15). \
Returns {\"result\": a + b}. \
Errors: invalid_arguments when a parameter is missing or not an integer; \
execution_failed when the sum overflows a 64-bit signed integer.";

/// The `add` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct Add;

#[async_trait]
impl Tool for Add {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: DESCRIPTION.to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "first addend, a JSON integer"},
                    "b": {"type": "integer", "description": "second addend, a JSON integer"}
                },
                "required": ["a", "b"],
                "additionalProperties": false
            }),
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(5)
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let a = operand(&arguments, "a")?;
        let b = operand(&arguments, "b")?;
        let sum = a.checked_add(b).ok_or_else(|| {
            ToolError::new(
                ToolErrorCode::ExecutionFailed,
                format!("{a} + {b} overflows a 64-bit signed integer"),
            )
            .with_hint("use smaller numbers; the sum must lie within ±9223372036854775807")
        })?;
        Ok(json!({"result": sum}))
    }
}

fn operand(arguments: &Value, key: &str) -> Result<i64, ToolError> {
    arguments.get(key).and_then(Value::as_i64).ok_or_else(|| {
        ToolError::new(
            ToolErrorCode::ExecutionFailed,
            format!("`{key}` is missing or not a 64-bit signed integer"),
        )
        .with_hint("send `a` and `b` as integers within ±9223372036854775807")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn adds_two_integers() {
        let out = Add.call(json!({"a": 2, "b": -5})).await.unwrap();
        assert_eq!(out, json!({"result": -3}));
    }

    #[tokio::test]
    async fn overflow_is_an_execution_failure() {
        let err = Add.call(json!({"a": i64::MAX, "b": 1})).await.unwrap_err();
        assert_eq!(err.code, ToolErrorCode::ExecutionFailed);
        assert!(err.message.contains("overflows"), "{}", err.message);
    }

    #[tokio::test]
    async fn integer_beyond_i64_is_an_execution_failure() {
        let err = Add.call(json!({"a": u64::MAX, "b": 1})).await.unwrap_err();
        assert_eq!(err.code, ToolErrorCode::ExecutionFailed);
    }
}
