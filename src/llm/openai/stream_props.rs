//! Property tests of the streamed-response parser (fuzzing by proptest, a few hundred cases
//! per run): arbitrary bytes never panic it, and how the bytes are split into network chunks
//! never changes the events or the assembled response.

use proptest::prelude::*;

use super::stream::StreamState;
use crate::llm::http::sse::SseParser;

/// Feed `bytes` split at `cuts`; every event's data, then the end.
fn events(bytes: &[u8], cuts: &[usize]) -> Result<Vec<String>, String> {
    let mut parser = SseParser::default();
    let mut out = Vec::new();
    let mut at = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    for cut in cuts.into_iter().chain([bytes.len()]) {
        if cut < at {
            continue;
        }
        out.extend(parser.push(&bytes[at..cut]).map_err(|e| e.to_string())?);
        at = cut;
    }
    out.extend(parser.finish().map_err(|e| e.to_string())?);
    Ok(out)
}

/// A plausible stream: text deltas and tool-call fragments as OpenAI-compatible servers send.
fn stream_strategy() -> impl Strategy<Value = String> {
    let text = "[a-zA-Z0-9 ,.你好]{0,12}";
    let piece = prop_oneof![
        text.prop_map(|t| format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":{}}}}}]}}\n\n",
            serde_json::Value::String(t)
        )),
        (0u32..3, "[a-z_]{1,8}", "[{}a-z\":0-9,]{0,10}").prop_map(|(i, name, args)| format!(
            "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":{i},\"id\":\"c{i}\",\"function\":{{\"name\":\"{name}\",\"arguments\":{}}}}}]}}}}]}}\n\n",
            serde_json::Value::String(args)
        )),
        Just(": keep-alive\n\n".to_string()),
        Just("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n".to_string()),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|p| format!("{}data: [DONE]\n\n", p.concat()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_bytes_never_panic_the_parser(bytes in prop::collection::vec(any::<u8>(), 0..400), cuts in prop::collection::vec(any::<usize>(), 0..6)) {
        let _ = events(&bytes, &cuts);
        let mut state = StreamState::default();
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let _ = state.apply(text);
        }
    }

    #[test]
    fn chunk_boundaries_never_change_the_events(stream in stream_strategy(), cuts in prop::collection::vec(any::<usize>(), 0..8)) {
        let whole = events(stream.as_bytes(), &[]);
        let split = events(stream.as_bytes(), &cuts);
        prop_assert_eq!(&whole, &split);
        // And the response assembled from them is the same too.
        let assemble = |events: Vec<String>| {
            let mut state = StreamState::default();
            for data in events {
                if state.apply(&data).is_err() || state.is_done() {
                    break;
                }
            }
            state.finish().map(|r| (r.text, r.tool_calls.len())).map_err(|e| e.to_string())
        };
        prop_assert_eq!(assemble(whole.unwrap_or_default()), assemble(split.unwrap_or_default()));
    }

    #[test]
    fn arbitrary_event_data_never_panics_the_assembler(data in prop::collection::vec("\\PC{0,60}", 0..8)) {
        let mut state = StreamState::default();
        for d in &data {
            let _ = state.apply(d);
        }
        let _ = state.finish();
    }
}
