//! What a turn keeps of a provider's reply beyond the neutral message: the parts the provider
//! needs back (stored beside the message, planned with again), the reasoning tokens a
//! provider shows but does not count, and the calibration of token counts for a model
//! tiktoken does not know.

use serde_json::json;

use super::fake::FakePorts;
use super::tests::{calls, last_is_user, says, tool, Session};
use crate::context::tokens::TokenCounter;
use crate::llm::{ProviderPart, Role, Usage};

fn thinking() -> ProviderPart {
    ProviderPart {
        provider: "anthropic".into(),
        model: "claude-x".into(),
        item: json!({"type": "thinking", "thinking": "Adding is what add does.", "signature": "sig"}),
    }
}

/// Calls `add` (with a thinking part and a usage report), then answers.
fn thinking_planner(reported_prompt: u32) -> FakePorts {
    FakePorts::new(move |r| {
        let mut reply = if last_is_user(r) {
            let mut reply = calls("add", json!({"a": 1}));
            reply.parts = vec![thinking()];
            reply.reasoning = "Adding is what add does.".into();
            reply
        } else {
            says("2")
        };
        reply.usage = Some(Usage::new(reported_prompt, 10));
        reply
    })
    .tool(tool("add"), |_| Ok(json!({"result": 2})))
}

#[tokio::test]
async fn a_replys_provider_parts_are_stored_beside_it_and_planned_with_again() {
    let mut s = Session::new(thinking_planner(100));
    let outcome = s.say("add one and one").await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let asked = s
        .log
        .iter()
        .find(|m| !m.message.tool_calls.is_empty())
        .unwrap();
    assert_eq!(asked.message.provider_parts, vec![thinking()]);
    // Shown but not counted by the provider: counted here.
    let usage = asked.usage.unwrap();
    assert_eq!(
        usage.reasoning_tokens,
        s.env.tokens.count_text("Adding is what add does.")
    );
    let seen = s.ports.seen();
    let second = &seen.plans[1];
    let sent = second
        .messages
        .iter()
        .find(|m| m.role == Role::Assistant)
        .unwrap();
    assert_eq!(sent.provider_parts, vec![thinking()]);
    drop(seen);
    // Stored: a restarted process plans with them too.
    s.reload();
    let asked = s
        .log
        .iter()
        .find(|m| !m.message.tool_calls.is_empty())
        .unwrap();
    assert_eq!(asked.message.provider_parts, vec![thinking()]);
}

#[tokio::test]
async fn a_model_tiktoken_does_not_know_learns_its_token_scale_from_the_usage() {
    // The provider counts far more tokens than the stand-in vocabulary: the scale says so.
    let mut s = Session::new(thinking_planner(1_000_000));
    s.env.tokens = TokenCounter::for_model("claude-x").unwrap();
    assert!(!s.env.tokens.is_exact());
    s.say("add one and one").await;
    assert_eq!(
        s.task.token_scale,
        Some(4.0),
        "clamped at the most one sample may say"
    );
    // The model's own tokenizer needs no calibration.
    let mut s = Session::new(thinking_planner(1_000_000));
    s.say("add one and one").await;
    assert_eq!(s.task.token_scale, None);
}
