//! The result transform: how a tool result enters the model's context, and the identifiers
//! worth keeping in the key-facts region. Pure functions; the turn decides where they go.
//!
//! [`transform`] turns a [`ToolCallResult`] into a [`TransformedResult`]
//! `{tool_use_id, tool_name, status, summary, detail, raw_reference}`:
//! - `summary` — at most [`SUMMARY_MAX_CHARS`] characters: for an error its code and message;
//!   for an async submission the job id; otherwise `count`/`note`/`result`/`summary`/`status`
//!   fields when the output has them, else the first characters of the compact JSON.
//! - `detail` — the compact JSON output (or the error object), cut to `detail_budget`
//!   characters on a character boundary with `…[trimmed N chars; see raw_reference]` appended.
//! - `raw_reference` — where the full output stays (`tool_raw_get` reads it).
//!
//! [`extract_identifiers`] finds identifiers in any JSON (strings and object keys' values):
//! - `order_id` — `[A-Z]{2,5}-\d{6,8}-\d{2,6}` (e.g. `JD-20251111-0042`), or any value of a
//!   key named `order_id`;
//! - `user_id` — `u-\d{3,}` (e.g. `u-1001`), or any value of a key named `user_id` / `user`;
//! - `tracking_number` — values of keys named `tracking`/`tracking_number`, and
//!   `SF\d{10,15}`, `JD[A-Z]?\d{10,15}`, `YT\d{10,15}`, `1Z[0-9A-Z]{16}` patterns;
//! - `job_id` — `job-[0-9a-f]{32}`.
//!
//! Results are deduplicated, in order of appearance, at most [`MAX_IDENTIFIERS`].

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::protocol::{ToolCallResult, ToolStatus};

/// Longest summary, in characters.
pub const SUMMARY_MAX_CHARS: usize = 100;
/// A sensible default detail budget, in characters (≈ 500 tokens).
pub const DEFAULT_DETAIL_CHARS: usize = 2000;
/// Most identifiers returned by [`extract_identifiers`].
pub const MAX_IDENTIFIERS: usize = 20;

/// A tool result as it enters the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransformedResult {
    pub tool_use_id: String,
    pub tool_name: String,
    /// `ok` or `error`.
    pub status: String,
    pub summary: String,
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_reference: Option<String>,
}

/// One identifier found in a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identifier {
    /// `order_id`, `user_id`, `tracking_number` or `job_id`.
    pub kind: String,
    pub value: String,
}

/// Transform a result for the context; `detail_budget` is in characters.
pub fn transform(result: &ToolCallResult, detail_budget: usize) -> TransformedResult {
    let (status, body) = detail_body(result);
    TransformedResult {
        tool_use_id: result.call_id.clone(),
        tool_name: result.name.clone(),
        status: status.to_string(),
        summary: summarize(result),
        detail: trim_chars(&body.to_string(), detail_budget),
        raw_reference: result.raw_reference.clone(),
    }
}

/// The result's status and the JSON its `detail` shows (a plain output as it is, uncopied).
fn detail_body(result: &ToolCallResult) -> (&'static str, Cow<'_, Value>) {
    match result.status {
        ToolStatus::Ok if result.auto_corrected => (
            "ok",
            Cow::Owned(
                json!({"output": result.output, "auto_corrected": true, "corrections": result.corrections}),
            ),
        ),
        ToolStatus::Ok => ("ok", Cow::Borrowed(&result.output)),
        ToolStatus::Error => ("error", Cow::Owned(json!({"error": result.error}))),
    }
}

/// Whether the context shows all of `result`: its `detail` at [`DEFAULT_DETAIL_CHARS`] is not
/// cut. A copy of such an output behind a `raw_reference` would add nothing, so the executor
/// keeps raw outputs only for results this is false for.
pub fn shown_in_full(result: &ToolCallResult) -> bool {
    let (_, body) = detail_body(result);
    let text = body.to_string();
    // Bytes bound characters from above: most outputs are decided without counting.
    text.len() <= DEFAULT_DETAIL_CHARS || text.chars().count() <= DEFAULT_DETAIL_CHARS
}

fn summarize(result: &ToolCallResult) -> String {
    let text = match (&result.status, &result.error) {
        (ToolStatus::Error, Some(e)) => format!("{:?}: {}", e.code, e.message),
        (ToolStatus::Error, None) => "error".to_string(),
        (ToolStatus::Ok, _) => ok_summary(&result.output),
    };
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    cut(&text, SUMMARY_MAX_CHARS)
}

fn ok_summary(output: &Value) -> String {
    if let (Some(job), Some(status)) = (
        output.get("job_id").and_then(Value::as_str),
        output.get("status").and_then(Value::as_str),
    ) {
        return format!("job {job} {status}");
    }
    let mut parts = Vec::new();
    for key in ["summary", "count", "result", "status", "note"] {
        match output.get(key) {
            Some(Value::String(s)) => parts.push(format!("{key}: {s}")),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => parts.push(format!("{key}: {v}")),
            _ => {}
        }
    }
    if parts.is_empty() {
        output.to_string()
    } else {
        parts.join("; ")
    }
}

/// At most `max` characters, ending in `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `text` within `budget` characters plus a marker saying how much was cut.
pub fn trim_chars(text: &str, budget: usize) -> String {
    let total = text.chars().count();
    if total <= budget {
        return text.to_string();
    }
    let kept: String = text.chars().take(budget).collect();
    format!(
        "{kept}…[trimmed {} chars; see raw_reference]",
        total - budget
    )
}

struct Patterns {
    order: Regex,
    user: Regex,
    tracking: Regex,
    job: Regex,
}

fn patterns() -> Option<&'static Patterns> {
    static P: OnceLock<Option<Patterns>> = OnceLock::new();
    P.get_or_init(|| {
        Some(Patterns {
            order: Regex::new(r"\b[A-Z]{2,5}-\d{6,8}-\d{2,6}\b").ok()?,
            user: Regex::new(r"\bu-\d{3,}\b").ok()?,
            tracking: Regex::new(
                r"\b(?:SF\d{10,15}|JD[A-Z]?\d{10,15}|YT\d{10,15}|1Z[0-9A-Z]{16})\b",
            )
            .ok()?,
            job: Regex::new(r"\bjob-[0-9a-f]{32}\b").ok()?,
        })
    })
    .as_ref()
}

/// Identifiers in `value` (see the module doc for the rules).
pub fn extract_identifiers(value: &Value) -> Vec<Identifier> {
    let mut out = Vec::new();
    walk(value, None, &mut out);
    out.truncate(MAX_IDENTIFIERS);
    out
}

fn walk(value: &Value, key: Option<&str>, out: &mut Vec<Identifier>) {
    match value {
        Value::Object(map) => map.iter().for_each(|(k, v)| walk(v, Some(k), out)),
        Value::Array(items) => items.iter().for_each(|v| walk(v, key, out)),
        Value::String(s) => scan(s, key, out),
        _ => {}
    }
}

fn scan(text: &str, key: Option<&str>, out: &mut Vec<Identifier>) {
    let keyed = match key {
        Some("order_id") => Some("order_id"),
        Some("user_id" | "user") => Some("user_id"),
        Some("tracking" | "tracking_number") => Some("tracking_number"),
        Some("job_id") => Some("job_id"),
        _ => None,
    };
    if let Some(kind) = keyed {
        if !text.is_empty() && text.chars().count() <= 64 {
            push(out, kind, text);
        }
    }
    let Some(p) = patterns() else { return };
    for (kind, re) in [
        ("order_id", &p.order),
        ("user_id", &p.user),
        ("tracking_number", &p.tracking),
        ("job_id", &p.job),
    ] {
        for m in re.find_iter(text) {
            push(out, kind, m.as_str());
        }
    }
}

fn push(out: &mut Vec<Identifier>, kind: &str, value: &str) {
    if out.len() < MAX_IDENTIFIERS && !out.iter().any(|i| i.kind == kind && i.value == value) {
        out.push(Identifier {
            kind: kind.to_string(),
            value: value.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{ToolError, ToolErrorCode};

    fn ok(output: Value) -> ToolCallResult {
        ToolCallResult {
            call_id: "c1".into(),
            name: "order_lookup".into(),
            status: ToolStatus::Ok,
            output,
            error: None,
            auto_corrected: false,
            corrections: Vec::new(),
            via: "builtin".into(),
            duration_ms: 1,
            raw_reference: Some("raw-1".into()),
        }
    }

    #[test]
    fn long_output_is_trimmed_to_budget_with_reference() {
        let orders: Vec<Value> = (0..200)
            .map(|i| json!({"order_id": format!("JD-20251111-{i:04}")}))
            .collect();
        let t = transform(&ok(json!({"orders": orders, "count": 200})), 300);
        assert_eq!(t.tool_use_id, "c1");
        assert_eq!(t.status, "ok");
        assert_eq!(t.summary, "count: 200");
        assert!(t.detail.starts_with("{\"count\":200"), "{}", t.detail);
        assert!(t.detail.contains("…[trimmed "), "{}", t.detail);
        assert!(t.detail.chars().count() < 360);
        assert_eq!(t.raw_reference.as_deref(), Some("raw-1"));
    }

    #[test]
    fn summary_never_exceeds_100_chars() {
        let t = transform(&ok(json!({"summary": "x".repeat(500)})), 50);
        assert_eq!(t.summary.chars().count(), SUMMARY_MAX_CHARS);
        let t = transform(&ok(json!(["多字节".repeat(80)])), 50);
        assert_eq!(t.summary.chars().count(), SUMMARY_MAX_CHARS);
    }

    #[test]
    fn error_result_summarises_code_and_message() {
        let mut r = ok(Value::Null);
        r.status = ToolStatus::Error;
        r.error = Some(ToolError::new(ToolErrorCode::Timeout, "`x` did not finish"));
        let t = transform(&r, 1000);
        assert_eq!(t.status, "error");
        assert_eq!(t.summary, "Timeout: `x` did not finish");
        assert!(t.detail.contains("\"code\":\"timeout\""), "{}", t.detail);
    }

    #[test]
    fn async_submission_summary_names_the_job() {
        let t = transform(&ok(json!({"job_id": "job-1", "status": "submitted"})), 1000);
        assert_eq!(t.summary, "job job-1 submitted");
    }

    #[test]
    fn identifiers_are_found_by_key_and_by_pattern_once_each() {
        let v = json!({
            "orders": [
                {"order_id": "JD-20251111-0042", "tracking": "SF1234567890123", "note": "for u-1001"},
                {"order_id": "JD-20251111-0042", "text": "see JD-20250101-0007 and job-0123456789abcdef0123456789abcdef"}
            ],
            "user_id": "alice"
        });
        let ids = extract_identifiers(&v);
        let pairs: Vec<(&str, &str)> = ids
            .iter()
            .map(|i| (i.kind.as_str(), i.value.as_str()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("user_id", "u-1001"),
                ("order_id", "JD-20251111-0042"),
                ("tracking_number", "SF1234567890123"),
                ("order_id", "JD-20250101-0007"),
                ("job_id", "job-0123456789abcdef0123456789abcdef"),
                ("user_id", "alice"),
            ]
        );
    }
}
