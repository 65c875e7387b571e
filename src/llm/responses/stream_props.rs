//! Property tests of the Responses stream (proptest, a few hundred cases per run): how the
//! bytes are split into network chunks never changes the assembled answer, and arbitrary event
//! data never panics the accumulator.

use proptest::prelude::*;
use serde_json::json;

use super::stream::StreamState;
use crate::llm::http::sse::SseParser;

/// A plausible stream: a reasoning item, text deltas, a call's argument fragments, completion.
fn stream_strategy() -> impl Strategy<Value = String> {
    let text = prop::collection::vec("[a-zA-Z0-9 ,.你好]{0,8}", 0..6);
    let args = prop::collection::vec("[{}a-z\":0-9,]{0,6}", 0..6);
    (text, args).prop_map(|(text, args)| {
        let mut events = vec![
            json!({"type": "response.output_item.done", "output_index": 0,
                   "item": {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"}}),
            json!({"type": "response.output_item.added", "output_index": 1,
                   "item": {"type": "message", "id": "m", "role": "assistant", "content": []}}),
        ];
        for piece in text {
            events.push(json!({"type": "response.output_text.delta", "output_index": 1, "delta": piece}));
        }
        events.push(json!({"type": "response.output_item.added", "output_index": 2,
            "item": {"type": "function_call", "id": "fc", "call_id": "c", "name": "f", "arguments": ""}}));
        for piece in args {
            events.push(json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": piece}));
        }
        events.push(json!({"type": "response.completed", "response": {"status": "completed", "output": []}}));
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
            .collect()
    })
}

/// The answer assembled from `bytes` split at `cuts`.
fn assemble(bytes: &[u8], cuts: &[usize]) -> Result<(String, usize, usize), String> {
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
    Ok((reply.text, reply.tool_calls.len(), reply.parts.len()))
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
