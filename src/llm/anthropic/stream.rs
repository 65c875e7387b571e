//! Streamed Anthropic messages: the accumulator that turns the events (`message_start`,
//! `content_block_start` / `_delta` / `_stop`, `message_delta`, `message_stop`, `ping`,
//! `error`) into one [`ChatResponse`].
//!
//! Blocks are tracked by `index`: `text_delta` grows a text block (and is forwarded to the
//! user), `input_json_delta` grows a tool call's input as JSON text (parsed when the block
//! stops), `thinking_delta` and `signature_delta` grow a thinking block, which is kept whole
//! for the next request. Usage starts in `message_start` and `message_delta` updates it. A
//! stream that ends before `message_stop` is an error, never half an answer.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};

use super::wire::{from_blocks, WireUsage};
use crate::llm::http::text::{parse_arguments, quote, QUOTE_CHARS};
use crate::llm::{ChatResponse, LlmError, Usage};

/// One content block while it streams; `json` collects a tool call's input.
#[derive(Debug)]
struct Block {
    value: Value,
    json: String,
}

/// Builds the final response from the stream's events.
#[derive(Debug, Default)]
pub(super) struct StreamState {
    blocks: BTreeMap<u64, Block>,
    usage: WireUsage,
    stop_reason: Option<String>,
    done: bool,
}

#[derive(Debug, Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    content_block: Option<Value>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

impl StreamState {
    /// Apply one event's data; returns the answer text it carried, if any.
    pub(super) fn apply(&mut self, data: &str) -> Result<Option<String>, LlmError> {
        let event: Event = serde_json::from_str(data).map_err(|e| {
            LlmError::BadResponse(format!(
                "a streamed event is not a Messages event ({e}): {}",
                quote(data, 200)
            ))
        })?;
        match event.kind.as_str() {
            "message_start" => {
                let usage = event
                    .message
                    .as_ref()
                    .and_then(|m| m.get("usage"))
                    .and_then(|u| serde_json::from_value::<WireUsage>(u.clone()).ok());
                if let Some(usage) = usage {
                    self.usage.update(usage);
                }
            }
            "content_block_start" => {
                if let (Some(index), Some(value)) = (event.index, event.content_block) {
                    self.blocks.insert(
                        index,
                        Block {
                            value,
                            json: String::new(),
                        },
                    );
                }
            }
            "content_block_delta" => {
                let (Some(index), Some(delta)) = (event.index, event.delta) else {
                    return Ok(None);
                };
                return Ok(self.delta(index, &delta));
            }
            "content_block_stop" => {
                if let Some(block) = event.index.and_then(|i| self.blocks.get_mut(&i)) {
                    if block.value.get("type").and_then(Value::as_str) == Some("tool_use")
                        && !block.json.is_empty()
                    {
                        block.value["input"] = parse_arguments(&block.json);
                    }
                }
            }
            "message_delta" => {
                if let Some(reason) = event
                    .delta
                    .as_ref()
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(usage) = event.usage {
                    self.usage.update(usage);
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let error = event.error.unwrap_or(Value::Null);
                let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
                let fix = match kind {
                    "overloaded_error" => {
                        "the service is overloaded; retry in a moment, or \
                                           configure a `fallback` model"
                    }
                    "rate_limit_error" => "a rate limit was hit; retry later",
                    _ => "retry the request",
                };
                return Err(LlmError::BadResponse(format!(
                    "the endpoint reported an error mid-stream ({kind}): {}; {fix}",
                    quote(&error.to_string(), QUOTE_CHARS)
                )));
            }
            // `ping`, and event types added later.
            _ => {}
        }
        Ok(None)
    }

    fn delta(&mut self, index: u64, delta: &Value) -> Option<String> {
        let block = self.blocks.entry(index).or_insert_with(|| Block {
            value: json!({"type": "text", "text": ""}),
            json: String::new(),
        });
        let piece = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        let append = |value: &mut Value, key: &str, more: &str| {
            let so_far = value.get(key).and_then(Value::as_str).unwrap_or_default();
            value[key] = Value::String(format!("{so_far}{more}"));
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => {
                let text = piece("text");
                append(&mut block.value, "text", text);
                return (!text.is_empty()).then(|| text.to_string());
            }
            Some("input_json_delta") => block.json.push_str(piece("partial_json")),
            Some("thinking_delta") => append(&mut block.value, "thinking", piece("thinking")),
            Some("signature_delta") => append(&mut block.value, "signature", piece("signature")),
            _ => {}
        }
        None
    }

    /// True once `message_stop` arrived.
    pub(super) fn is_done(&self) -> bool {
        self.done
    }

    /// The whole response, once the stream has ended.
    pub(super) fn finish(self, model: &str) -> Result<ChatResponse, LlmError> {
        if !self.done {
            return Err(LlmError::BadResponse(
                "the stream ended before the model finished (no message_stop event); the \
                 server probably dropped the connection, retry the request"
                    .into(),
            ));
        }
        let blocks: Vec<Value> = self.blocks.into_values().map(|b| b.value).collect();
        Ok(from_blocks(
            &blocks,
            Some(Usage::from(self.usage)),
            self.stop_reason,
            model,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn thinking_text_and_a_split_tool_call_are_assembled() {
        let events = [
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                "content": [], "model": "m", "stop_reason": null,
                "usage": {"input_tokens": 5, "cache_creation_input_tokens": 0,
                          "cache_read_input_tokens": 90, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Need "}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "add."}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQB"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Sure"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": "}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "2}"}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 40}}),
            json!({"type": "message_stop"}),
        ];
        let mut state = StreamState::default();
        let texts: Vec<String> = events
            .iter()
            .filter_map(|e| state.apply(&e.to_string()).unwrap())
            .collect();
        assert_eq!(texts, vec!["Sure"]);
        let reply = state.finish("m").unwrap();
        assert_eq!(reply.text, "Sure");
        assert_eq!(reply.reasoning, "Need add.");
        assert_eq!(
            reply.parts[0].item,
            json!({"type": "thinking", "thinking": "Need add.", "signature": "EqQB"})
        );
        assert_eq!(reply.tool_calls[0].arguments, json!({"a": 2}));
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            reply.usage,
            Some(Usage {
                cached_tokens: 90,
                ..Usage::new(95, 40)
            })
        );
    }

    #[test]
    fn a_cut_stream_and_an_overloaded_error_are_errors() {
        let mut state = StreamState::default();
        state
            .apply(&json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}}).to_string())
            .unwrap();
        assert!(matches!(state.finish("m"), Err(LlmError::BadResponse(_))));
        let err = StreamState::default()
            .apply(&json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).to_string())
            .unwrap_err();
        assert!(err.to_string().contains("overloaded"), "{err}");
    }
}
