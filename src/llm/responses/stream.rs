//! Streamed Responses: the accumulator that turns the typed events (`response.created`,
//! `response.output_item.added` / `.done`, `response.output_text.delta`,
//! `response.function_call_arguments.delta`, `response.reasoning_summary_text.delta`,
//! `response.completed` / `.incomplete` / `.failed`, `error`) into one [`ChatResponse`].
//!
//! Output items are tracked by `output_index`: an item starts with `output_item.added`, grows
//! with its deltas and is replaced whole by `output_item.done` (the authoritative copy: a
//! reasoning item's `encrypted_content` arrives only there). `response.completed` ends the
//! stream with the usage; its own `output`, when present, fills any item whose `done` was not
//! seen. A stream that ends before a terminal event is an error, never half an answer.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::wire::{failed, finish_reason, from_items, WireResponse};
use crate::llm::http::text::{quote, QUOTE_CHARS};
use crate::llm::{ChatResponse, LlmError, Usage};

/// Builds the final response from the stream's events.
#[derive(Debug, Default)]
pub(super) struct StreamState {
    items: BTreeMap<u64, Value>,
    text: String,
    usage: Option<Usage>,
    finish: Option<String>,
    done: bool,
}

#[derive(Debug, Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    response: Option<WireResponse>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

impl StreamState {
    /// Apply one event's data; returns the answer text it carried, if any.
    pub(super) fn apply(&mut self, data: &str) -> Result<Option<String>, LlmError> {
        let event: Event = serde_json::from_str(data).map_err(|e| {
            LlmError::BadResponse(format!(
                "a streamed event is not a Responses event ({e}): {}",
                quote(data, 200)
            ))
        })?;
        match event.kind.as_str() {
            "response.output_item.added" | "response.output_item.done" => {
                if let (Some(index), Some(item)) = (event.output_index, event.item) {
                    self.items.insert(index, item);
                }
            }
            "response.output_text.delta" => {
                let delta = event.delta.unwrap_or_default();
                if delta.is_empty() {
                    return Ok(None);
                }
                self.text.push_str(&delta);
                return Ok(Some(delta));
            }
            "response.function_call_arguments.delta" => {
                let (Some(index), Some(delta)) = (event.output_index, event.delta) else {
                    return Ok(None);
                };
                let item = self.items.entry(index).or_insert_with(
                    || serde_json::json!({"type": "function_call", "arguments": ""}),
                );
                let so_far = item
                    .get("arguments")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                item["arguments"] = Value::String(format!("{so_far}{delta}"));
            }
            "response.completed" | "response.incomplete" => {
                let response = event.response.unwrap_or_default();
                for (i, item) in response.output.into_iter().enumerate() {
                    self.items.entry(i as u64).or_insert(item);
                }
                self.usage = response.usage.map(Usage::from);
                self.finish = finish_reason(
                    response.status.as_deref(),
                    response.incomplete_details.as_ref(),
                );
                self.done = true;
            }
            "response.failed" => {
                let error = event.response.and_then(|r| r.error).unwrap_or(Value::Null);
                return Err(failed(&error));
            }
            "error" => {
                let error = serde_json::json!({
                    "code": event.code.unwrap_or(Value::Null),
                    "message": event.message.unwrap_or_default(),
                });
                return Err(mid_stream(&error));
            }
            // `response.created`, `.in_progress`, content parts, summary parts, `.done`
            // events that repeat what the deltas built: nothing new.
            _ => {}
        }
        Ok(None)
    }

    /// True once a terminal event (`response.completed` / `.incomplete`) arrived.
    pub(super) fn is_done(&self) -> bool {
        self.done
    }

    /// The whole response, once the stream has ended.
    pub(super) fn finish(self, model: &str) -> Result<ChatResponse, LlmError> {
        if !self.done {
            return Err(LlmError::BadResponse(
                "the stream ended before the model finished (no response.completed event); \
                 the server probably dropped the connection, retry the request"
                    .into(),
            ));
        }
        let items: Vec<Value> = self.items.into_values().collect();
        for item in &items {
            if item.get("type").and_then(Value::as_str) == Some("function_call")
                && item
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
            {
                return Err(LlmError::BadResponse(format!(
                    "a streamed function call never received its name: {}",
                    quote(&item.to_string(), 200)
                )));
            }
        }
        Ok(from_items(
            &items,
            Some(&self.text),
            self.usage,
            self.finish,
            model,
        ))
    }
}

/// An `error` event: a context window error keeps its meaning, anything else says the server
/// broke off.
fn mid_stream(error: &Value) -> LlmError {
    match failed(error) {
        LlmError::BadResponse(_) => LlmError::BadResponse(format!(
            "the endpoint reported an error mid-stream: {}; retry the request",
            quote(&error.to_string(), QUOTE_CHARS)
        )),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn apply_all(state: &mut StreamState, events: &[Value]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| state.apply(&e.to_string()).unwrap())
            .collect()
    }

    #[test]
    fn text_calls_and_reasoning_are_assembled_from_their_events() {
        let reasoning = json!({"type": "reasoning", "id": "rs_1", "summary": [],
                               "encrypted_content": "enc-1"});
        let events = [
            json!({"type": "response.created", "sequence_number": 0, "response": {"status": "in_progress", "output": []}}),
            json!({"type": "response.output_item.added", "output_index": 0, "sequence_number": 1,
                   "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
            json!({"type": "response.output_item.done", "output_index": 0, "sequence_number": 2, "item": reasoning}),
            json!({"type": "response.output_item.added", "output_index": 1, "sequence_number": 3,
                   "item": {"type": "message", "id": "m1", "role": "assistant", "content": []}}),
            json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0,
                   "item_id": "m1", "delta": "Look", "sequence_number": 4}),
            json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0,
                   "item_id": "m1", "delta": "ing.", "sequence_number": 5}),
            json!({"type": "response.output_item.added", "output_index": 2, "sequence_number": 6,
                   "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 2, "item_id": "fc_1",
                   "delta": "{\"a\"", "sequence_number": 7}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 2, "item_id": "fc_1",
                   "delta": ":1}", "sequence_number": 8}),
            json!({"type": "response.completed", "sequence_number": 9, "response": {"status": "completed",
                   "output": [], "usage": {"input_tokens": 10, "output_tokens": 5,
                   "input_tokens_details": {"cached_tokens": 8}, "output_tokens_details": {"reasoning_tokens": 3}}}}),
        ];
        let mut state = StreamState::default();
        assert_eq!(apply_all(&mut state, &events), vec!["Look", "ing."]);
        assert!(state.is_done());
        let reply = state.finish("m").unwrap();
        assert_eq!(reply.text, "Looking.");
        assert_eq!(reply.tool_calls[0].arguments, json!({"a": 1}));
        assert_eq!(reply.tool_calls[0].id, "call_1");
        assert_eq!(reply.parts[0].item, reasoning);
        assert_eq!(
            reply.usage,
            Some(Usage {
                cached_tokens: 8,
                reasoning_tokens: 3,
                ..Usage::new(10, 5)
            })
        );
    }

    #[test]
    fn a_stream_cut_before_completion_and_error_events_are_errors() {
        let mut state = StreamState::default();
        state
            .apply(
                &json!({"type": "response.output_text.delta", "output_index": 0, "delta": "half"})
                    .to_string(),
            )
            .unwrap();
        assert!(matches!(state.finish("m"), Err(LlmError::BadResponse(_))));
        let mut state = StreamState::default();
        let err = state
            .apply(
                &json!({"type": "error", "code": "server_error", "message": "boom", "param": null})
                    .to_string(),
            )
            .unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        let failed = json!({"type": "response.failed", "response": {"status": "failed",
            "error": {"code": "server_error", "message": "overloaded"}}});
        let err = StreamState::default()
            .apply(&failed.to_string())
            .unwrap_err();
        assert!(err.to_string().contains("overloaded"), "{err}");
        assert!(matches!(
            StreamState::default().apply("not json"),
            Err(LlmError::BadResponse(_))
        ));
    }
}
