//! Errors keep their kind to the edge: an MCP server that refuses a call's arguments reaches
//! the model as `invalid_arguments` with the server's own words (so it fixes the call instead
//! of giving up), and a model that refuses the key, does not exist or cannot take the prompt
//! ends the turn with an `error` event whose code says which.

use std::time::Duration;

use hermes::client::SessionClient;
use hermes::config::{McpServerConfig, ModelConfig, OpenAiConfig};
use hermes::protocol::TurnEvent;
use serde_json::{json, Value};

use crate::common::engine::with_engine;
use crate::common::fake_openai::FakeOpenAi;
use crate::common::provider_engine::engine_config;
use crate::common::strict_mcp;

const T: Duration = Duration::from_secs(30);

fn planner(fake: &FakeOpenAi) -> ModelConfig {
    ModelConfig::Openai(OpenAiConfig {
        base_url: Some(fake.base_url()),
        max_retries: 0,
        ..OpenAiConfig::from_env("fake-model")
    })
}

/// The `tool` messages of a request, read as JSON.
fn tool_results(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect()
}

#[test]
fn refused_mcp_arguments_reach_the_model_as_invalid_arguments_with_the_servers_text() {
    let rt = crate::common::fake_http::runtime();
    let fake = rt.block_on(FakeOpenAi::start());
    let url = rt.block_on(strict_mcp::start());
    fake.push_tool_calls(vec![(
        "strict__book_table",
        json!({"date": "next friday", "people": 2}),
    )]);
    fake.push_tool_calls(vec![(
        "strict__book_table",
        json!({"date": "2026-12-04", "people": 2}),
    )]);
    fake.push_text("Booked for Friday 4 December.");
    let dir = tempfile::tempdir().unwrap();
    let mut config = engine_config(dir.path(), planner(&fake));
    config.mcp.servers = vec![McpServerConfig {
        name: "strict".into(),
        url: Some(url),
        ..Default::default()
    }];
    let agent = config.agents.get_mut("assistant").unwrap();
    agent.tools = Some(vec!["strict__book_table".into()]);
    with_engine(config, |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "book", "u1")
            .await
            .unwrap();
        let trace = c.turn("book a table for friday", T, |_| {}).await.unwrap();
        assert_eq!(
            trace.answer.as_deref(),
            Some("Booked for Friday 4 December."),
            "{:?}",
            trace.error
        );
    });
    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        3,
        "the model was asked again after each call"
    );
    let refused = &tool_results(&requests[1])[0];
    assert_eq!(refused["status"], "error", "{refused}");
    let detail: Value = serde_json::from_str(refused["detail"].as_str().unwrap()).unwrap();
    assert_eq!(detail["error"]["code"], "invalid_arguments", "{refused}");
    let message = detail["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&strict_mcp::refusal("next friday")),
        "the server's own words reach the model: {message}"
    );
    let hint = detail["error"]["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains("fix"),
        "the hint says to fix the call: {hint}"
    );
    let booked = &tool_results(&requests[2])[1];
    assert_eq!(booked["status"], "ok", "{booked}");
}

/// The code of the `error` event a turn ends with when the model answers `status` + `body`.
fn error_code_of_a_turn_whose_model_answers(status: u16, body: &str) -> String {
    let rt = crate::common::fake_http::runtime();
    let fake = rt.block_on(FakeOpenAi::start());
    fake.push_error(status, body);
    let dir = tempfile::tempdir().unwrap();
    let code = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let seen = code.clone();
    with_engine(
        engine_config(dir.path(), planner(&fake)),
        |engine| async move {
            let mut c = SessionClient::open(engine.bus.clone(), "assistant", "err", "u1")
                .await
                .unwrap();
            let trace = c.turn("hello", T, |_| {}).await.unwrap();
            assert!(trace.answer.is_none(), "{:?}", trace.answer);
            let codes: Vec<String> = trace
                .events
                .iter()
                .filter_map(|e| match e {
                    TurnEvent::Error { code, .. } => Some(code.clone()),
                    _ => None,
                })
                .collect();
            assert_eq!(codes.len(), 1, "{codes:?}");
            *seen.lock().unwrap() = codes[0].clone();
        },
    );
    let code = code.lock().unwrap().clone();
    code
}

#[test]
fn a_refused_key_a_missing_model_and_an_over_long_prompt_each_end_the_turn_with_their_own_code() {
    let cases = [
        (
            401,
            r#"{"error":{"message":"Incorrect API key provided"}}"#,
            "model_auth",
        ),
        (
            404,
            r#"{"error":{"message":"The model `fake-model` does not exist","code":"model_not_found"}}"#,
            "model_not_found",
        ),
        (
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 12000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
            "context_length",
        ),
    ];
    for (status, body, code) in cases {
        assert_eq!(
            error_code_of_a_turn_whose_model_answers(status, body),
            code,
            "HTTP {status}"
        );
    }
}
