//! The Anthropic Messages provider against a local server speaking its wire format: streamed
//! text, `input_json_delta` tool calls, signed thinking returned unchanged, `cache_control`
//! breakpoints and the cache usage they earn, 529 / 429 handling, cut streams and the errors
//! that name the fix — directly, and through the engine (a tool loop, a 10-turn session,
//! metrics).

use std::time::{Duration, Instant};

use hermes::client::SessionClient;
use hermes::config::{AnthropicConfig, ModelConfig};
use hermes::llm::anthropic::{AnthropicModel, AnthropicOptions};
use hermes::llm::{ChatMessage, ChatModel, ChatRequest, LlmError, ToolSpec};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::common::engine::with_engine;
use crate::common::fake_anthropic::{signature, FakeAnthropic, Scripted};
use crate::common::provider_engine::{engine_config, prefix_share, sample};

const T: Duration = Duration::from_secs(30);

fn options(thinking: bool) -> AnthropicOptions {
    AnthropicOptions {
        thinking_budget: thinking.then_some(2048),
        ..AnthropicOptions::default()
    }
}

fn model(fake: &FakeAnthropic, options: AnthropicOptions) -> AnthropicModel {
    AnthropicModel::new(
        &fake.base_url(),
        "claude-sonnet-4-5",
        Some("sk-ant-test".into()),
        T,
        options,
    )
    .unwrap()
    .with_retries(2)
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: hermes::llm::shared([ChatMessage::system("be brief"), ChatMessage::user(text)]),
        tools: vec![ToolSpec {
            name: "add".into(),
            description: "Adds two integers.".into(),
            input_schema: json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
        }]
        .into(),
        ..ChatRequest::default()
    }
}

#[tokio::test]
async fn streamed_text_reaches_the_deltas_with_the_signed_thinking_kept() {
    let fake = FakeAnthropic::start().await;
    fake.require_key("sk-ant-test");
    let text = "您的订单已发货 — it ships tomorrow.";
    fake.push_text(text);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let reply = model(&fake, options(true))
        .complete(&ask("where?"), Some(tx))
        .await
        .unwrap();
    let mut deltas = Vec::new();
    while let Some(d) = rx.recv().await {
        deltas.push(d);
    }
    assert!(deltas.len() > 5, "{deltas:?}");
    assert_eq!(
        deltas.concat(),
        text,
        "thinking is not shown as answer text"
    );
    assert_eq!(reply.text, text);
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    let thinking = fake.issued_thinking(1).unwrap();
    assert_eq!(reply.parts[0].item, thinking);
    assert_eq!(reply.reasoning, thinking["thinking"].as_str().unwrap());
    assert_eq!(
        fake.headers("anthropic-version"),
        vec![Some("2023-06-01".into())]
    );
    assert_eq!(fake.headers("x-api-key"), vec![Some("sk-ant-test".into())]);
    assert_eq!(fake.headers("authorization"), vec![None]);
    let sent = &fake.requests()[0];
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(
        sent["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[tokio::test]
async fn tool_input_streamed_as_json_fragments_is_reassembled() {
    let fake = FakeAnthropic::start().await;
    let input = json!({"a": 40000, "b": 2, "note": "预算 3000", "nested": {"list": [1, 2, 3]}});
    fake.push_tool_calls(vec![
        ("add", input.clone()),
        ("add", json!({"a": 1, "b": 1})),
    ]);
    let reply = model(&fake, options(false))
        .complete(&ask("add"), None)
        .await
        .unwrap();
    assert_eq!(reply.tool_calls.len(), 2);
    assert_eq!(reply.tool_calls[0].arguments, input);
    assert_eq!(reply.tool_calls[0].id, "toolu_1_0");
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    assert!(reply.parts.is_empty(), "no thinking asked, none kept");
}

#[tokio::test]
async fn the_second_request_reads_the_first_from_the_prompt_cache() {
    let fake = FakeAnthropic::start().await;
    fake.push_text("first");
    fake.push_text("second");
    let m = model(&fake, options(false));
    let mut request = ask("hello");
    let first = m.complete(&request, None).await.unwrap();
    request
        .messages
        .push(ChatMessage::assistant(first.text).into());
    request.messages.push(ChatMessage::user("and again").into());
    let second = m.complete(&request, None).await.unwrap();
    let (u1, u2) = (first.usage.unwrap(), second.usage.unwrap());
    assert_eq!(u1.cached_tokens, 0);
    assert!(u1.cache_write_tokens > 0, "{u1:?}");
    assert_eq!(u2.cached_tokens, u1.cache_write_tokens, "{u1:?} {u2:?}");
    assert!(u2.prompt_tokens > u2.cached_tokens);
}

#[tokio::test]
async fn overloaded_529_and_an_exhausted_rate_limit_are_waited_out_and_retried() {
    let fake = FakeAnthropic::start().await;
    fake.push_overloaded(Some("1"));
    fake.push_rate_limited_until_reset(1);
    fake.push_text("at last");
    let started = Instant::now();
    let reply = model(&fake, options(false))
        .complete(&ask("hi"), None)
        .await
        .unwrap();
    assert_eq!(reply.text, "at last");
    assert_eq!(fake.requests().len(), 3);
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_stream_cut_mid_call_and_an_overloaded_event_fail_the_call_saying_what_to_do() {
    let fake = FakeAnthropic::start().await;
    fake.push(Scripted::CutToolCall(vec![(
        "add".into(),
        json!({"a": 123456, "b": 654321}),
    )]));
    let err = model(&fake, options(true))
        .complete(&ask("add"), None)
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::BadResponse(_)), "{err}");
    assert!(err.to_string().contains("retry"), "{err}");
    fake.push(Scripted::ErrorEvent("overloaded_error".into()));
    let err = model(&fake, options(true))
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("overloaded") && err.to_string().contains("fallback"),
        "{err}"
    );
}

#[tokio::test]
async fn an_unknown_model_a_refused_key_and_an_over_long_prompt_name_the_fix() {
    let fake = FakeAnthropic::start().await;
    let unknown =
        AnthropicModel::new(&fake.base_url(), "claude-9", None, T, options(false)).unwrap();
    let err = unknown.complete(&ask("hi"), None).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::ModelNotFound { model, .. } if model == "claude-9"),
        "{err}"
    );
    fake.push_error(
        400,
        "invalid_request_error",
        "prompt is too long: 208000 tokens > 200000 maximum",
    );
    let err = model(&fake, options(false))
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::ContextLength {
                limit: Some(200000),
                requested: Some(208000),
                ..
            }
        ),
        "{err:?}"
    );
    fake.require_key("the-right-key");
    let err = model(&fake, options(false))
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Auth { status: 401, .. }), "{err}");
}

fn planner(fake: &FakeAnthropic) -> ModelConfig {
    ModelConfig::Anthropic(AnthropicConfig {
        base_url: Some(fake.base_url()),
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
    })
}

/// The thinking blocks of a request's assistant messages, in order.
fn thinking_blocks(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["content"].as_array().unwrap().clone())
        .filter(|b| b["type"] == "thinking")
        .collect()
}

/// Where a request carries `cache_control`: "tools", "system[i]" or "messages[i][j]".
fn breakpoints(request: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (i, tool) in request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if tool.get("cache_control").is_some() {
            out.push(format!("tools[{i}]"));
        }
    }
    for (i, block) in request["system"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if block.get("cache_control").is_some() {
            out.push(format!("system[{i}]"));
        }
    }
    let messages = request["messages"].as_array().unwrap();
    for (i, m) in messages.iter().enumerate() {
        for (j, block) in m["content"].as_array().unwrap().iter().enumerate() {
            if block.get("cache_control").is_some() {
                out.push(format!("messages[{i}][{j}]"));
            }
        }
    }
    out
}

/// `messages[i][j]` of a request's last block.
fn last_block(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let i = messages.len() - 1;
    let j = messages[i]["content"].as_array().unwrap().len() - 1;
    format!("messages[{i}][{j}]")
}

#[test]
fn a_three_step_tool_loop_carries_the_first_thinking_block_back_unchanged() {
    let rt = crate::common::fake_http::runtime();
    let fake = rt.block_on(FakeAnthropic::start());
    fake.push_tool_calls(vec![("add", json!({"a": 1, "b": 2}))]);
    fake.push_tool_calls(vec![("add", json!({"a": 3, "b": 4}))]);
    fake.push_text("1 + 2 = 3 and 3 + 4 = 7.");
    let dir = tempfile::tempdir().unwrap();
    with_engine(
        engine_config(dir.path(), planner(&fake)),
        |engine| async move {
            let mut c = SessionClient::open(engine.bus.clone(), "assistant", "a3", "u1")
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
    let first = fake.issued_thinking(1).unwrap();
    let second = fake.issued_thinking(2).unwrap();
    assert_eq!(
        first["signature"],
        json!(signature(first["thinking"].as_str().unwrap()))
    );
    assert_eq!(thinking_blocks(&requests[1]), vec![first.clone()]);
    assert_eq!(thinking_blocks(&requests[2]), vec![first, second]);
    for request in &requests {
        assert_eq!(
            breakpoints(request),
            vec!["system[0]".to_string(), last_block(request)],
            "after tools + system, and at the end of the history"
        );
    }
}

#[test]
fn ten_turns_keep_each_request_a_prefix_of_the_next_read_from_the_cache_and_metered() {
    let metrics = hermes::telemetry::metrics::install().unwrap();
    let before = metrics.render();
    let (_rt, fake) = FakeAnthropic::start_auto("add", json!({"a": 2, "b": 3}));
    let dir = tempfile::tempdir().unwrap();
    with_engine(
        engine_config(dir.path(), planner(&fake)),
        |engine| async move {
            let mut c = SessionClient::open(engine.bus.clone(), "assistant", "a10", "u1")
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
    for request in fake.requests() {
        assert_eq!(
            breakpoints(&request),
            vec!["system[0]".to_string(), last_block(&request)]
        );
    }
    let reported = fake.reported_usage();
    let sum = |key: &str| -> f64 { reported.iter().map(|u| u[key].as_f64().unwrap()).sum() };
    let prompt =
        sum("input_tokens") + sum("cache_creation_input_tokens") + sum("cache_read_input_tokens");
    eprintln!(
        "prompt tokens read from the cache: {:.1} %",
        100.0 * sum("cache_read_input_tokens") / prompt
    );
    assert!(
        sum("cache_read_input_tokens") / prompt >= 0.5,
        "{reported:#?}"
    );
    let after = metrics.render();
    let grew = |kind: &str| {
        let series = format!("hermes_turn_tokens_sum{{kind=\"{kind}\"}}");
        sample(&after, &series) - sample(&before, &series)
    };
    assert!(grew("cached") >= sum("cache_read_input_tokens"), "{after}");
    assert!(grew("prompt") >= prompt, "{after}");
    // Anthropic counts no reasoning tokens: Hermes counts the thinking it was shown.
    assert!(grew("reasoning") >= 20.0, "{after}");
}
