//! A session whose model is one provider with another as its fallback: when the first goes
//! down in the middle of a turn, the fallback answers the turn, and it is never sent what only
//! the first provider can read (its encrypted reasoning items).

use std::time::Duration;

use hermes::client::SessionClient;
use hermes::config::{AnthropicConfig, ModelConfig, ResponsesConfig};
use serde_json::json;

use crate::common::engine::with_engine;
use crate::common::fake_anthropic::FakeAnthropic;
use crate::common::fake_responses::FakeResponses;
use crate::common::provider_engine::engine_config;

const T: Duration = Duration::from_secs(30);

#[test]
fn the_fallback_finishes_a_tool_loop_the_first_provider_began_without_its_reasoning() {
    let rt = crate::common::fake_http::runtime();
    let primary = rt.block_on(FakeResponses::start());
    let fallback = rt.block_on(FakeAnthropic::start());
    // Turn 1 on the primary; turn 2 begins there, then the primary is down.
    primary.push_tool_calls(vec![("add", json!({"a": 1, "b": 2}))]);
    primary.push_text("1 + 2 = 3.");
    primary.push_tool_calls(vec![("add", json!({"a": 3, "b": 4}))]);
    let down = json!({"error": {"message": "The server is overloaded.", "type": "server_error",
                                "param": null, "code": "server_error"}});
    primary.push_error(503, down);
    fallback.push_text("3 + 4 = 7.");
    let config = ModelConfig::OpenaiResponses(ResponsesConfig {
        base_url: Some(primary.base_url()),
        model: "gpt-5-mini".into(),
        api_key_env: None,
        timeout_secs: 30,
        stream: true,
        temperature: None,
        max_retries: 0,
        fallback: Some(Box::new(ModelConfig::Anthropic(AnthropicConfig {
            base_url: Some(fallback.base_url()),
            model: "claude-sonnet-4-5".into(),
            api_key_env: None,
            timeout_secs: 30,
            stream: true,
            temperature: None,
            max_retries: 0,
            fallback: None,
            price: None,
            max_tokens: 8192,
            thinking_budget: Some(2048),
            cache: true,
            anthropic_version: "2023-06-01".into(),
        }))),
        price: None,
        reasoning_effort: Some("low".into()),
        reasoning_summary: None,
        store: false,
        parallel_tool_calls: true,
        max_output_tokens: None,
    });
    let dir = tempfile::tempdir().unwrap();
    with_engine(engine_config(dir.path(), config), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "fb", "u1")
            .await
            .unwrap();
        let trace = c.turn("what is 1 + 2?", T, |_| {}).await.unwrap();
        assert_eq!(
            trace.answer.as_deref(),
            Some("1 + 2 = 3."),
            "{:?}",
            trace.error
        );
        let trace = c.turn("and 3 + 4?", T, |_| {}).await.unwrap();
        assert_eq!(
            trace.answer.as_deref(),
            Some("3 + 4 = 7."),
            "{:?}",
            trace.error
        );
    });
    assert_eq!(primary.requests().len(), 4);
    let sent = fallback.requests();
    assert_eq!(
        sent.len(),
        1,
        "the fallback answered the step the primary could not"
    );
    let text = sent[0].to_string();
    for foreign in ["reasoning", "encrypted_content", "gAAAAB", "rs_"] {
        assert!(
            !text.contains(foreign),
            "`{foreign}` reached the fallback: {text}"
        );
    }
    // The tool loop it continues began without a thinking block of its own: thinking is
    // off for this request (the real API refuses it otherwise, and so does the fake).
    assert_eq!(sent[0].get("thinking"), None);
    let messages = sent[0]["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["content"][0]["type"], "tool_result");
    // The primary's requests did carry its reasoning back, before it went down.
    let third = &primary.requests()[2];
    assert!(third.to_string().contains("encrypted_content"), "{third}");
}

#[test]
fn a_responses_fallback_finishes_a_claude_tool_loop_without_its_signed_thinking() {
    let rt = crate::common::fake_http::runtime();
    let primary = rt.block_on(FakeAnthropic::start());
    let fallback = rt.block_on(FakeResponses::start());
    primary.push_tool_calls(vec![("add", json!({"a": 3, "b": 4}))]);
    primary.push_overloaded(None);
    fallback.push_text("3 + 4 = 7.");
    let config = ModelConfig::Anthropic(AnthropicConfig {
        base_url: Some(primary.base_url()),
        model: "claude-sonnet-4-5".into(),
        api_key_env: None,
        timeout_secs: 30,
        stream: true,
        temperature: None,
        max_retries: 0,
        fallback: Some(Box::new(ModelConfig::OpenaiResponses(ResponsesConfig {
            base_url: Some(fallback.base_url()),
            model: "gpt-5-mini".into(),
            api_key_env: None,
            timeout_secs: 30,
            stream: true,
            temperature: None,
            max_retries: 0,
            fallback: None,
            price: None,
            reasoning_effort: Some("low".into()),
            reasoning_summary: None,
            store: false,
            parallel_tool_calls: true,
            max_output_tokens: None,
        }))),
        price: None,
        max_tokens: 8192,
        thinking_budget: Some(2048),
        cache: true,
        anthropic_version: "2023-06-01".into(),
    });
    let dir = tempfile::tempdir().unwrap();
    with_engine(engine_config(dir.path(), config), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "fb2", "u1")
            .await
            .unwrap();
        let trace = c.turn("what is 3 + 4?", T, |_| {}).await.unwrap();
        assert_eq!(
            trace.answer.as_deref(),
            Some("3 + 4 = 7."),
            "{:?}",
            trace.error
        );
    });
    assert_eq!(primary.requests().len(), 2);
    let sent = fallback.requests();
    assert_eq!(sent.len(), 1);
    let text = sent[0].to_string();
    for foreign in ["thinking", "signature", "EqQB"] {
        assert!(
            !text.contains(foreign),
            "`{foreign}` reached the fallback: {text}"
        );
    }
    let kinds: Vec<&str> = sent[0]["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["type"].as_str())
        .collect();
    assert_eq!(kinds, vec!["function_call", "function_call_output"]);
}
