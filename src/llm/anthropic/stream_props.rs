//! Property tests of the Anthropic stream (proptest, a few hundred cases per run): how the
//! bytes are split into network chunks never changes the assembled answer, and arbitrary event
//! data never panics the accumulator.

use proptest::prelude::*;
use serde_json::json;

use super::stream::StreamState;
use crate::llm::http::sse::SseParser;

/// A plausible stream: thinking and its signature, text deltas, a tool call's JSON fragments.
fn stream_strategy() -> impl Strategy<Value = String> {
    let thinking = prop::collection::vec("[a-z .思考]{0,8}", 0..5);
    let text = prop::collection::vec("[a-zA-Z0-9 ,.你好]{0,8}", 0..6);
    let json_pieces = prop::collection::vec("[{}a-z\":0-9,]{0,6}", 0..6);
    (thinking, text, json_pieces).prop_map(|(thinking, text, json_pieces)| {
        let mut events = vec![
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ];
        for piece in thinking {
            events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": piece}}));
        }
        events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}));
        events.push(json!({"type": "content_block_stop", "index": 0}));
        events.push(json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}));
        for piece in text {
            events.push(json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": 1}));
        events.push(json!({"type": "ping"}));
        events.push(json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}}));
        for piece in json_pieces {
            events.push(json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": 2}));
        events.push(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}));
        events.push(json!({"type": "message_stop"}));
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
            .collect()
    })
}

/// The answer assembled from `bytes` split at `cuts`.
fn assemble(bytes: &[u8], cuts: &[usize]) -> Result<(String, String, usize), String> {
    let mut parser = SseParser::default();
    let mut state = StreamState::default();
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut at = 0;
    for cut in cuts.into_iter().chain([bytes.len()]) {
        for data in parser.push(&bytes[at..cut]).map_err(|e| e.to_string())? {
            state.apply(&data).map_err(|e| e.to_string())?;
        }
        at = cut;
    }
    let reply = state.finish("m").map_err(|e| e.to_string())?;
    Ok((reply.text, reply.reasoning, reply.tool_calls.len()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn chunk_boundaries_never_change_the_answer(stream in stream_strategy(), cuts in prop::collection::vec(any::<usize>(), 0..8)) {
        let whole = assemble(stream.as_bytes(), &[]);
        prop_assert!(whole.is_ok(), "{:?}", whole);
        prop_assert_eq!(whole, assemble(stream.as_bytes(), &cuts));
    }

    #[test]
    fn arbitrary_event_data_never_panics(data in prop::collection::vec("\\PC{0,60}", 0..8)) {
        let mut state = StreamState::default();
        for d in &data {
            let _ = state.apply(d);
        }
        let _ = state.finish("m");
    }
}
