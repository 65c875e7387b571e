//! Streamed chat completions: the accumulator that turns `chat.completion.chunk` events (read
//! by [`crate::llm::http::sse`]) into one [`ChatResponse`] — text deltas, tool calls reassembled from their
//! fragments by `index`, usage from the final chunk.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::wire::WireUsage;
use crate::llm::http::text::{arguments_value, parse_arguments, quote};
use crate::llm::{ChatResponse, LlmError, ToolCall, Usage};

/// One tool call while its fragments arrive.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    /// Set when a server sent the arguments as an object instead of string pieces.
    arguments_value: Option<Value>,
}

/// Builds the final response from the stream's events.
#[derive(Debug, Default)]
pub(super) struct StreamState {
    text: String,
    calls: BTreeMap<u64, PartialCall>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    done: bool,
}

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<DeltaCall>>,
}

#[derive(Debug, Deserialize)]
struct DeltaCall {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<DeltaFunction>,
}

#[derive(Debug, Deserialize)]
struct DeltaFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

impl StreamState {
    /// Apply one event's data; returns the text fragment it carried, if any.
    pub(super) fn apply(&mut self, data: &str) -> Result<Option<String>, LlmError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            LlmError::BadResponse(format!(
                "a streamed event is not a chat.completion.chunk ({e}): {}",
                quote(data, 200)
            ))
        })?;
        if let Some(error) = chunk.error {
            return Err(LlmError::BadResponse(format!(
                "the endpoint reported an error mid-stream: {}",
                quote(&error.to_string(), 1000)
            )));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        let mut fragment = String::new();
        for choice in chunk.choices {
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(content) = delta.content {
                fragment.push_str(&content);
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.apply_call(call);
            }
        }
        if fragment.is_empty() {
            return Ok(None);
        }
        self.text.push_str(&fragment);
        Ok(Some(fragment))
    }

    /// Merge one tool-call fragment. Without `index` (some servers omit it for a single call)
    /// a fragment with a new id starts a new call and anything else continues the last one.
    fn apply_call(&mut self, call: DeltaCall) {
        let index = call.index.unwrap_or_else(|| {
            let last = self.calls.iter().next_back();
            match (last, call.id.as_deref()) {
                (Some((_, partial)), Some(id)) if !id.is_empty() && partial.id != id => {
                    self.calls.len() as u64
                }
                (Some((&i, _)), _) => i,
                (None, _) => 0,
            }
        });
        let partial = self.calls.entry(index).or_default();
        if let Some(id) = call.id.filter(|id| !id.is_empty()) {
            partial.id = id;
        }
        let Some(function) = call.function else {
            return;
        };
        if let Some(name) = function.name.filter(|n| !n.is_empty()) {
            // The full name usually comes once; some servers repeat it, a few split it.
            if partial.name != name {
                partial.name.push_str(&name);
            }
        }
        match function.arguments {
            Some(Value::String(piece)) => partial.arguments.push_str(&piece),
            Some(Value::Null) | None => {}
            Some(object) => partial.arguments_value = Some(object),
        }
    }

    /// True once `data: [DONE]` arrived.
    pub(super) fn is_done(&self) -> bool {
        self.done
    }

    /// The whole response, once the stream has ended.
    pub(super) fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(LlmError::BadResponse(
                "the stream ended before the model finished (no finish_reason, no [DONE]); \
                 the server probably dropped the connection, retry the request"
                    .into(),
            ));
        }
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, partial) in self.calls {
            if partial.name.is_empty() {
                return Err(LlmError::BadResponse(format!(
                    "streamed tool call with index {index} never received a function name"
                )));
            }
            let arguments = match partial.arguments_value {
                Some(value) => arguments_value(Some(value)),
                None => parse_arguments(&partial.arguments),
            };
            let id = if partial.id.is_empty() {
                format!("call_{index}")
            } else {
                partial.id
            };
            tool_calls.push(ToolCall {
                id,
                name: partial.name,
                arguments,
            });
        }
        Ok(ChatResponse {
            text: self.text,
            tool_calls,
            usage: self.usage,
            finish_reason: self.finish_reason,
            ..ChatResponse::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn chunk(delta: Value) -> String {
        json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]}).to_string()
    }

    #[test]
    fn text_deltas_accumulate_and_usage_comes_from_the_last_chunk() {
        let mut state = StreamState::default();
        assert_eq!(
            state
                .apply(&chunk(json!({"role": "assistant", "content": ""})))
                .unwrap(),
            None
        );
        assert_eq!(
            state.apply(&chunk(json!({"content": "Hel"}))).unwrap(),
            Some("Hel".into())
        );
        assert_eq!(
            state.apply(&chunk(json!({"content": "lo"}))).unwrap(),
            Some("lo".into())
        );
        let fin = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
        state.apply(&fin.to_string()).unwrap();
        let usage = json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}});
        state.apply(&usage.to_string()).unwrap();
        state.apply("[DONE]").unwrap();
        assert!(state.is_done());
        let reply = state.finish().unwrap();
        assert_eq!(reply.text, "Hello");
        assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
        assert_eq!(reply.usage, Some(Usage::new(9, 2)));
    }

    #[test]
    fn tool_call_fragments_are_reassembled_by_index() {
        let mut state = StreamState::default();
        let pieces = [
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                    "function": {"name": "order_lookup", "arguments": ""}}]}),
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                    "function": {"name": "add", "arguments": "{\"a\""}}]}),
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"order_date\":"}}]}),
            json!({"tool_calls": [{"index": 1, "function": {"arguments": ": 1, \"b\": 2}"}}]}),
            json!({"tool_calls": [{"index": 0, "function": {"arguments": " \"2025/11/11\"}"}}]}),
        ];
        for piece in pieces {
            assert_eq!(state.apply(&chunk(piece)).unwrap(), None);
        }
        let fin = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
        state.apply(&fin.to_string()).unwrap();
        let reply = state.finish().unwrap();
        assert_eq!(
            reply.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "order_lookup".into(),
                    arguments: json!({"order_date": "2025/11/11"}),
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "add".into(),
                    arguments: json!({"a": 1, "b": 2}),
                },
            ]
        );
    }

    #[test]
    fn fragments_without_index_continue_the_current_call() {
        let mut state = StreamState::default();
        state
            .apply(&chunk(json!({"tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "{\"k\""}}]})))
            .unwrap();
        state
            .apply(&chunk(
                json!({"tool_calls": [{"function": {"name": "f", "arguments": ":1}"}}]}),
            ))
            .unwrap();
        state
            .apply(&chunk(json!({"tool_calls": [{"id": "y", "function": {"name": "g", "arguments": {"z": 2}}}]})))
            .unwrap();
        state.apply("[DONE]").unwrap();
        let calls = state.finish().unwrap().tool_calls;
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].name.as_str(), &calls[0].arguments),
            ("f", &json!({"k": 1}))
        );
        assert_eq!(
            (calls[1].id.as_str(), &calls[1].arguments),
            ("y", &json!({"z": 2}))
        );
    }

    #[test]
    fn stream_cut_before_finish_is_a_bad_response() {
        let mut state = StreamState::default();
        state.apply(&chunk(json!({"content": "half"}))).unwrap();
        assert!(matches!(state.finish(), Err(LlmError::BadResponse(_))));
    }

    #[test]
    fn error_event_and_garbage_event_are_bad_responses() {
        let mut state = StreamState::default();
        let err = state
            .apply("{\"error\": {\"message\": \"overloaded\"}}")
            .unwrap_err();
        assert!(err.to_string().contains("overloaded"), "{err}");
        assert!(matches!(
            state.apply("not json"),
            Err(LlmError::BadResponse(_))
        ));
    }
}
