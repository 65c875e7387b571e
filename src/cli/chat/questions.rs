//! How `hermes chat` shows what a tool's MCP server asks the user (`confirmation.required`
//! with `questions`): each question with its form's fields or its URL, and how to answer.

use serde_json::Value;

use super::render::Look;
use hermes::protocol::McpQuestion;

/// The lines under the call's label: one per question, then how to answer.
pub fn lines(look: &Look, questions: &[McpQuestion]) -> Vec<String> {
    let mut lines: Vec<String> = questions
        .iter()
        .map(|q| {
            let how = match (&q.url, &q.schema) {
                (Some(url), _) => format!("visit {url}, then /confirm"),
                (None, Some(schema)) => format!("form {}", form_fields(schema)),
                (None, None) => String::new(),
            };
            format!("    {} {how}", look.bold(&q.message))
        })
        .collect();
    lines.push(format!(
        "    {}",
        look.dim("/confirm {JSON} answers (alone: the defaults) · /deny declines")
    ));
    lines
}

/// A form's fields as `{name: type = default, …}`, for the person answering.
fn form_fields(schema: &Value) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "{}".to_owned();
    };
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, p)| {
            let kind = p.get("type").and_then(Value::as_str).unwrap_or("any");
            match p.get("default") {
                Some(default) => format!("{name}: {kind} = {default}"),
                None => format!("{name}: {kind}"),
            }
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_form_shows_its_fields_with_their_defaults() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"},
            "age": {"type": "integer"}
        }});
        assert_eq!(
            form_fields(&schema),
            r#"{age: integer, name: string = "Ada"}"#
        );
        assert_eq!(form_fields(&json!({})), "{}");
    }
}
