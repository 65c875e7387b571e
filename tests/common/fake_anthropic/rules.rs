//! What the real Messages API refuses, as the fake checks it.

use serde_json::{json, Value};

use super::super::fake_http::Body;
use super::{error, signature};

fn invalid(message: &str) -> Option<hyper::Response<Body>> {
    Some(error(400, "invalid_request_error", message))
}

/// What the real API checks about a request; the refusal, if any.
pub(super) fn check(body: &Value) -> Option<hyper::Response<Body>> {
    let Some(max_tokens) = body["max_tokens"].as_u64() else {
        return invalid("max_tokens: Field required");
    };
    let thinking = body["thinking"]["type"] == "enabled";
    if thinking {
        let budget = body["thinking"]["budget_tokens"].as_u64().unwrap_or(0);
        if budget < 1024 {
            return invalid(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
            );
        }
        if budget >= max_tokens {
            return invalid("`max_tokens` must be greater than `thinking.budget_tokens`.");
        }
        if body.get("temperature").is_some_and(|t| t != &json!(1)) {
            return invalid("`temperature` may only be set to 1 when thinking is enabled or in interleaved thinking mode.");
        }
    }
    let blocks = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let mut breakpoints = 0;
    for block in blocks(&body["tools"])
        .iter()
        .chain(&blocks(&body["system"]))
    {
        breakpoints += usize::from(block.get("cache_control").is_some());
    }
    let messages = blocks(&body["messages"]);
    for (i, message) in messages.iter().enumerate() {
        for (j, block) in blocks(&message["content"]).iter().enumerate() {
            breakpoints += usize::from(block.get("cache_control").is_some());
            match block["type"].as_str() {
                Some("tool_result") => {
                    let asked = i
                        .checked_sub(1)
                        .map(|p| blocks(&messages[p]["content"]))
                        .unwrap_or_default()
                        .iter()
                        .any(|b| b["type"] == "tool_use" && b["id"] == block["tool_use_id"]);
                    if !asked {
                        return invalid(&format!("messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", block["tool_use_id"]));
                    }
                }
                Some("thinking") => {
                    let text = block["thinking"].as_str().unwrap_or_default();
                    if block["signature"].as_str() != Some(signature(text).as_str()) {
                        return invalid(&format!(
                            "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    if breakpoints > 4 {
        return invalid(&format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        ));
    }
    if thinking {
        if let Some(i) = messages.iter().rposition(|m| m["role"] == "assistant") {
            let content = blocks(&messages[i]["content"]);
            let loop_open = content.iter().any(|b| b["type"] == "tool_use")
                && messages.get(i + 1).is_some_and(|m| {
                    blocks(&m["content"])
                        .iter()
                        .any(|b| b["type"] == "tool_result")
                });
            let starts_thinking = content
                .first()
                .is_some_and(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking");
            if loop_open && !starts_thinking {
                return invalid(&format!("messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`.", content.first().map_or("none".into(), |b| b["type"].as_str().unwrap_or("").to_string())));
            }
        }
    }
    None
}
