//! Model calls against a real local HTTP server that fails the way real endpoints do: rate
//! limits, server errors, a refused key, an unknown model, an over-long prompt, a hang — and a
//! fallback model that answers when the first one cannot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes::config::{ModelConfig, OpenAiConfig};
use hermes::llm::factory::build_model;
use hermes::llm::openai::OpenAiModel;
use hermes::llm::{ChatMessage, ChatModel, ChatRequest, LlmError};
use pretty_assertions::assert_eq;

use crate::common::fake_openai::FakeOpenAi;

fn model(fake: &FakeOpenAi, retries: u32) -> OpenAiModel {
    OpenAiModel::new(
        &fake.base_url(),
        "fake-model",
        Some("sk-test".into()),
        Duration::from_secs(10),
        true,
        None,
    )
    .unwrap()
    .with_retries(retries)
    .with_key_variable(Some("OPENAI_API_KEY".into()))
}

fn ask() -> ChatRequest {
    ChatRequest {
        messages: hermes::llm::shared([ChatMessage::user("hi")]),
        ..ChatRequest::default()
    }
}

#[tokio::test]
async fn rate_limit_is_retried_after_the_servers_retry_after() {
    let fake = FakeOpenAi::start().await;
    fake.push_rate_limited("1");
    fake.push_text("after the wait");
    let started = Instant::now();
    let reply = model(&fake, 3).complete(&ask(), None).await.unwrap();
    assert_eq!(reply.text, "after the wait");
    assert_eq!(fake.requests().len(), 2);
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "Retry-After: 1 must be honoured, waited {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff_until_one_succeeds() {
    let fake = FakeOpenAi::start().await;
    fake.push_error(503, "overloaded");
    fake.push_error(502, "bad gateway");
    fake.push_text("third time lucky");
    let reply = model(&fake, 3).complete(&ask(), None).await.unwrap();
    assert_eq!(reply.text, "third time lucky");
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn persistent_server_error_fails_after_the_retries_with_the_body() {
    let fake = FakeOpenAi::start().await;
    for _ in 0..3 {
        fake.push_error(500, "{\"error\": {\"message\": \"upstream exploded\"}}");
    }
    let err = model(&fake, 2).complete(&ask(), None).await.unwrap_err();
    match &err {
        LlmError::Http {
            status,
            attempts,
            body,
        } => {
            assert_eq!((*status, *attempts), (500, 3));
            assert!(body.contains("upstream exploded"), "{body}");
        }
        other => panic!("expected an Http error, got {other}"),
    }
    assert!(err.to_string().contains("fallback"), "{err}");
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn refused_key_is_an_auth_error_naming_the_variable_and_is_not_retried() {
    let fake = FakeOpenAi::start().await;
    fake.push_error(401, "invalid api key");
    fake.push_error(403, "forbidden");
    for status in [401, 403] {
        let err = model(&fake, 3).complete(&ask(), None).await.unwrap_err();
        assert!(
            matches!(&err, LlmError::Auth { status: s, .. } if *s == status),
            "{err}"
        );
        assert!(err.to_string().contains("$OPENAI_API_KEY"), "{err}");
    }
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn unknown_model_is_model_not_found() {
    let fake = FakeOpenAi::start().await;
    fake.push_error(
        404,
        r#"{"error":{"message":"The model `gpt-9` does not exist","code":"model_not_found"}}"#,
    );
    let err = model(&fake, 3).complete(&ask(), None).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::ModelNotFound { model, .. } if model == "fake-model"),
        "{err}"
    );
    assert!(err.to_string().contains("hermes doctor"), "{err}");
}

#[tokio::test]
async fn over_long_prompt_is_a_context_length_error_with_the_counts() {
    let fake = FakeOpenAi::start().await;
    fake.push_error(
        400,
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 12000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
    );
    let err = model(&fake, 3).complete(&ask(), None).await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            err,
            LlmError::ContextLength {
                limit: Some(8192),
                requested: Some(12000),
                ..
            }
        ),
        "{text}"
    );
    assert!(text.contains("window 8192 tokens") && text.contains("request 12000 tokens"));
    assert_eq!(fake.requests().len(), 1, "a context error is not retried");
}

#[tokio::test]
async fn hanging_endpoint_times_out_per_call() {
    let fake = FakeOpenAi::start().await;
    fake.push_slow_text("too late", Duration::from_secs(5));
    let timeout = Duration::from_millis(300);
    let model = OpenAiModel::new(&fake.base_url(), "m", None, timeout, true, None)
        .unwrap()
        .with_retries(3);
    let started = Instant::now();
    let err = model.complete(&ask(), None).await.unwrap_err();
    assert!(matches!(err, LlmError::Timeout(t) if t == timeout), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "a timeout is not retried"
    );
}

#[tokio::test]
async fn fallback_model_answers_when_the_primary_fails() {
    let primary = FakeOpenAi::start().await;
    let backup = FakeOpenAi::start().await;
    primary.push_error(500, "down");
    primary.push_error(500, "still down");
    backup.push_text("the fallback answers");
    let config = ModelConfig::Openai(OpenAiConfig {
        base_url: Some(primary.base_url()),
        max_retries: 1,
        fallback: Some(Box::new(ModelConfig::Openai(OpenAiConfig {
            base_url: Some(backup.base_url()),
            max_retries: 0,
            ..OpenAiConfig::from_env("backup-model")
        }))),
        ..OpenAiConfig::from_env("primary-model")
    });
    let model: Arc<dyn ChatModel> = build_model(&config, "planner").unwrap();
    let reply = model.complete(&ask(), None).await.unwrap();
    assert_eq!(reply.text, "the fallback answers");
    assert_eq!(primary.requests().len(), 2);
    assert_eq!(backup.requests()[0]["model"], "backup-model");

    primary.push_error(500, "down");
    primary.push_error(500, "down");
    backup.push_error(503, "also down");
    let err = model.complete(&ask(), None).await.unwrap_err();
    assert!(matches!(err, LlmError::BothFailed { .. }), "{err}");
}
