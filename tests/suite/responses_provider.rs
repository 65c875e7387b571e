//! The OpenAI Responses provider against a local server speaking its wire format: streamed
//! text and tool calls, reasoning items returned unchanged, usage with cached and reasoning
//! tokens, rate limits, cut streams and the errors that name the fix — directly, and through
//! the engine (a tool loop, a 10-turn session, metrics).

use std::time::{Duration, Instant};

use hermes::client::SessionClient;
use hermes::config::{ModelConfig, ResponsesConfig};
use hermes::llm::responses::{ResponsesModel, ResponsesOptions};
use hermes::llm::{ChatMessage, ChatModel, ChatRequest, LlmError, ToolSpec};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::common::engine::with_engine;
use crate::common::fake_responses::{FakeResponses, Scripted, REASONING_TOKENS};
use crate::common::provider_engine::{engine_config, prefix_share, sample};

const T: Duration = Duration::from_secs(30);

fn model(fake: &FakeResponses, stream: bool) -> ResponsesModel {
    let options = ResponsesOptions {
        stream,
        reasoning_effort: Some("low".into()),
        ..ResponsesOptions::default()
    };
    ResponsesModel::new(
        &fake.base_url(),
        "gpt-5-mini",
        Some("sk-test".into()),
        T,
        options,
    )
    .unwrap()
    .with_retries(2)
}

fn add_tool() -> ToolSpec {
    ToolSpec {
        name: "add".into(),
        description: "Adds two integers.".into(),
        input_schema: json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
    }
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: hermes::llm::shared([ChatMessage::system("be brief"), ChatMessage::user(text)]),
        tools: vec![add_tool()].into(),
        cache_key: Some("hermes:assistant:s1".into()),
        ..ChatRequest::default()
    }
}

#[tokio::test]
async fn streamed_text_reaches_the_deltas_and_usage_counts_reasoning() {
    let fake = FakeResponses::start().await;
    let text = "您的订单已发货 — it ships tomorrow.";
    fake.push_text(text);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let reply = model(&fake, true)
        .complete(&ask("where?"), Some(tx))
        .await
        .unwrap();
    let mut deltas = Vec::new();
    while let Some(d) = rx.recv().await {
        deltas.push(d);
    }
    assert!(deltas.len() > 5, "{deltas:?}");
    assert_eq!(deltas.concat(), text);
    assert_eq!(reply.text, text);
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    let usage = reply.usage.unwrap();
    assert_eq!(u64::from(usage.reasoning_tokens), REASONING_TOKENS);
    assert!(
        usage.prompt_tokens > 0 && usage.completion_tokens > 0,
        "{usage:?}"
    );
    assert_eq!(reply.reasoning, "Request 1: deciding what to do.");
    assert_eq!(reply.parts.len(), 1);
    assert_eq!(
        Some(&reply.parts[0].item),
        fake.issued_reasoning(1).as_ref()
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent["store"], json!(false));
    assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(sent["prompt_cache_key"], json!("hermes:assistant:s1"));
    assert_eq!(sent["reasoning"], json!({"effort": "low"}));
    assert_eq!(sent["instructions"], json!("be brief"));
    assert_eq!(sent["tool_choice"], json!("auto"));
    assert_eq!(sent["parallel_tool_calls"], json!(true));
    assert_eq!(fake.authorizations(), vec![Some("Bearer sk-test".into())]);
}

#[tokio::test]
async fn tool_call_arguments_split_over_many_events_are_reassembled() {
    let fake = FakeResponses::start().await;
    let lookup = json!({"a": 40000, "b": 2, "note": "预算 3000", "nested": {"list": [1, 2, 3]}});
    fake.push_tool_calls(vec![
        ("add", lookup.clone()),
        ("add", json!({"a": 1, "b": 1})),
    ]);
    let reply = model(&fake, true)
        .complete(&ask("add"), None)
        .await
        .unwrap();
    assert_eq!(reply.tool_calls.len(), 2);
    assert_eq!(reply.tool_calls[0].arguments, lookup);
    assert_eq!(reply.tool_calls[0].id, "call_1_0");
    assert_eq!(reply.tool_calls[1].arguments, json!({"a": 1, "b": 1}));
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn a_whole_reply_is_read_when_not_streaming() {
    let fake = FakeResponses::start().await;
    fake.push_tool_calls(vec![("add", json!({"a": 1, "b": 2}))]);
    let reply = model(&fake, false)
        .complete(&ask("add"), None)
        .await
        .unwrap();
    assert_eq!(reply.tool_calls[0].arguments, json!({"a": 1, "b": 2}));
    assert_eq!(reply.parts.len(), 1);
    assert_eq!(fake.requests()[0].get("stream"), None);
}

#[tokio::test]
async fn a_rate_limit_is_retried_after_the_servers_retry_after() {
    let fake = FakeResponses::start().await;
    fake.push_rate_limited("1");
    fake.push_text("after the wait");
    let started = Instant::now();
    let reply = model(&fake, true).complete(&ask("hi"), None).await.unwrap();
    assert_eq!(reply.text, "after the wait");
    assert_eq!(fake.requests().len(), 2);
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_stream_cut_mid_call_and_an_error_event_fail_the_call_saying_retry() {
    let fake = FakeResponses::start().await;
    fake.push(Scripted::CutToolCall(vec![(
        "add".into(),
        json!({"a": 123456, "b": 654321}),
    )]));
    let err = model(&fake, true)
        .complete(&ask("add"), None)
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::BadResponse(_)), "{err}");
    assert!(err.to_string().contains("retry"), "{err}");
    fake.push(Scripted::ErrorEvent(
        "The server had an error while processing your request.".into(),
    ));
    let err = model(&fake, true)
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("error while processing"), "{err}");
}

#[tokio::test]
async fn an_unknown_model_and_an_over_long_prompt_name_the_fix() {
    let fake = FakeResponses::start().await;
    let options = ResponsesOptions::default();
    let unknown = ResponsesModel::new(&fake.base_url(), "gpt-9", None, T, options).unwrap();
    let err = unknown.complete(&ask("hi"), None).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::ModelNotFound { model, .. } if model == "gpt-9"),
        "{err}"
    );
    assert!(err.to_string().contains("hermes doctor"), "{err}");
    fake.push_error(
        400,
        json!({"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens.",
            "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}),
    );
    let err = model(&fake, true)
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::ContextLength {
                limit: Some(128000),
                requested: Some(130532),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("context_window"), "{err}");
}

fn planner(fake: &FakeResponses) -> ModelConfig {
    ModelConfig::OpenaiResponses(ResponsesConfig {
        base_url: Some(fake.base_url()),
        model: "gpt-5-mini".into(),
        api_key_env: None,
        timeout_secs: 30,
        stream: true,
        temperature: None,
        max_retries: 0,
        fallback: None,
        price: None,
        reasoning_effort: Some("medium".into()),
        reasoning_summary: None,
        store: false,
        parallel_tool_calls: true,
        max_output_tokens: None,
    })
}

/// The input items of a request of that type.
fn items_of<'a>(request: &'a Value, kind: &str) -> Vec<&'a Value> {
    request["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == kind)
        .collect()
}

#[test]
fn a_three_step_tool_loop_carries_the_first_reasoning_back_unchanged() {
    let rt = crate::common::fake_http::runtime();
    let fake = rt.block_on(FakeResponses::start());
    fake.push_tool_calls(vec![("add", json!({"a": 1, "b": 2}))]);
    fake.push_tool_calls(vec![("add", json!({"a": 3, "b": 4}))]);
    fake.push_text("1 + 2 = 3 and 3 + 4 = 7.");
    let dir = tempfile::tempdir().unwrap();
    with_engine(
        engine_config(dir.path(), planner(&fake)),
        |engine| async move {
            let mut c = SessionClient::open(engine.bus.clone(), "assistant", "r3", "u1")
                .await
                .unwrap();
            let trace = c.turn("add 1+2, then 3+4", T, |_| {}).await.unwrap();
            assert_eq!(
                trace.answer.as_deref(),
                Some("1 + 2 = 3 and 3 + 4 = 7."),
                "{:?}",
                trace.error
            );
        },
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let first = fake.issued_reasoning(1).unwrap();
    let second = fake.issued_reasoning(2).unwrap();
    assert!(first["encrypted_content"].is_string(), "{first}");
    assert_eq!(items_of(&requests[1], "reasoning"), vec![&first]);
    assert_eq!(items_of(&requests[2], "reasoning"), vec![&first, &second]);
    // Each reasoning item is followed by the call it led to, and the outputs answer them.
    let input = requests[2]["input"].as_array().unwrap();
    let at = input.iter().position(|i| i == &first).unwrap();
    assert_eq!(input[at + 1]["type"], "function_call");
    assert_eq!(input[at + 1]["call_id"], "call_1_0");
    assert_eq!(input[at + 2]["type"], "function_call_output");
    assert_eq!(input[at + 2]["call_id"], "call_1_0");
    // One cache key for the session, the same on every request.
    let keys: Vec<&Value> = requests.iter().map(|r| &r["prompt_cache_key"]).collect();
    assert!(
        keys[0].is_string() && keys.iter().all(|k| *k == keys[0]),
        "{keys:?}"
    );
}

#[test]
fn ten_turns_keep_each_request_a_prefix_of_the_next_and_usage_reaches_the_metrics() {
    let metrics = hermes::telemetry::metrics::install().unwrap();
    let before = metrics.render();
    let (_rt, fake) = FakeResponses::start_auto("add", json!({"a": 2, "b": 3}));
    let dir = tempfile::tempdir().unwrap();
    with_engine(
        engine_config(dir.path(), planner(&fake)),
        |engine| async move {
            let mut c = SessionClient::open(engine.bus.clone(), "assistant", "r10", "u1")
                .await
                .unwrap();
            for turn in 1..=10 {
                let trace = c
                    .turn(&format!("Turn {turn}: what is 2 + 3?"), T, |_| {})
                    .await
                    .unwrap();
                assert!(trace.answer.is_some(), "turn {turn}: {:?}", trace.error);
            }
        },
    );
    let raw = fake.raw_requests();
    assert_eq!(raw.len(), 20, "a tool call and an answer per turn");
    let least = raw
        .windows(2)
        .map(|pair| prefix_share(&pair[0], &pair[1]))
        .fold(1.0, f64::min);
    eprintln!(
        "least share of a request's bytes that begin the next: {:.1} %",
        least * 100.0
    );
    for (i, pair) in raw.windows(2).enumerate() {
        let share = prefix_share(&pair[0], &pair[1]);
        assert!(
            share >= 0.9,
            "request {} keeps only {:.1} % of its bytes in request {}",
            i + 1,
            share * 100.0,
            i + 2
        );
    }
    // The fake's cache rewards that prefix: most of each later prompt is read from it.
    let reported = fake.reported_usage();
    let total = |key: &str| -> f64 { reported.iter().map(|u| u[key].as_f64().unwrap()).sum() };
    let cached: f64 = reported
        .iter()
        .map(|u| u["input_tokens_details"]["cached_tokens"].as_f64().unwrap())
        .sum();
    eprintln!(
        "prompt tokens read from the cache: {:.1} %",
        100.0 * cached / total("input_tokens")
    );
    assert!(cached / total("input_tokens") >= 0.5, "{reported:#?}");
    // And it lands in the metrics (other tests may add to the same histograms meanwhile).
    let after = metrics.render();
    let grew = |kind: &str| {
        let series = format!("hermes_turn_tokens_sum{{kind=\"{kind}\"}}");
        sample(&after, &series) - sample(&before, &series)
    };
    assert!(grew("cached") >= cached, "{after}");
    assert!(
        grew("reasoning") >= (20 * REASONING_TOKENS) as f64,
        "{after}"
    );
    assert!(grew("prompt") >= total("input_tokens"), "{after}");
}
