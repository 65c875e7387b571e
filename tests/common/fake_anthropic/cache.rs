//! The fake's prompt cache: prefixes written at breakpoints, read back by later requests.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::super::fake_http::digest;

/// The prompt as the cache sees it: each block without its `cache_control`, and whether it
/// carried one.
fn prompt_blocks(body: &Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut add = |prefix: &str, block: &Value| {
        let mut plain = block.clone();
        let marked = plain
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .is_some();
        out.push((format!("{prefix}{plain}"), marked));
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        add("tool:", tool);
    }
    for block in body["system"].as_array().into_iter().flatten() {
        add("system:", block);
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or_default().to_string();
        for block in message["content"].as_array().into_iter().flatten() {
            add(&format!("{role}:"), block);
        }
    }
    out
}

/// Read the longest cached prefix, write the breakpoints' prefixes; the usage that results.
pub(super) fn cache_usage(body: &Value, cache: &mut HashSet<String>, reply: &[Value]) -> Value {
    let blocks = prompt_blocks(body);
    let total: usize = blocks.iter().map(|(b, _)| b.len()).sum::<usize>() / 4;
    let last_mark = blocks.iter().rposition(|(_, marked)| *marked);
    let mut prefix = String::new();
    let mut boundaries = Vec::new();
    for (block, marked) in &blocks {
        prefix.push_str(block);
        boundaries.push((digest(&prefix), prefix.len() / 4, *marked));
    }
    let upto = last_mark.map_or(0, |m| m + 1);
    let read = boundaries[..upto]
        .iter()
        .filter(|(hash, _, _)| cache.contains(hash))
        .map(|(_, size, _)| *size)
        .max()
        .unwrap_or(0);
    let written_upto = last_mark.map_or(0, |m| boundaries[m].1);
    for (hash, _, marked) in &boundaries {
        if *marked {
            cache.insert(hash.clone());
        }
    }
    let creation = written_upto.saturating_sub(read);
    let output: usize = reply.iter().map(|b| b.to_string().len()).sum::<usize>() / 4;
    json!({"input_tokens": total - read - creation, "cache_creation_input_tokens": creation,
           "cache_read_input_tokens": read, "output_tokens": output})
}
