//! The OpenAI-compatible provider against a real local HTTP server speaking the wire format.

use std::time::Duration;

use hermes::llm::openai::OpenAiModel;
use hermes::llm::{ChatMessage, ChatModel, ChatRequest, LlmError, ToolCall, ToolSpec, Usage};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::sync::mpsc;

use crate::common::fake_openai::{FakeOpenAi, COMPLETION_TOKENS, PROMPT_TOKENS};

fn model(fake: &FakeOpenAi, stream: bool) -> OpenAiModel {
    OpenAiModel::new(
        &fake.base_url(),
        "fake-model",
        Some("sk-test".into()),
        Duration::from_secs(10),
        stream,
        None,
    )
    .unwrap()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: hermes::llm::shared([ChatMessage::system("be brief"), ChatMessage::user(text)]),
        ..ChatRequest::default()
    }
}

const FAKE_USAGE: Usage = Usage::new(PROMPT_TOKENS, COMPLETION_TOKENS);

#[tokio::test]
async fn non_streaming_text_reply_carries_usage_and_finish_reason() {
    let fake = FakeOpenAi::start().await;
    fake.push_text("Hello, 世界!");
    let reply = model(&fake, false)
        .complete(&ask("hi"), None)
        .await
        .unwrap();
    assert_eq!(reply.text, "Hello, 世界!");
    assert!(reply.tool_calls.is_empty());
    assert_eq!(reply.usage, Some(FAKE_USAGE));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    let sent = &fake.requests()[0];
    assert_eq!(sent.get("stream"), None);
    assert_eq!(
        fake.authorizations(),
        vec![Some("Bearer sk-test".to_string())]
    );
}

#[tokio::test]
async fn streaming_text_reaches_the_delta_sender_in_order() {
    let fake = FakeOpenAi::start().await;
    let text = "您的订单已发货 — your Sony WH-1000XM5 ships tomorrow.";
    fake.push_text(text);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let reply = model(&fake, true)
        .complete(&ask("where is my order?"), Some(tx))
        .await
        .unwrap();
    let mut deltas = Vec::new();
    while let Some(delta) = rx.recv().await {
        deltas.push(delta);
    }
    assert!(deltas.len() > 5, "expected many deltas, got {deltas:?}");
    assert_eq!(deltas.concat(), text);
    assert_eq!(reply.text, text);
    assert_eq!(reply.usage, Some(FAKE_USAGE));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    let sent = &fake.requests()[0];
    assert_eq!(sent["stream"], json!(true));
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn streamed_tool_call_fragments_are_reassembled() {
    let fake = FakeOpenAi::start().await;
    let lookup = json!({"order_date": "2025/11/11", "category": "Headphones", "note": "预算 3000"});
    let add = json!({"a": 7, "b": 1007, "nested": {"list": [1, 2, 3]}});
    fake.push_tool_calls(vec![("order_lookup", lookup.clone()), ("add", add.clone())]);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let reply = model(&fake, true)
        .complete(&ask("look it up"), Some(tx))
        .await
        .unwrap();
    let expected = vec![
        ToolCall {
            id: "call_1_0".into(),
            name: "order_lookup".into(),
            arguments: lookup,
        },
        ToolCall {
            id: "call_1_1".into(),
            name: "add".into(),
            arguments: add,
        },
    ];
    assert_eq!(reply.tool_calls, expected);
    assert_eq!(reply.text, "");
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(reply.usage, Some(FAKE_USAGE));
    assert!(
        rx.recv().await.is_none(),
        "a tool-call reply sends no text deltas"
    );
}

#[tokio::test]
async fn non_streaming_tool_calls_are_parsed() {
    let fake = FakeOpenAi::start().await;
    fake.push_tool_calls(vec![("add", json!({"a": 1, "b": 1001}))]);
    let reply = model(&fake, false)
        .complete(&ask("add"), None)
        .await
        .unwrap();
    assert_eq!(
        reply.tool_calls,
        vec![ToolCall {
            id: "call_1_0".into(),
            name: "add".into(),
            arguments: json!({"a": 1, "b": 1001}),
        }]
    );
}

#[tokio::test]
async fn request_wire_format_carries_tools_tool_calls_and_tool_results() {
    let fake = FakeOpenAi::start().await;
    fake.push_text("The answer is 1008.");
    let call = ToolCall {
        id: "call_9".into(),
        name: "add".into(),
        arguments: json!({"a": 8, "b": 1000}),
    };
    let request = ChatRequest {
        messages: hermes::llm::shared([
            ChatMessage::user("turn 8: add 8 and 1008"),
            ChatMessage::assistant_calls("", vec![call]),
            ChatMessage::tool("call_9", "add", "1008"),
        ]),
        tools: vec![ToolSpec {
            name: "add".into(),
            description: "Adds two integers.".into(),
            input_schema: json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
        }]
        .into(),
        temperature: Some(0.0),
        max_tokens: Some(50),
        json_mode: true,
        ..ChatRequest::default()
    };
    model(&fake, true).complete(&request, None).await.unwrap();
    let sent = &fake.requests()[0];
    assert_eq!(sent["model"], json!("fake-model"));
    assert_eq!(
        sent["messages"],
        json!([
            {"role": "user", "content": "turn 8: add 8 and 1008"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_9", "type": "function",
                "function": {"name": "add", "arguments": "{\"a\":8,\"b\":1000}"}}]},
            {"role": "tool", "tool_call_id": "call_9", "content": "1008"},
        ])
    );
    assert_eq!(
        sent["tools"],
        json!([{"type": "function", "function": {"name": "add", "description": "Adds two integers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])
    );
    assert_eq!(sent["response_format"], json!({"type": "json_object"}));
    assert_eq!(
        (sent["temperature"].clone(), sent["max_tokens"].clone()),
        (json!(0.0), json!(50))
    );
}

#[tokio::test]
async fn closed_port_is_unreachable() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let base = format!("http://127.0.0.1:{port}/v1");
    let model = OpenAiModel::new(&base, "m", None, Duration::from_secs(5), true, None).unwrap();
    let err = model.complete(&ask("hi"), None).await.unwrap_err();
    match err {
        LlmError::Unreachable { url, .. } => assert_eq!(url, format!("{base}/chat/completions")),
        other => panic!("expected Unreachable, got {other}"),
    }
}

#[tokio::test]
async fn slow_server_is_a_timeout() {
    let fake = FakeOpenAi::start().await;
    fake.push_slow_text("too late", Duration::from_secs(3));
    let timeout = Duration::from_millis(300);
    let model = OpenAiModel::new(&fake.base_url(), "m", None, timeout, true, None).unwrap();
    let err = model.complete(&ask("hi"), None).await.unwrap_err();
    assert!(matches!(err, LlmError::Timeout(t) if t == timeout), "{err}");
}
